"""Regular expressions with RE2 semantics: ``matches`` (standard CEL) and Kubernetes'
``find`` / ``findAll``.

Patterns are compiled by Google's RE2 (the ``google-re2`` package), the engine family
cel-go and Kubernetes use (Go's ``regexp`` implements RE2 syntax): matching is linear
in the input, so no pattern can backtrack catastrophically, and Perl features RE2
rejects (look-around, back-references) are errors here too. RE2's program size is
bounded (:data:`MAX_PROGRAM_MEMORY`), so huge patterns fail to compile instead of
exhausting memory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import re2

from mkpolicy.cel.errors import EvalError, no_overload
from mkpolicy.cel.library import function

#: Memory RE2 may use for one compiled pattern.
MAX_PROGRAM_MEMORY = 8 << 20

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False
_OPTIONS.max_mem = MAX_PROGRAM_MEMORY

_CACHE: dict[str, Any] = {}
_CACHED_PATTERN_LENGTH = 4096
_UNANCHORED = getattr(getattr(re2, "_Anchor", None), "UNANCHORED", None)
_NO_MATCH = (-1, -1)


def compile_regex(pattern: str) -> Any:
    """Compile ``pattern`` with RE2 (cached); invalid patterns raise EvalError."""
    found = _CACHE.get(pattern)
    if found is None:
        try:
            found = re2.compile(pattern, _OPTIONS)
        except re2.error as exc:
            detail = exc.args[0] if exc.args else exc
            if isinstance(detail, bytes):
                detail = detail.decode("utf-8", "replace")
            raise EvalError(f"invalid regular expression {pattern!r}: {detail}") from None
        # Only short patterns are kept: long ones (built from input) would make the
        # cache a memory sink.
        if len(pattern) <= _CACHED_PATTERN_LENGTH:
            if len(_CACHE) >= 1024:
                _CACHE.clear()
            _CACHE[pattern] = found
    return found


def _spans(compiled: Any, text: str) -> tuple[bytes, Any] | None:
    """The byte spans of the first match of ``compiled`` in ``text`` (None: no match).

    Calls RE2 directly on the UTF-8 bytes: the wrapper's ``search`` decodes offsets
    back to characters, which costs ten times the match itself.
    """
    data = text.encode("utf-8")
    regexp = getattr(compiled, "_regexp", None)
    if regexp is None or _UNANCHORED is None:  # another google-re2 release: public API
        m = compiled.search(text)
        return None if m is None else (data, None)
    spans = regexp.Match(_UNANCHORED, data, 0, len(data))
    return None if spans[0] == _NO_MATCH else (data, spans)


def search(pattern: str, text: str) -> bool:
    """RE2 ``search``: does ``pattern`` match anywhere in ``text``?"""
    return _spans(compile_regex(pattern), text) is not None


def matcher(pattern: str) -> Callable[[Any, Any], bool]:
    """A ``matches`` implementation for a constant pattern (compiled once, now)."""
    compiled = compile_regex(pattern)
    regexp = getattr(compiled, "_regexp", None)
    if regexp is None or _UNANCHORED is None:
        return _matches
    match = regexp.Match

    def matches_constant(s: Any, p: Any) -> bool:
        if type(s) is not str:
            return _matches(s, p)
        data = s.encode("utf-8")
        return bool(match(_UNANCHORED, data, 0, len(data))[0] != _NO_MATCH)

    return matches_constant


def regex_cost(result: Any, text: Any, pattern: Any, *rest: Any) -> int:
    """cel-go: (size(text) + 1) * 0.1, times size(pattern) * 0.25, both rounded up."""
    if type(text) is not str or type(pattern) is not str:
        return 1
    return max(1, (len(text) + 10) // 10 * ((len(pattern) + 3) // 4))


def _matches(s: Any, pattern: Any) -> bool:
    if type(s) is not str or type(pattern) is not str:
        raise no_overload("matches", s, pattern)
    return search(pattern, s)


def _matches_charged(budget: Any, s: Any, pattern: Any) -> bool:
    # Charged before matching: the cost bounds the work, it must not follow it.
    budget.charge_call(regex_cost(None, s, pattern))
    return _matches(s, pattern)


function("matches", signatures=["(string, string) -> bool"], needs_budget=True)(_matches_charged)
function("matches", signatures=["(string, string) -> bool"], receiver=True, needs_budget=True)(_matches_charged)


@function("find", signatures=["(string, string) -> string"], receiver=True, needs_budget=True)
def find(budget: Any, s: Any, pattern: Any) -> str:
    """The first match of ``pattern`` in ``s``, or ""."""
    if type(s) is not str or type(pattern) is not str:
        raise no_overload("find", s, pattern)
    budget.charge_call(regex_cost(None, s, pattern))
    m = compile_regex(pattern).search(s)
    return m.group(0) if m is not None else ""


@function(
    "findAll",
    signatures=["(string, string) -> list(string)", "(string, string, int) -> list(string)"],
    receiver=True,
    needs_budget=True,
)
def find_all(budget: Any, s: Any, pattern: Any, limit: Any = -1) -> list[str]:
    """All non-overlapping matches (at most ``limit`` when it is not negative)."""
    if type(s) is not str or type(pattern) is not str or type(limit) is not int:
        raise no_overload("findAll", s, pattern, *(() if limit == -1 else (limit,)))
    budget.charge_call(regex_cost(None, s, pattern))
    if limit == 0:
        return []
    out: list[str] = []
    for m in compile_regex(pattern).finditer(s):
        out.append(m.group(0))
        if 0 < limit <= len(out):
            break
    return out
