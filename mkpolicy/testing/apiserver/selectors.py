"""Label and field selectors, parsed and matched as kube-apiserver does.

Label selectors: comma-separated requirements, all of which must hold —
``key``, ``!key``, ``key=v``, ``key==v``, ``key!=v``, ``key in (a,b)``,
``key notin (a,b)``, ``key>N``, ``key<N``. ``!=`` and ``notin`` also match objects
without the label. Field selectors: ``field=v``, ``field==v``, ``field!=v`` on
``metadata.name``, ``metadata.namespace`` and the resource's selectable fields.
A malformed selector is a 400 BadRequest that says what was expected and found.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mkpolicy.testing.apiserver.errors import ApiError, bad_request
from mkpolicy.testing.apiserver.validation import label_value_problems, qualified_name_problems


@dataclass(frozen=True)
class Requirement:
    """One label requirement: ``key <op> values``."""

    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!", "gt", "lt"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy this requirement."""
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op in ("=", "in"):
            return present and value in self.values
        if self.op in ("!=", "notin"):
            return not present or value not in self.values
        # gt / lt: the label must hold an integer.
        if value is None:
            return False
        try:
            number = int(value)
        except ValueError:
            return False
        bound = int(self.values[0])
        return number > bound if self.op == "gt" else number < bound


@dataclass(frozen=True)
class LabelSelector:
    """A parsed label selector; the empty selector matches everything."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """Whether an object with ``labels`` is selected."""
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        """True when the selector selects everything."""
        return not self.requirements


_OPS = frozenset({"==", "!=", "=", "(", ")", ",", "!", ">", "<"})
_TOKEN = re.compile(r"\s*(?:(?P<op>==|!=|=|\(|\)|,|!|>|<)|(?P<word>[^\s=!(),<>]+))")


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None:  # pragma: no cover - every character is an operator or part of a word
            raise _label_error(text, f"an operator or a word at offset {pos}", repr(text[pos]))
        out.append(m.group("op") or m.group("word"))
        pos = m.end()
    return out


def _label_error(text: str, expected: str, found: str) -> ApiError:
    return bad_request(f"unable to parse requirement: labelSelector {text!r}: expected {expected}, found {found}")


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse ``text`` (None or empty: select everything); 400 BadRequest when malformed."""
    if not text or not text.strip():
        return LabelSelector()
    toks = _tokens(text)
    reqs: list[Requirement] = []
    i = 0

    def peek() -> str | None:
        return toks[i] if i < len(toks) else None

    def take(expected: str) -> str:
        nonlocal i
        tok = peek()
        if tok is None:
            raise _label_error(text, expected, "the end of the selector")
        i += 1
        return tok

    while True:
        negated = False
        if peek() == "!":
            take("!")
            negated = True
        key = take("a label key")
        if key in _OPS:
            raise _label_error(text, "a label key", repr(key))
        _check_key(text, key)
        nxt = peek()
        if negated:
            reqs.append(Requirement(key, "!"))
        elif nxt is None or nxt == ",":
            reqs.append(Requirement(key, "exists"))
        elif nxt in ("=", "==", "!="):
            take(nxt)
            value = ""
            if peek() not in (None, ","):
                value = take("a label value")
                if value in _OPS:
                    raise _label_error(text, f"a value after {key}{nxt}", repr(value))
            _check_value(text, value)
            reqs.append(Requirement(key, "!=" if nxt == "!=" else "=", (value,)))
        elif nxt in ("in", "notin"):
            take(nxt)
            if take("'('") != "(":
                raise _label_error(text, f"'(' after {key} {nxt}", repr(toks[i - 1]))
            values: list[str] = []
            while True:
                tok = take("a value or ')'")
                if tok == ")":
                    break
                if tok == ",":
                    continue
                if tok in _OPS:
                    raise _label_error(text, "a value, ',' or ')'", repr(tok))
                _check_value(text, tok)
                values.append(tok)
            if not values and nxt == "in":
                raise _label_error(text, f"at least one value for {key} in (...)", "none")
            reqs.append(Requirement(key, nxt, tuple(values)))
        elif nxt in (">", "<"):
            take(nxt)
            bound = take("an integer")
            if not re.fullmatch(r"-?\d+", bound):
                raise _label_error(text, f"an integer after {key}{nxt}", repr(bound))
            reqs.append(Requirement(key, "gt" if nxt == ">" else "lt", (bound,)))
        else:
            raise _label_error(text, "'=', '==', '!=', 'in', 'notin', '>', '<', ',' or the end", repr(nxt))
        if peek() is None:
            break
        if take("','") != ",":
            raise _label_error(text, "','", repr(toks[i - 1]))
    return LabelSelector(tuple(reqs))


def _check_key(text: str, key: str) -> None:
    problems = qualified_name_problems(key)
    if problems:
        raise bad_request(
            f"unable to parse requirement: labelSelector {text!r}: invalid label key {key!r}: {problems[0]}"
        )


def _check_value(text: str, value: str) -> None:
    problems = label_value_problems(value)
    if problems:
        raise bad_request(
            f"unable to parse requirement: labelSelector {text!r}: invalid label value {value!r}: {problems[0]}"
        )


@dataclass(frozen=True)
class FieldRequirement:
    """``field = value`` or ``field != value``."""

    field: str
    value: str
    equal: bool


@dataclass(frozen=True)
class FieldSelector:
    """A parsed field selector; the empty selector matches everything."""

    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, obj: Mapping[str, Any]) -> bool:
        """Whether ``obj`` is selected."""
        return all((field_value(obj, req.field) == req.value) == req.equal for req in self.requirements)

    @property
    def empty(self) -> bool:
        """True when the selector selects everything."""
        return not self.requirements

    def exact(self, field: str) -> str | None:
        """The value an ``=`` requirement pins ``field`` to (lets a list skip a scan)."""
        for req in self.requirements:
            if req.field == field and req.equal:
                return req.value
        return None


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The string form of the field at dotted ``path`` (``""`` when absent)."""
    value: Any = obj
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return ""
        value = value.get(part)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts, current, escaped = [], [], False
    for ch in text:
        if escaped:
            current.append("\\" + ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == sep:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if escaped:
        current.append("\\")
    parts.append("".join(current))
    return parts


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def parse_field_selector(text: str | None, allowed: Sequence[str]) -> FieldSelector:
    """Parse ``text`` against the ``allowed`` field labels; 400 BadRequest when malformed."""
    if not text or not text.strip():
        return FieldSelector()
    reqs = []
    for part in _split_unescaped(text, ","):
        m = re.fullmatch(r"\s*([^=!\s]+)\s*(==|!=|=)(.*)", part)
        if m is None:
            expected = "'field=value', 'field==value' or 'field!=value'"
            raise bad_request(f"invalid fieldSelector {text!r}: expected {expected}, found {part!r}")
        field, op, value = m.group(1), m.group(2), _unescape(m.group(3).strip())
        if field not in allowed:
            known = ", ".join(f'"{a}"' for a in allowed)
            raise bad_request(f'"{field}" is not a known field selector: only {known}')
        reqs.append(FieldRequirement(field, value, op != "!="))
    return FieldSelector(tuple(reqs))
