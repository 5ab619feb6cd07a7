"""CRD validation rules (``x-kubernetes-validations``), evaluated as kube-apiserver evaluates them.

Each rule sits on a schema node and sees that node's value as ``self`` (at the root: the
object, with ``metadata`` reduced to ``name`` and ``generateName``, as Kubernetes binds
it). A rule that mentions ``oldSelf`` is a transition rule: it runs on updates, where
the stored object has a value at the same place (list items are matched by their
``x-kubernetes-list-map-keys``), or always with ``optionalOldSelf: true``, ``oldSelf``
then being an optional. A failing rule reports ``message`` (or ``messageExpression``,
or ``failed rule: <rule>``) at the node's path plus ``fieldPath``, with ``reason`` as its
kind.

Rules run on the plain JSON values (no copies), each under Kubernetes' per-call cost
limit. Not modelled: the per-CRD total cost budget, and compile-time checks against the
schema (a rule that does not compile is reported on every object it applies to).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from mkpolicy.cel import CelError, Environment, Program
from mkpolicy.cel.values import OptionalValue
from mkpolicy.structural.validation import FieldError, join_path, list_item_key, type_name

_ABSENT = object()
_OLD_SELF = re.compile(r"\boldSelf\b")
_KINDS = {
    "FieldValueInvalid": "Invalid value",
    "FieldValueForbidden": "Forbidden",
    "FieldValueRequired": "Required value",
    "FieldValueDuplicate": "Duplicate value",
}


def rule_errors(obj: Any, schema: Mapping[str, Any], old: Any = None) -> list[FieldError]:
    """Every failing ``x-kubernetes-validations`` rule of ``schema`` on ``obj``.

    ``old`` is the stored object on an update (None on a create).
    """
    root = _root_view(obj)
    old_root = _root_view(old) if old is not None else _ABSENT
    return list(_walk(root, schema, old_root, ""))


def _root_view(obj: Any) -> Any:
    if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
        return obj
    meta = {k: v for k, v in obj["metadata"].items() if k in ("name", "generateName")}
    return {**obj, "metadata": meta}


def _walk(value: Any, schema: Mapping[str, Any], old: Any, path: str) -> Iterator[FieldError]:
    rules = schema.get("x-kubernetes-validations")
    if isinstance(rules, list):
        for rule in rules:
            if isinstance(rule, dict) and isinstance(rule.get("rule"), str):
                error = _check(rule, value, old, path)
                if error is not None:
                    yield error
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            sub = props.get(key) if isinstance(props, dict) else None
            if sub is None and isinstance(extra, dict):
                sub = extra
            if isinstance(sub, dict):
                before = old.get(key, _ABSENT) if isinstance(old, dict) else _ABSENT
                yield from _walk(item, sub, before, join_path(path, key))
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            olds = _old_items(value, old, schema)
            for index, item in enumerate(value):
                yield from _walk(item, items, olds[index], f"{path}[{index}]")


def _old_items(value: list[Any], old: Any, schema: Mapping[str, Any]) -> list[Any]:
    """The stored item each item corresponds to: by map keys for ``map`` lists, else none."""
    keys = schema.get("x-kubernetes-list-map-keys")
    if schema.get("x-kubernetes-list-type") != "map" or not isinstance(old, list) or not keys:
        return [_ABSENT] * len(value)
    names = [str(k) for k in keys]
    by_key = {list_item_key(o, names): o for o in old if isinstance(o, dict)}
    return [by_key.get(list_item_key(v, names), _ABSENT) if isinstance(v, dict) else _ABSENT for v in value]


def _check(rule: dict[str, Any], value: Any, old: Any, path: str) -> FieldError | None:
    text = rule["rule"]
    transition = bool(_OLD_SELF.search(text))
    optional_old = rule.get("optionalOldSelf") is True
    if transition and old is _ABSENT and not optional_old:
        return None  # a transition rule has nothing to compare with on a create
    bindings: dict[str, Any] = {"self": value}
    if transition:
        if optional_old:
            bindings["oldSelf"] = OptionalValue(None, False) if old is _ABSENT else OptionalValue(old)
        else:
            bindings["oldSelf"] = old
    where = path + str(rule.get("fieldPath") or "")
    shown = json.dumps(type_name(value))
    try:
        result = _program(text).evaluate(bindings)
    except CelError as exc:
        return FieldError(where, "Invalid value", f"{shown}: failed rule: {text}: {exc.message}")
    if result is True:
        return None
    if result is not False:
        return FieldError(where, "Invalid value", f"{shown}: rule {text!r} did not evaluate to a bool")
    kind = _KINDS.get(str(rule.get("reason") or "FieldValueInvalid"), "Invalid value")
    message = _message(rule, bindings) or f"failed rule: {text}"
    return FieldError(where, kind, f"{shown}: {message}" if kind == "Invalid value" else message)


def _message(rule: dict[str, Any], bindings: dict[str, Any]) -> str:
    expression = rule.get("messageExpression")
    if isinstance(expression, str):
        try:
            text = _program(expression).evaluate(bindings)
        except CelError:
            text = None  # Kubernetes falls back to the static message
        if isinstance(text, str) and text.strip():
            return text
    message = rule.get("message")
    return message if isinstance(message, str) else ""


@functools.lru_cache(maxsize=1024)
def _program(text: str) -> _Compiled:
    try:
        return _Compiled(Program(text, Environment.of(("self", "oldSelf"))), None)
    except CelError as exc:
        return _Compiled(None, exc)


class _Compiled:
    """A compiled rule, or the error compiling it (raised on every evaluation)."""

    __slots__ = ("error", "program")

    def __init__(self, program: Program | None, error: CelError | None) -> None:
        self.program = program
        self.error = error

    def evaluate(self, bindings: dict[str, Any]) -> Any:
        if self.program is None:
            assert self.error is not None
            raise self.error
        return self.program.evaluate(bindings)
