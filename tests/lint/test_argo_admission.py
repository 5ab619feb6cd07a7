"""``mkpolicy export argo-admission``: the manager's MutatingAdmissionPolicies for Argo Workflows,
evaluated as kube-apiserver evaluates them (match conditions, then the mutations in order) with
mkpolicy's CEL and mutation engine."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

import mkpolicy
from mkpolicy.cel import evaluate
from mkpolicy.cli.main import main
from mkpolicy.engine.mutate import mutate
from mkpolicy.errors import PolicyError
from mkpolicy.lint.argo_admission import ArgoAdmission, manifests
from mkpolicy.policy.loader import loads

ROOT = Path(__file__).resolve().parents[2]
POLICY = mkpolicy.load(str(ROOT / "policies" / "argo-workflow.yaml"))[0]
MK = "kueue.x-k8s.io/multikueue"
INSTANCE = "workflows.argoproj.io/controller-instanceid"


def admit(docs: list[dict[str, Any]], obj: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    """``obj`` after every policy of ``docs`` that matches its operation (CREATE without ``old``)."""
    operation = "UPDATE" if old is not None else "CREATE"
    current = copy.deepcopy(obj)
    for doc in docs:
        if doc["kind"] != "MutatingAdmissionPolicy":
            continue
        spec = doc["spec"]
        (rule,) = spec["matchConstraints"]["resourceRules"]
        assert (rule["apiGroups"], rule["apiVersions"], rule["resources"]) == (
            ["argoproj.io"],
            ["v1alpha1"],
            ["workflows"],
        )
        if operation not in rule["operations"]:
            continue
        bindings = {"object": current, "oldObject": old}
        if not all(evaluate(c["expression"], bindings) is True for c in spec["matchConditions"]):
            continue
        mutations = [
            {
                "patchType": m["patchType"],
                "expression": (m.get("jsonPatch") or m.get("applyConfiguration"))["expression"],
            }
            for m in spec["mutations"]
        ]
        current = mutate(current, mutations, old=old)
    return current


def workflow(labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "etl", "namespace": "data"}
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "metadata": meta,
            "spec": {"entrypoint": "main", **spec}}  # fmt: skip


MARKED = {"mkpolicy.io/managed-by": "multikueue", "kueue.x-k8s.io/queue-name": "q"}
MANAGED = workflow({**MARKED, INSTANCE: "mkpolicy-multikueue"}, managedBy=MK)


@pytest.mark.parametrize(
    ("obj", "old", "expected"),
    [
        # CREATE: the label marks it; spec.managedBy and the manager-only instance id are set
        (workflow(MARKED), None, MANAGED),
        (workflow(managedBy=MK), None, workflow({INSTANCE: "mkpolicy-multikueue"}, managedBy=MK)),
        (workflow({"team": "a"}), None, workflow({"team": "a"})),
        (workflow(), None, workflow()),
        (
            workflow({"mkpolicy.io/managed-by": "something-else"}),
            None,
            workflow({"mkpolicy.io/managed-by": "something-else"}),
        ),
        (workflow(MARKED, managedBy="other"), None, workflow(MARKED, managedBy="other")),
        # a worker copy is never touched, whatever it carries
        (
            workflow({**MARKED, "kueue.x-k8s.io/multikueue-origin": "mk"}),
            None,
            workflow({**MARKED, "kueue.x-k8s.io/multikueue-origin": "mk"}),
        ),
        # UPDATE: Argo's CLI round trip dropped spec.managedBy: it comes back from oldObject
        (
            workflow({**MARKED, INSTANCE: "mkpolicy-multikueue"}, suspend=True),
            MANAGED,
            workflow({**MARKED, INSTANCE: "mkpolicy-multikueue"}, suspend=True, managedBy=MK),
        ),
        (MANAGED, MANAGED, MANAGED),
        # the instance id cannot be removed or changed while it is MultiKueue's
        (workflow(MARKED, managedBy=MK), MANAGED, MANAGED),
        (workflow({**MARKED, INSTANCE: "prod"}, managedBy=MK), MANAGED, MANAGED),
        # a Workflow MultiKueue never managed: updates pass as they are
        (workflow({"team": "a"}, suspend=True), workflow({"team": "a"}), workflow({"team": "a"}, suspend=True)),
    ],
    ids=[
        "create-marked",
        "create-with-managedBy",
        "create-unmarked",
        "create-no-labels",
        "create-other-marker-value",
        "create-other-managedBy",
        "create-worker-copy",
        "update-round-trip-lost-managedBy",
        "update-unchanged",
        "update-instance-id-removed",
        "update-instance-id-changed",
        "update-not-multikueue",
    ],
)
def test_the_policies_as_kube_apiserver_applies_them(
    obj: dict[str, Any], old: dict[str, Any] | None, expected: dict[str, Any]
) -> None:
    assert admit(manifests(POLICY), obj, old) == expected


def test_the_instance_id_and_the_api_version_are_options() -> None:
    docs = manifests(POLICY, ArgoAdmission("v1beta1", instance_id="kueue-only"))
    assert {d["apiVersion"] for d in docs} == {"admissionregistration.k8s.io/v1beta1"}
    assert admit(docs, workflow(MARKED))["metadata"]["labels"][INSTANCE] == "kueue-only"
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("MutatingAdmissionPolicy", "mkpolicy-argo-managed-by"),
        ("MutatingAdmissionPolicyBinding", "mkpolicy-argo-managed-by"),
        ("MutatingAdmissionPolicy", "mkpolicy-argo-managed-by-kept"),
        ("MutatingAdmissionPolicyBinding", "mkpolicy-argo-managed-by-kept"),
        ("MutatingAdmissionPolicy", "mkpolicy-argo-instance-id-kept"),
        ("MutatingAdmissionPolicyBinding", "mkpolicy-argo-instance-id-kept"),
    ]
    assert all(d["spec"]["policyName"] == d["metadata"]["name"] for d in docs if d["kind"].endswith("Binding"))


def test_a_policy_without_a_spec_managed_by_is_refused() -> None:
    text = (ROOT / "policies" / "argo-workflow.yaml").read_text()
    policy = loads(text.replace("spec:\n  framework:", "spec:\n  managedBy: null\n  framework:"), "a.yaml")[0]
    with pytest.raises(PolicyError, match="managedBy: null; expected a managedBy field to set"):
        manifests(policy)


def test_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["export", "argo-admission", "--policies", str(ROOT / "policies"), "--map-version", "v1beta1"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("# MutatingAdmissionPolicies for Argo Workflows through MultiKueue")
    docs = [d for d in yaml.safe_load_all(out) if d is not None]
    assert docs == manifests(POLICY, ArgoAdmission("v1beta1"))
