"""``mkpolicy export argo-admission``: the manager's admission policies for Argo Workflows through MultiKueue.

Argo's ``Workflow`` has no managedBy of its own. On the manager cluster its CRD gains
``spec.managedBy`` (``mkpolicy export crd-patch``), and these MutatingAdmissionPolicies
(``admissionregistration.k8s.io/v1``, Kubernetes 1.36; ``v1beta1`` on 1.34/1.35 with the
``MutatingAdmissionPolicy`` feature gate and API) keep it right:

* **marked** (CREATE): a Workflow with the label ``mkpolicy.io/managed-by: multikueue`` (users
  never type ``spec.managedBy``: ``argo submit --strict``, the default, refuses fields Argo does
  not know, ``cmd/argo/commands/submit.go``), or created with ``spec.managedBy`` already, gets
  ``spec.managedBy: kueue.x-k8s.io/multikueue`` and the label
  ``workflows.argoproj.io/controller-instanceid`` set to an instance id no Argo controller on the
  manager serves: a controller without ``instanceID`` lists and watches only Workflows *without*
  that label, one with ``instanceID: X`` only ``=X`` (Argo v4 ``util/instanceid/service.go``,
  ``With``), so none of them runs the Workflow on the manager, takes its locks or starts its
  deadline clock (Argo's server refuses to act on it too: ``Validate``);
* **managedBy kept** (UPDATE): Argo's CLI and server round-trip Workflows through Go types
  without ``spec.managedBy`` (suspend, resume, stop, retry): a field the old object had and the
  new one lost comes back from ``oldObject`` — otherwise MultiKueue would reject the job's
  admission check at its next reconcile;
* **instance id kept** (UPDATE): the instance-id label of a MultiKueue Workflow cannot be removed
  or changed, which would hand the Workflow to a manager controller.

Worker copies (labelled ``kueue.x-k8s.io/multikueue-origin``) are never touched; the policy's
creation patches drop both labels from them. Expressions use only what kube-apiserver's
admission CEL offers (optional types; no ``cel.bind``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from mkpolicy.engine import ORIGIN_LABEL
from mkpolicy.errors import PolicyError
from mkpolicy.policy import FrameworkPolicy
from mkpolicy.policy.model import check_pointer
from mkpolicy.policy.resources import plural

#: The label users put on a Workflow meant for MultiKueue (label values cannot hold Kueue's
#: ``kueue.x-k8s.io/multikueue``, so the value is a word the policy maps to it).
MARKER_LABEL = "mkpolicy.io/managed-by"
MARKER_VALUE = "multikueue"
#: Argo's controller instance label, and the instance id no manager controller serves.
INSTANCE_ID_LABEL = "workflows.argoproj.io/controller-instanceid"
INSTANCE_ID = "mkpolicy-multikueue"


@dataclass(frozen=True)
class ArgoAdmission:
    """How the manifests are rendered."""

    map_version: Literal["v1", "v1beta1"] = "v1"
    name_prefix: str = "mkpolicy"
    marker_label: str = MARKER_LABEL
    marker_value: str = MARKER_VALUE
    instance_id: str = INSTANCE_ID


def _label(obj: str, key: str) -> str:
    return f'{obj}.metadata.?labels[?"{key}"].orValue("")'


def manifests(policy: FrameworkPolicy, options: ArgoAdmission = ArgoAdmission()) -> list[dict[str, Any]]:
    """The MutatingAdmissionPolicies and their bindings for ``policy``'s kind (Argo's Workflow).

    Raises :class:`PolicyError` when the policy has no managedBy field under ``/spec`` to set.
    """
    managed_by = policy.spec.managed_by
    if managed_by is None:
        raise PolicyError(f"policy {policy.name}: managedBy: null; expected a managedBy field to set")
    tokens = check_pointer(managed_by.path)
    if len(tokens) != 2 or tokens[0] != "spec":
        raise PolicyError(
            f"policy {policy.name}: managedBy.path {managed_by.path!r}; expected a field directly under /spec "
            "(what export crd-patch declares)"
        )
    field = tokens[1]
    has_field = f"object.?spec.?{field}.hasValue()"
    old_has_field = f"oldObject.?spec.?{field}.hasValue()"
    gvk = policy.spec.gvk
    rules = {
        "apiGroups": [gvk.group],
        "apiVersions": [gvk.version],
        "resources": [plural(policy)],
    }
    not_a_copy = {"name": "not-a-worker-copy", "expression": f'{_label("object", ORIGIN_LABEL)} == ""'}
    set_instance_id = (
        f'Object{{metadata: Object.metadata{{labels: {{"{INSTANCE_ID_LABEL}": "{options.instance_id}"}}}}}}'
    )
    instance_label = {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": set_instance_id}}
    # Whether the Workflow is for MultiKueue is tested in the mutations, not as a matchCondition:
    # another MAP (export admission's managed-by) may set the field, kube-apiserver runs MAPs in
    # no set order and reinvokes only those that applied on the first pass
    # (k8s.io/apiserver/pkg/admission/plugin/policy/mutating/dispatcher.go).
    for_multikueue = (
        f"object.?spec.?{field}.orValue("
        f'{_label("object", options.marker_label)} == "{options.marker_value}" ? "{managed_by.value}" : "")'
        f' == "{managed_by.value}"'
    )
    marked = _policy(
        options,
        "argo-managed-by",
        rules,
        "CREATE",
        [not_a_copy],
        [
            {
                "patchType": "JSONPatch",
                "jsonPatch": {
                    "expression": f"{for_multikueue} && !{has_field} ? "
                    f'[JSONPatch{{op: "add", path: "/spec/{field}", value: "{managed_by.value}"}}] : []'
                },
            },
            {
                "patchType": "ApplyConfiguration",
                "applyConfiguration": {"expression": f"{for_multikueue} ? {set_instance_id} : Object{{}}"},
            },
        ],
    )
    kept = _policy(
        options,
        "argo-managed-by-kept",
        rules,
        "UPDATE",
        [not_a_copy, {"name": "lost-managed-by", "expression": f"{old_has_field} && !{has_field}"}],
        [
            {
                "patchType": "JSONPatch",
                "jsonPatch": {
                    "expression": f'[JSONPatch{{op: "add", path: "/spec/{field}", value: oldObject.spec.{field}}}]'
                },
            }
        ],
    )
    instance_kept = _policy(
        options,
        "argo-instance-id-kept",
        rules,
        "UPDATE",
        [
            not_a_copy,
            {
                "name": "multikueue-instance-id-changed",
                "expression": f'{_label("oldObject", INSTANCE_ID_LABEL)} == "{options.instance_id}" && '
                f'{_label("object", INSTANCE_ID_LABEL)} != "{options.instance_id}"',
            },
        ],
        [instance_label],
    )
    return [*marked, *kept, *instance_kept]


def _policy(
    options: ArgoAdmission,
    what: str,
    rules: dict[str, Any],
    operation: str,
    conditions: list[dict[str, str]],
    mutations: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """One MutatingAdmissionPolicy and its binding."""
    name = f"{options.name_prefix}-{what}"
    api = f"admissionregistration.k8s.io/{options.map_version}"
    labels = {"app.kubernetes.io/name": "mkpolicy", "app.kubernetes.io/managed-by": "mkpolicy-export"}
    policy = {
        "apiVersion": api,
        "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "matchConstraints": {"resourceRules": [{**rules, "operations": [operation]}]},
            "matchConditions": conditions,
            "mutations": mutations,
            "failurePolicy": "Fail",
            "reinvocationPolicy": "IfNeeded",
        },
    }
    binding = {
        "apiVersion": api,
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": labels},
        "spec": {"policyName": name},
    }
    return [policy, binding]


def render(policies: list[FrameworkPolicy], options: ArgoAdmission = ArgoAdmission()) -> str:
    """The manifests of every policy for Argo's Workflow, as a commented YAML stream."""
    import yaml

    header = [
        "MutatingAdmissionPolicies for Argo Workflows through MultiKueue, generated by",
        "'mkpolicy export argo-admission'. Apply them on the MANAGER cluster only, with the Workflow",
        "CRD given spec.managedBy ('mkpolicy export crd-patch'). Submit Workflows for MultiKueue with",
        f"the label {options.marker_label}: {options.marker_value}; no Argo controller on the manager may",
        f"run with instanceID {options.instance_id}.",
    ]
    text = "\n".join(f"# {line}" for line in header) + "\n"
    for policy in policies:
        gvk = policy.spec.gvk
        if (gvk.group, gvk.kind) != ("argoproj.io", "Workflow"):
            continue
        for doc in manifests(policy, options):
            text += "---\n" + str(yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=100))
    return text


__all__ = ["INSTANCE_ID", "INSTANCE_ID_LABEL", "MARKER_LABEL", "MARKER_VALUE", "ArgoAdmission", "manifests", "render"]
