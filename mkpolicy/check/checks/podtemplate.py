"""MKP512: a creation patch that changes what a worker-side Kueue integration compares.

A worker that runs a Kueue integration for the kind adopts the prebuilt Workload and
compares the job with it (Kueue v0.19.2 pkg/controller/jobframework/reconciler.go
``EquivalentToWorkload``, pkg/util/equality/podset.go ``ComparePodSets``): the pod-set
count and minCount, the pod template's ``containers`` and ``initContainers`` (and its
tolerations until admission). The Workload was built from the manager's object, so a copy
whose containers or counts differ ends as Finished/``OutOfSync``: Kueue >= 0.17.8, 0.18.4
and 0.19 then re-dispatches it (a loop), older Kueue finishes the manager's Workload and the
job never runs. Found in JSONPatch paths and ``Object{...}`` fields of creation patches.
"""

from __future__ import annotations

from collections.abc import Iterator

from mkpolicy.cel.ast import Node
from mkpolicy.check.celpaths import json_patch_ops, object_writes, pointer
from mkpolicy.check.checks.context import PolicyContext

#: Fields of a pod template Kueue compares (any change below them counts).
_CONTAINERS = frozenset({"containers", "initContainers"})
#: Fields that usually hold a pod set's count or minCount.
_COUNTS = frozenset({"replicas", "parallelism", "completions", "minCount", "minAvailable"})


def check_pod_templates(ctx: PolicyContext) -> None:
    """MKP512 over every creation patch."""
    for compiled in ctx.compiled:
        site = compiled.site
        if site.kind != "creation":
            continue
        for tokens, pos in _changed(compiled.ast, site.patch_type == "JSONPatch"):
            what = _what(tokens)
            if what is None:
                continue
            ctx.report(
                "MKP512",
                f"{site.where}: changes {what} ({pointer(tokens)}): a worker running a Kueue integration for "
                "this kind compares them with the Workload Kueue built from the manager's object and ends the copy "
                "as OutOfSync; Kueue >= 0.17.8/0.18.4/0.19 then dispatches it again, in a loop, older Kueue strands "
                "the job",
                site.locate(pos),
            )


def _changed(ast: Node, json_patch: bool) -> Iterator[tuple[list[str], int]]:
    if json_patch:
        for op in json_patch_ops(ast):
            for _, template in op.targets():
                if op.op != "test":
                    yield template.known_tokens(), template.pos
        return
    for write in object_writes(ast):
        known: list[str] = []
        for seg in write.path:
            if seg is None:
                break
            known.append(str(seg))
        yield known, write.pos


def _what(tokens: list[str]) -> str | None:
    if tokens and tokens[0] in ("metadata", "status"):
        return None
    for token in tokens:
        if token in _CONTAINERS:
            return f"a pod template's {token}"
    if tokens and tokens[-1] in _COUNTS:
        return "a pod-set count"
    return None


__all__ = ["check_pod_templates"]
