"""The catalog of lint rules: stable IDs, names, default severities and one-line summaries.

Rule IDs never change meaning and are never reused. Each rule is documented (what it
catches, why, how to fix it) in ``docs/lint-rules.md`` under a heading
``## MKPnnn name``; the project's tests check that the catalog and the page agree.

Families:

* ``MKP1xx`` the policy document (YAML, fields, duplicates, the schema file);
* ``MKP2xx`` CEL expressions (syntax, compilation, types, cost, usage);
* ``MKP3xx`` the managedBy field;
* ``MKP4xx`` format features stock Kueue's generic adapter cannot honour (warnings);
* ``MKP5xx`` patches that write what they may not write, or are malformed;
* ``MKP6xx`` the declarative Kueue integration (``spec.integration``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Rule:
    """One lint rule."""

    id: str
    name: str
    severity: Severity
    summary: str


_CATALOG = [
    # -- the document -------------------------------------------------------------------
    Rule("MKP101", "yaml-syntax", "error", "The file is not well-formed YAML."),
    Rule("MKP102", "invalid-field", "error", "A field is missing, has the wrong type or an invalid value."),
    Rule("MKP103", "unknown-field", "error", "A field that FrameworkPolicy documents do not have."),
    Rule("MKP104", "duplicate-framework", "error", "Two policies claim the same framework GVK."),
    Rule("MKP105", "duplicate-name", "error", "Two variables or match conditions share a name."),
    Rule("MKP106", "not-a-policy", "error", "A file named on the command line holds a document that is not a policy."),
    Rule("MKP107", "schema-unreadable", "error", "spec.schema cannot be read or does not describe the version."),
    Rule("MKP108", "schema-mismatch", "error", "spec.schema is the CRD of another kind or group."),
    Rule("MKP109", "schema-too-big", "warning", "spec.schema is too big to deploy in a ConfigMap beside the policy."),
    # -- CEL ----------------------------------------------------------------------------
    Rule("MKP201", "cel-syntax", "error", "A CEL expression does not parse."),
    Rule("MKP202", "cel-compile", "error", "A CEL expression does not compile as Kubernetes compiles it."),
    Rule("MKP203", "patch-result-type", "error", "A patch expression cannot produce what its patch type needs."),
    Rule("MKP204", "cel-type", "error", "A CEL expression does not type-check against the framework's schema."),
    Rule("MKP205", "cost-over-budget", "warning", "An expression's worst-case cost exceeds the per-call budget."),
    Rule("MKP206", "constant-match-condition", "warning", "A match condition does not depend on the object."),
    Rule("MKP207", "unused-variable", "warning", "A variable no expression uses."),
    Rule("MKP208", "unknown-variable", "error", "An expression uses variables.<name> for an undeclared name."),
    Rule("MKP209", "worker-object-in-creation", "warning", "workerObject is always null during creation."),
    Rule("MKP210", "params-unset", "warning", "An expression reads params, but spec.params is not set."),
    Rule("MKP211", "has-required-field", "warning", "has() on a field the schema requires is never false."),
    Rule("MKP212", "mixed-literal", "warning", "A list or map literal mixes types; Kubernetes' type check flags it."),
    Rule("MKP213", "cost-always-over-budget", "error", "An expression's least cost, on any object, exceeds the limit."),
    # -- managedBy ----------------------------------------------------------------------
    Rule("MKP301", "managed-by-not-in-schema", "error", "managedBy.path names a field the schema does not have."),
    Rule("MKP302", "managed-by-not-string", "error", "managedBy.path names a field that is not a string."),
    # -- stock Kueue compatibility ------------------------------------------------------
    Rule("MKP401", "managed-by-path", "warning", "Stock Kueue only checks /spec/managedBy."),
    Rule("MKP402", "managed-by-null", "warning", "Stock Kueue needs a managedBy field; managedBy: null has none."),
    Rule("MKP403", "managed-by-value", "warning", "Stock Kueue only accepts kueue.x-k8s.io/multikueue."),
    Rule("MKP404", "sync-mode-none", "warning", "Stock Kueue always writes the worker's status back."),
    Rule("MKP405", "sync-subresource-none", "warning", "Stock Kueue writes status through the status subresource."),
    Rule("MKP406", "workload-identifier", "warning", "Stock Kueue places the prebuilt-workload name itself."),
    Rule("MKP407", "match-conditions-on-the-wire", "warning", "Match conditions cannot keep Kueue from dispatching."),
    # -- patches ------------------------------------------------------------------------
    Rule("MKP501", "creation-breaks-invariant", "error", "A creation patch writes a field the worker copy must keep."),
    Rule("MKP502", "sync-writes-outside-status", "error", "A sync patch writes a field sync may not change."),
    Rule("MKP503", "malformed-json-patch", "error", "A JSONPatch operation is malformed (op, path, from)."),
    Rule("MKP504", "undeclared-path", "error", "A patch reads or replaces a field the schema does not declare."),
    Rule("MKP505", "pruned-field", "warning", "A JSONPatch adds a field the schema does not declare: it is pruned."),
    Rule("MKP506", "value-type", "error", "A patch writes a value of another type than the schema declares."),
    Rule("MKP507", "label-value-not-string", "error", "A label or annotation value that is not a string."),
    Rule("MKP508", "apply-atomic", "error", "An ApplyConfiguration sets an atomic list, map or struct."),
    Rule("MKP509", "apply-map-list-keys", "error", "An ApplyConfiguration map-list item sets none of the list's keys."),
    Rule(
        "MKP510", "invalid-label", "error", "A constant label key or value (or annotation key) the API server refuses."
    ),
    Rule("MKP511", "unbounded-label-value", "warning", "A label value built from a name with no truncation to 63."),
    Rule("MKP512", "pod-template-change", "warning", "A creation patch changes a pod template's containers or counts."),
    # -- integration --------------------------------------------------------------------
    Rule("MKP601", "inject-without-restore", "error", "integration.inject has patches and restore has none."),
    Rule("MKP602", "resume-beyond-suspend", "warning", "A resume patch writes a field no suspend patch writes."),
    Rule("MKP603", "marker-written", "error", "A patch writes the suspended-by-kueue annotation the controller owns."),
    Rule("MKP604", "pod-sets-shape", "error", "integration.podSets does not fit the Workload API's podSets."),
    Rule("MKP605", "inject-restore-round-trip", "error", "restore(inject(object)) is not the object (test suites)."),
    Rule("MKP606", "resume-lifts-user-suspend", "error", "resume changes an object the user suspended (test suites)."),
    Rule(
        "MKP607",
        "admission-dialect",
        "warning",
        "isSuspended or a suspend patch uses CEL kube-apiserver's admission policies refuse (cel.bind).",
    ),
]

#: Rule ID -> rule, in catalog order.
RULES: dict[str, Rule] = {rule.id: rule for rule in _CATALOG}
