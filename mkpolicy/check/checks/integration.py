"""``spec.integration`` (MKP601-MKP604, MKP607): what can be seen without running the policy.

What needs an object to show (inject then restore gives the original back, podSets the
Workload API accepts, resume undoing only Kueue's suspension) is checked by every
``phase: integration`` case of a policy's test suite (docs/policy-tests.md), with the same
rule IDs.
"""

from __future__ import annotations

from mkpolicy.cel.ast import ListLit, Literal, MapLit, Node
from mkpolicy.check.celpaths import json_patch_ops
from mkpolicy.check.checks.context import Compiled, PolicyContext
from mkpolicy.engine.admission_policies import admission_dialect_gaps
from mkpolicy.engine.podsets import MAX_POD_SETS
from mkpolicy.policy.model import SUSPENDED_BY_KUEUE

_POD_SET_KEYS = frozenset({"name", "count", "template", "minCount", "topologyRequest"})


def check_integration(ctx: PolicyContext) -> None:
    """MKP601 (inject without restore), MKP602 (resume writes beyond suspend), MKP603 (a
    patch writes the suspension marker), MKP604 (a podSets literal the Workload API refuses) and
    MKP607 (what ``mkpolicy export admission`` copies into admission policies uses CEL
    kube-apiserver refuses there)."""
    spec = ctx.policy.spec.integration
    if spec is not None and spec.inject and not spec.restore and spec.stop is None:
        ctx.report(
            "MKP601",
            "integration.inject has patches but integration.restore has none: after an eviction the object "
            "keeps the admission's node selectors and tolerations, and the next admission merges into them "
            "(a conflict fails the Workload); write the template's values back in restore",
            ctx.at(("spec", "integration", "inject"), key=True),
        )
    suspend_paths: set[tuple[str, ...]] = set()
    resume: list[Compiled] = []
    for compiled in ctx.compiled:
        site = compiled.site
        if site.patch_type == "JSONPatch":
            _marker_writes(ctx, compiled)
        if site.kind != "integration":
            continue
        if site.method == "suspend" and site.patch_type == "JSONPatch":
            for op in json_patch_ops(compiled.ast):
                if op.path is not None:
                    suspend_paths.add(tuple(op.path.known_tokens()))
        elif site.method == "resume" and site.patch_type == "JSONPatch":
            resume.append(compiled)
        elif site.method == "podSets":
            _pod_sets_literal(ctx, compiled)
        if site.method in ("isSuspended", "suspend"):
            for offset, construct in admission_dialect_gaps(compiled.ast):
                ctx.report(
                    "MKP607",
                    f"{site.where}: {construct} is not in kube-apiserver's admission CEL, and 'mkpolicy export "
                    "admission' copies this expression into a MutatingAdmissionPolicy: it refuses to export the "
                    "policy (the controller and 'mkpolicy webhook' run it); repeat the bound expression instead",
                    site.locate(offset),
                )
    if spec is not None and all(p.type == "JSONPatch" for p in spec.suspend):
        for compiled in resume:
            for op in json_patch_ops(compiled.ast):
                tokens = tuple(op.path.known_tokens()) if op.path is not None else ()
                if tokens[:3] == ("metadata", "annotations", SUSPENDED_BY_KUEUE):
                    continue  # MKP603
                if op.path is None or not tokens or not any(_within(tokens, s) for s in suspend_paths):
                    shown = op.path.render("{...}") if op.path is not None else "a computed path"
                    ctx.report(
                        "MKP602",
                        f"{compiled.site.where}: writes {shown}, which no suspend patch writes: resume should "
                        "only undo the suspension (anything else changes the user's object on every admission)",
                        compiled.site.locate(op.node.pos),
                    )


def _within(tokens: tuple[str, ...], prefix: tuple[str, ...]) -> bool:
    return tokens[: len(prefix)] == prefix or prefix[: len(tokens)] == tokens


def _marker_writes(ctx: PolicyContext, compiled: Compiled) -> None:
    for op in json_patch_ops(compiled.ast):
        if op.path is None:
            continue
        tokens = op.path.known_tokens()
        if tokens[:3] == ["metadata", "annotations", SUSPENDED_BY_KUEUE]:
            ctx.report(
                "MKP603",
                f"{compiled.site.where}: writes the {SUSPENDED_BY_KUEUE} annotation, which only the controller "
                "sets (when it suspends) and removes (when it resumes): remove this operation",
                compiled.site.locate(op.node.pos),
            )


def _pod_sets_literal(ctx: PolicyContext, compiled: Compiled) -> None:
    node = compiled.ast
    if not isinstance(node, ListLit):
        return  # computed: the engine checks every result against the Workload API
    where = compiled.site.where
    if not node.elements or len(node.elements) > MAX_POD_SETS:
        ctx.report(
            "MKP604",
            f"{where}: the Workload API takes 1 to {MAX_POD_SETS} podSets; this list has {len(node.elements)}",
            compiled.site.locate(node.pos),
        )
    names: dict[str, Node] = {}
    for element in node.elements:
        if not isinstance(element, MapLit):
            continue
        keys = {e.key.value: e for e in element.entries if isinstance(e.key, Literal)}
        for key, entry in keys.items():
            if key not in _POD_SET_KEYS:
                ctx.report(
                    "MKP604",
                    f"{where}: a podSet has no field {key!r} (it has name, count, template, minCount)",
                    compiled.site.locate(entry.key.pos if isinstance(entry.key, Node) else element.pos),
                )
        if "template" not in keys:
            ctx.report(
                "MKP604", f"{where}: a podSet needs a template (a PodTemplateSpec)", compiled.site.locate(element.pos)
            )
        count = keys.get("count")
        if (
            count is not None
            and isinstance(count.value, Literal)
            and not (type(count.value.value) is int and count.value.value >= 0)
        ):
            ctx.report(
                "MKP604",
                f"{where}: count must be an integer >= 0; found {count.value.value!r}",
                compiled.site.locate(count.value.pos),
            )
        name = keys.get("name")
        if name is not None and isinstance(name.value, Literal) and isinstance(name.value.value, str):
            if name.value.value in names:
                ctx.report(
                    "MKP604",
                    f"{where}: duplicate podSet name {name.value.value!r}; names must be unique",
                    compiled.site.locate(name.value.pos),
                )
            names[name.value.value] = name.value
