"""Labels and annotations a creation patch writes, judged as kube-apiserver judges ObjectMeta.

* MKP510: a constant label key, label value or annotation key the API server refuses
  (:mod:`mkpolicy.structural.objectmeta`, apimachinery's rules and messages): every
  creation fails with 422, on every retry;
* MKP511: a label value built from ``workloadName`` (or the object's name) with no
  truncation: Kueue's workload names run to 253 characters (a job's kind, name and a hash;
  Kueue v0.19.2 pkg/controller/jobframework/workload_names.go, 63 only with its alpha gate
  ``ShortWorkloadNames``), a label value to 63, so long names fail.

Writes are found in JSONPatch operations on ``/metadata/labels/<key>`` (or the whole map
``/metadata/labels``) and in ``Object{metadata: Object.metadata{labels: {...}}}``.
"""

from __future__ import annotations

from collections.abc import Iterator

from mkpolicy.cel.ast import Call, Ident, Literal, MapLit, Node, Select
from mkpolicy.check.celpaths import json_patch_ops, object_writes
from mkpolicy.check.checks.context import Compiled, PolicyContext
from mkpolicy.structural.objectmeta import is_label_key, is_label_value

#: Functions that bound a string's length (a label value built with one is not flagged).
_BOUNDING = frozenset({"substring", "truncate", "sha256", "hash"})


def check_metadata(ctx: PolicyContext) -> None:
    """MKP510 and MKP511 over every creation patch."""
    for compiled in ctx.compiled:
        if compiled.site.kind != "creation":
            continue
        for field, key, key_pos, value in _writes(compiled):
            if key is not None:
                problems = is_label_key(key if field == "labels" else key.lower())
                if problems:
                    message = f"the {field[:-1]} key {key!r} is invalid: {'; '.join(problems)}"
                    _report(ctx, compiled, "MKP510", message, key_pos)
            if field != "labels" or value is None:
                continue
            if isinstance(value, Literal) and isinstance(value.value, str):
                problems = is_label_value(value.value)
                if problems:
                    shown = f"the label value {value.value!r}" + (f" of {key!r}" if key else "")
                    _report(ctx, compiled, "MKP510", f"{shown} is invalid: {'; '.join(problems)}", value.pos)
                continue
            source = _unbounded_name(value)
            if source is not None:
                _report(
                    ctx,
                    compiled,
                    "MKP511",
                    f"the label value{f' of {key!r}' if key else ''} is built from {source} without truncation: "
                    "Kueue's workload names run to 253 characters (63 only with its alpha gate ShortWorkloadNames), "
                    "a label value may have 63, so the worker's API "
                    f"server refuses the copy of every job with a long name; bound it (size({source}) > 63 ? "
                    f"{source}.substring(0, 63) : {source}) or write it as an annotation",
                    value.pos,
                )


def _report(ctx: PolicyContext, compiled: Compiled, rule: str, message: str, pos: int) -> None:
    if rule == "MKP510":
        message += " (the worker's API server answers 422 Unprocessable Entity, on every retry)"
    ctx.report(rule, f"{compiled.site.where}: {message}", compiled.site.locate(pos))


def _writes(compiled: Compiled) -> Iterator[tuple[str, str | None, int, Node | None]]:
    """(``labels``|``annotations``, key or None when computed, key position, value) of each write."""
    if compiled.site.patch_type == "JSONPatch":
        for op in json_patch_ops(compiled.ast):
            if op.op not in ("add", "replace") or op.path is None:
                continue
            tokens = op.path.known_tokens()
            if len(tokens) < 2 or tokens[0] != "metadata" or tokens[1] not in ("labels", "annotations"):
                continue
            if len(tokens) == 3 and op.path.literal is not None:
                yield tokens[1], tokens[2], op.path.pos, op.value
            elif len(tokens) == 2 and op.path.literal is not None and isinstance(op.value, MapLit):
                yield from _map_entries(tokens[1], op.value)
        return
    for write in object_writes(compiled.ast):
        path = write.path
        if len(path) == 3 and path[0] == "metadata" and path[1] in ("labels", "annotations"):
            key = path[2]
            yield str(path[1]), key if isinstance(key, str) else None, write.pos, write.value


def _map_entries(field: str, node: MapLit) -> Iterator[tuple[str, str | None, int, Node | None]]:
    for entry in node.entries:
        key = entry.key
        literal = key.value if isinstance(key, Literal) and isinstance(key.value, str) else None
        yield field, literal, entry.pos, entry.value


def _unbounded_name(node: Node) -> str | None:
    """``workloadName`` (or ``object.metadata.name``...) when ``node`` uses it and nothing bounds its length."""
    source: str | None = None
    for sub in node.walk():
        if isinstance(sub, Call) and sub.function in _BOUNDING:
            return None
        if isinstance(sub, Ident) and sub.name == "workloadName":
            source = "workloadName"
        elif (
            source is None
            and isinstance(sub, Select)
            and sub.field == "name"
            and isinstance(sub.operand, Select)
            and sub.operand.field == "metadata"
        ):
            source = _render(sub)
    return source


def _render(node: Node) -> str:
    if isinstance(node, Select):
        return f"{_render(node.operand)}.{node.field}"
    if isinstance(node, Ident):
        return node.name
    return "..."


__all__ = ["check_metadata"]
