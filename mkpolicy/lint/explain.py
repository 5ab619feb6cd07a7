"""``mkpolicy explain``: what a policy does, phase by phase, from its CEL syntax trees.

:func:`explain` builds a plain-data description (also the ``-o json`` output);
:func:`render_text` turns it into the text report.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

from mkpolicy.cel import Environment
from mkpolicy.check.celpaths import Access, accesses, json_patch_ops, object_writes
from mkpolicy.check.sites import Site, sites
from mkpolicy.engine.expressions import POLICY_VARIABLES, Locator, PolicyExpression
from mkpolicy.engine.generic import ORIGIN_LABEL, PREBUILT_WORKLOAD_KEY
from mkpolicy.errors import CelError
from mkpolicy.policy import FrameworkPolicy

_FAILURE = {
    "Fail": "an evaluation error stops the step: the job is not created, or the status is not written",
    "Ignore": "a failing patch is skipped (and counted); the other patches still apply",
}


def _reads(found: list[Access]) -> list[str]:
    out: list[str] = []
    for access in found:
        text = access.render() + (" (presence)" if access.test else "")
        if text not in out:
            out.append(text)
    return out


def _writes(site: Site, expression: PolicyExpression) -> list[str]:
    out: list[str] = []
    if site.patch_type == "JSONPatch":
        for op in json_patch_ops(expression.ast):
            name = op.op or "{computed op}"
            path = op.path.render("*") if op.path is not None else "{no path}"
            text = f"{name} {path}"
            if op.from_ is not None and op.op in ("move", "copy"):
                text += f" (from {op.from_.render('*')})"
            if op.op == "test":
                text = f"test {path} (the whole patch is skipped unless it holds)"
            if text not in out:
                out.append(text)
        if not out:
            out.append("{computed: the expression builds its operations at run time}")
    elif site.patch_type == "ApplyConfiguration":
        for write in object_writes(expression.ast):
            text = f"merge {write.pointer()}"
            if text not in out:
                out.append(text)
        if not out:
            out.append("{computed: the Object{...} is built at run time}")
    return out


def _expression_entry(site: Site, env: Environment, locator: Locator) -> dict[str, Any]:
    loc = site.locate(0)
    entry: dict[str, Any] = {"where": site.where, "line": loc.line, "expression": site.text.strip()}
    if site.name is not None:
        entry["name"] = site.name
    if site.patch_type is not None:
        entry["type"] = site.patch_type
    try:
        expression = PolicyExpression(site.text, site.path, site.where, locator, env)
    except CelError as exc:
        entry["error"] = f"does not compile: {exc}"
        return entry
    entry["reads"] = _reads(accesses(expression.ast))
    if site.patch_type is not None:
        entry["writes"] = _writes(site, expression)
    return entry


def explain(policy: FrameworkPolicy) -> dict[str, Any]:
    """A plain-data description of ``policy``: managedBy, conditions, variables, phases."""
    spec = policy.spec
    gvk = spec.gvk
    env = Environment.of(POLICY_VARIABLES)
    locator = Locator(policy)
    entries = {"matchCondition": [], "variable": [], "creation": [], "sync": []}  # type: dict[str, list[Any]]
    for site in sites(policy):
        entries[site.kind].append(_expression_entry(site, env, locator))
    managed_by = {"path": spec.managed_by.path, "value": spec.managed_by.value} if spec.managed_by is not None else None
    identifier = spec.creation.workload_identifier
    placement = {
        "context": "annotation (or label, as the context says; Kueue's WorkloadIdentifierAnnotations gate)",
        "annotation": "annotation, always",
        "label": "label, always (annotation for names longer than 63 characters)",
        "none": "left out",
    }[identifier]
    generic = [
        "copy apiVersion, kind, metadata.{name, namespace, labels, annotations} and spec",
        f"add label {ORIGIN_LABEL}=<origin>",
        f"prebuilt-workload name {PREBUILT_WORKLOAD_KEY}: {placement}",
    ]
    if spec.managed_by is not None:
        generic.insert(1, f"remove {spec.managed_by.path}")
    if spec.sync.mode == "none":
        sync_result = "nothing: sync.mode is none (the manager's status is never written)"
    elif not spec.sync.patches:
        sync_result = "status := workerObject.status (Kueue's generic adapter)"
    else:
        sync_result = "the patches apply in order to the manager's object"
    target = (
        "JSON merge patch of /status for the status subresource"
        if spec.sync.subresource == "status"
        else "JSON merge patch of the manager's object (no status subresource)"
    )
    return {
        "policy": policy.name,
        "file": policy.file,
        "framework": str(gvk),
        "apiVersion": gvk.api_version,
        "kind": gvk.kind,
        "schema": spec.schema_,
        "failurePolicy": {"value": spec.failure_policy, "meaning": _FAILURE[spec.failure_policy]},
        "managedBy": managed_by,
        "matchConditions": entries["matchCondition"],
        "variables": entries["variable"],
        "creation": {"generic": generic, "workloadIdentifier": identifier, "patches": entries["creation"]},
        "sync": {
            "mode": spec.sync.mode,
            "subresource": spec.sync.subresource,
            "behaviour": sync_result,
            "result": target + "; nothing when it is empty",
            "patches": entries["sync"],
        },
    }


def _render_entry(entry: dict[str, Any], label: str) -> list[str]:
    line = f"  {label}" + (f"  (line {entry['line']})" if entry.get("line") else "")
    out = [line]
    if "error" in entry:
        out.append(f"      {entry['error']}")
        return out
    reads = ", ".join(entry["reads"]) or "nothing (a constant)"
    out.append(
        textwrap.fill(
            reads,
            100,
            initial_indent="      reads:  ",
            subsequent_indent=" " * 14,
            break_on_hyphens=False,
            break_long_words=False,
        )
    )
    for i, write in enumerate(entry.get("writes", [])):
        out.append(("      writes: " if i == 0 else "              ") + write)
    return out


def render_text(info: dict[str, Any]) -> str:
    """The text report of :func:`explain`'s result."""
    lines = [
        f"policy {info['policy']}" + (f" ({info['file']})" if info.get("file") else ""),
        f"framework: {info['framework']} (apiVersion {info['apiVersion']}, kind {info['kind']})",
    ]
    if info["schema"]:
        lines.append(f"schema: {info['schema']}")
    failure = info["failurePolicy"]
    lines.append(f"failure policy: {failure['value']}: {failure['meaning']}")
    lines += ["", "managed when:"]
    managed_by = info["managedBy"]
    if managed_by is None:
        lines.append("  always (managedBy: null: the kind has no managedBy field)")
    else:
        lines.append(f"  {managed_by['path']} == {json.dumps(managed_by['value'])}")
    for entry in info["matchConditions"]:
        lines += _render_entry(entry, f"and match condition {entry['name']!r}: {entry['expression']}")
    if info["variables"]:
        lines += ["", "variables (evaluated on first use):"]
        for entry in info["variables"]:
            lines += _render_entry(entry, f"variables.{entry['name']} = {entry['expression']}")
    creation = info["creation"]
    lines += ["", "creation (the worker copy):"]
    lines += [f"  generic: {step}" for step in creation["generic"]]
    if not creation["patches"]:
        lines.append("  no patches: exactly Kueue's generic adapter")
    for i, entry in enumerate(creation["patches"]):
        lines += _render_entry(entry, f"patch #{i + 1} {entry['type']}")
    sync = info["sync"]
    lines += ["", f"sync (status write-back, mode {sync['mode']}, subresource {sync['subresource']}):"]
    lines.append(f"  {sync['behaviour']}")
    for i, entry in enumerate(sync["patches"]):
        lines += _render_entry(entry, f"patch #{i + 1} {entry['type']}")
    if sync["mode"] != "none":
        lines.append(f"  result: {sync['result']}")
    return "\n".join(lines) + "\n"
