"""Patches that write what they may not write (MKP501, MKP502) or are malformed (MKP503).

Only what the expression's text proves is reported: literal JSON pointers (or their
literal prefix, ``"/metadata/annotations/" + key``) and the fields of ``Object{...}``
literals. A computed path is never guessed at.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mkpolicy.check.celpaths import (
    FieldWrite,
    PatchOp,
    PathTemplate,
    json_patch_ops,
    literal_keys,
    object_writes,
    pointer,
)
from mkpolicy.check.checks.context import Compiled, PolicyContext
from mkpolicy.engine.generic import FORBIDDEN_METADATA, ORIGIN_LABEL, PREBUILT_WORKLOAD_KEY
from mkpolicy.policy.model import check_pointer

OPERATIONS = ("add", "remove", "replace", "move", "copy", "test")
_BAD_ESCAPE = re.compile(r"~(?![01])")


@dataclass(frozen=True)
class Protected:
    """A path a patch must not touch: ``keep`` (must stay as it is) or must stay absent."""

    tokens: tuple[str, ...]
    keep: bool
    reason: str
    #: the field is always there, so removing or replacing a parent loses it
    present: bool = True

    @property
    def pointer(self) -> str:
        """The path as a JSON pointer."""
        return pointer(self.tokens)


def creation_protected(ctx: PolicyContext) -> list[Protected]:
    """What creation patches must leave alone (the invariants the engine checks after each patch)."""
    out = [
        Protected(("apiVersion",), True, "the worker copy keeps the manager's apiVersion"),
        Protected(("kind",), True, "the worker copy keeps the manager's kind"),
        Protected(("metadata", "name"), True, "the worker copy keeps the manager's name (Kueue finds it by name)"),
        Protected(("metadata", "namespace"), True, "the worker copy keeps the manager's namespace"),
        Protected(
            ("metadata", "labels", ORIGIN_LABEL),
            True,
            f"Kueue's origin label {ORIGIN_LABEL} marks the copy as MultiKueue's",
        ),
        Protected(("status",), False, "a worker copy is created without status"),
    ]
    identifier = ctx.policy.spec.creation.workload_identifier
    # Where the prebuilt-workload name may be; only 'annotation' mode says where it always is.
    places = {"context": ("annotations", "labels"), "annotation": ("annotations",), "label": ("labels", "annotations")}
    for place in places.get(identifier, ()):
        out.append(
            Protected(
                ("metadata", place, PREBUILT_WORKLOAD_KEY),
                True,
                f"the prebuilt-workload name ({PREBUILT_WORKLOAD_KEY}) ties the copy to its Workload",
                present=identifier == "annotation",
            )
        )
    for key in FORBIDDEN_METADATA:
        out.append(
            Protected(("metadata", key), False, f"metadata.{key} belongs to the API server or the manager cluster")
        )
    managed_by = ctx.policy.spec.managed_by
    if managed_by is not None:
        out.append(
            Protected(
                tuple(check_pointer(managed_by.path)),
                False,
                "the managedBy field is removed from the worker copy, so that the worker's Kueue runs the job",
            )
        )
    return out


def sync_protected() -> list[Protected]:
    """What sync patches must leave alone when the kind has no status subresource."""
    return [
        Protected(("apiVersion",), True, "sync must not change the manager object's apiVersion"),
        Protected(("kind",), True, "sync must not change the manager object's kind"),
        Protected(("metadata", "name"), True, "sync must not rename the manager's object"),
        Protected(("metadata", "namespace"), True, "sync must not move the manager's object"),
        Protected(("metadata", "uid"), True, "sync must not change the manager object's uid"),
    ]


def check_patches(ctx: PolicyContext) -> None:
    """Run MKP501, MKP502 and MKP503 over every compiled patch."""
    for compiled in ctx.compiled:
        site = compiled.site
        if site.kind not in ("creation", "sync"):
            continue
        ops = json_patch_ops(compiled.ast)
        for op in ops:
            _check_malformed(ctx, compiled, op)
        if site.kind == "creation":
            _check_writes(ctx, compiled, ops, creation_protected(ctx), "MKP501")
        elif ctx.policy.spec.sync.subresource == "status":
            _check_outside_status(ctx, compiled, ops)
        else:
            _check_writes(ctx, compiled, ops, sync_protected(), "MKP502")


# -- MKP503 ------------------------------------------------------------------------------


def _check_malformed(ctx: PolicyContext, compiled: Compiled, op: PatchOp) -> None:
    site = compiled.site
    if op.op_node is None:
        ctx.report("MKP503", f"{site.where}: JSONPatch{{...}} has no op", site.locate(op.node.pos))
        return
    if op.op is not None and op.op not in OPERATIONS:
        ctx.report(
            "MKP503",
            f"{site.where}: op {op.op!r} is not a JSON Patch operation; expected one of {', '.join(OPERATIONS)}",
            site.locate(op.op_node.pos),
        )
        return
    if op.path is None:
        ctx.report("MKP503", f"{site.where}: JSONPatch{{...}} has no path", site.locate(op.node.pos))
    else:
        _check_pointer(ctx, compiled, op.path, "path")
    if op.op in ("move", "copy"):
        if op.from_ is None:
            ctx.report(
                "MKP503",
                f"{site.where}: a {op.op} operation needs from (the path to {op.op} from)",
                site.locate(op.node.pos),
            )
        else:
            _check_pointer(ctx, compiled, op.from_, "from")


def _check_pointer(ctx: PolicyContext, compiled: Compiled, template: PathTemplate, role: str) -> None:
    site = compiled.site
    literal = template.literal
    text = literal if literal is not None else template.prefix
    problem = None
    if literal == "":
        problem = "the empty path is the whole object; patches must name a field (e.g. '/spec/x')"
    elif text and not text.startswith("/"):
        problem = f"expected a JSON pointer starting with '/'; found {text!r}"
    else:
        checked = text if literal is not None else text.rstrip("~")
        if _BAD_ESCAPE.search(checked):
            problem = f"'~' must be written '~0' (and '/' inside a key '~1'); found {text!r}"
    if problem is not None:
        ctx.report("MKP503", f"{site.where}: {role}: {problem}", site.locate(template.pos))


# -- MKP501 / MKP502 ---------------------------------------------------------------------


def _check_writes(
    ctx: PolicyContext, compiled: Compiled, ops: list[PatchOp], protected: list[Protected], rule_id: str
) -> None:
    site = compiled.site
    for op in ops:
        if op.op is None or op.op not in OPERATIONS:
            continue
        for role, template in op.targets():
            problem = _write_problem(op, role, template, protected)
            if problem is not None:
                ctx.report(rule_id, f"{site.where}: {problem}", site.locate(template.pos))
    if site.patch_type == "ApplyConfiguration":
        for write in object_writes(compiled.ast):
            problem = _field_problem(write, protected)
            if problem is not None:
                ctx.report(rule_id, f"{site.where}: {problem}", site.locate(write.pos))


def _write_problem(op: PatchOp, role: str, template: PathTemplate, protected: list[Protected]) -> str | None:
    tokens = tuple(template.known_tokens())
    if not tokens:
        return None
    literal = template.literal is not None
    removes = op.op == "remove" or role == "from"
    shown = template.render("{...}")
    verb = f"{op.op} from {shown}" if role == "from" else f"{op.op} {shown}"
    for item in protected:
        under = tokens[: len(item.tokens)] == item.tokens
        if under:
            if item.keep:
                return f"{verb} changes {item.pointer}: {item.reason}"
            if not removes:
                return f"{verb} sets {item.pointer}: {item.reason}"
            continue
        ancestor = literal and item.tokens[: len(tokens)] == tokens
        if not ancestor or (item.keep and not item.present):
            continue
        if removes and item.keep:
            return f"{verb} removes {item.pointer} with it: {item.reason}"
        if op.op in ("add", "replace") and op.value is not None:
            keys = literal_keys(op.value)
            if keys is None:
                continue
            child = item.tokens[len(tokens)]
            if item.keep and child not in keys and len(item.tokens) == len(tokens) + 1:
                return f"{verb} replaces {shown} without {item.pointer}: {item.reason}"
            if not item.keep and child in keys and len(item.tokens) == len(tokens) + 1:
                return f"{verb} sets {item.pointer}: {item.reason}"
    return None


def _field_problem(write: FieldWrite, protected: list[Protected]) -> str | None:
    known: list[str] = []
    for seg in write.path:
        if seg is None or isinstance(seg, int):
            break
        known.append(seg)
    tokens = tuple(known)
    for item in protected:
        if len(tokens) >= len(item.tokens) and tokens[: len(item.tokens)] == item.tokens:
            verb = "changes" if item.keep else "sets"
            return f"Object{{...}} {verb} {item.pointer}: {item.reason}"
    return None


def _check_outside_status(ctx: PolicyContext, compiled: Compiled, ops: list[PatchOp]) -> None:
    site = compiled.site
    reason = "with sync.subresource status only /status is written back (the status subresource ignores the rest)"
    for op in ops:
        if op.op is None or op.op not in OPERATIONS:
            continue
        for role, template in op.targets():
            tokens = template.known_tokens()
            literal = template.literal
            if literal == "" or (tokens and tokens[0] != "status"):
                shown = template.render("{...}")
                verb = f"{op.op} from {shown}" if role == "from" else f"{op.op} {shown}"
                ctx.report(
                    "MKP502", f"{site.where}: {verb} writes outside /status: {reason}", site.locate(template.pos)
                )
    if site.patch_type == "ApplyConfiguration":
        for write in object_writes(compiled.ast):
            first = write.path[0] if write.path else None
            if isinstance(first, str) and first != "status":
                ctx.report(
                    "MKP502",
                    f"{site.where}: Object{{...}} sets {write.pointer()}, outside /status: {reason}",
                    site.locate(write.pos),
                )
