"""``mkpolicy export admission``: the rendered policies run with mkpolicy's engine, case by case
against Kueue's job webhook (``pkg/controller/jobframework``: defaults_test.go, validation_test.go)."""

from __future__ import annotations

import copy
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from mkpolicy.cli.main import main
from mkpolicy.engine.admission_policies import (
    AdmissionOptions,
    ManagedByMirror,
    admission_manifests,
    evaluate_mutating,
    evaluate_validating,
    managed_by_mirror_policy,
    managed_by_policy,
    suspend_policy,
)
from mkpolicy.errors import PolicyError
from mkpolicy.policy import FrameworkPolicy, load, loads
from mkpolicy.policy.model import SUSPENDED_BY_KUEUE

ROOT = Path(__file__).resolve().parents[2]
QUEUE = "kueue.x-k8s.io/queue-name"
LOCAL_QUEUE = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "default"}}


@pytest.fixture(scope="module")
def policy() -> FrameworkPolicy:
    return load(str(ROOT / "policies/batchrun.yaml"))[0]


def by_name(manifests: list[dict[str, Any]], suffix: str, kind: str) -> dict[str, Any]:
    return next(m for m in manifests if m["kind"] == kind and m["metadata"]["name"].endswith(suffix))


def run(**labels: str) -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load((ROOT / "examples/batchrun/batchrun.yaml").read_text())
    obj["metadata"]["labels"] = labels
    return obj


@pytest.fixture(scope="module")
def manifests(policy: FrameworkPolicy) -> list[dict[str, Any]]:
    return admission_manifests(policy, AdmissionOptions(managed_owner_kinds=frozenset({"Job.v1.batch"})))


def create(manifests: list[dict[str, Any]], obj: dict[str, Any], params: Any = None) -> dict[str, Any]:
    """The MAPs in the order they are listed, reinvoking the suspend MAP like IfNeeded does."""
    for m in manifests:
        if m["kind"] == "MutatingAdmissionPolicy":
            obj = evaluate_mutating(m, obj, params=params if "paramKind" in m["spec"] else None)
    return evaluate_mutating(by_name(manifests, "-suspend", "MutatingAdmissionPolicy"), obj)


# defaults_test.go TestWorkloadShouldBeSuspended / ApplyDefaultForSuspend: a queued job is suspended.
def test_a_queued_object_is_created_suspended_and_marked(manifests: list[dict[str, Any]]) -> None:
    out = create(manifests, run(**{QUEUE: "team-a-queue"}))
    assert out["spec"]["suspend"] is True
    assert out["metadata"]["annotations"] == {SUSPENDED_BY_KUEUE: "true"}


def test_an_object_without_a_queue_is_left_alone(manifests: list[dict[str, Any]]) -> None:
    assert create(manifests, run()) == run()


def test_the_users_own_suspension_is_not_marked(manifests: list[dict[str, Any]]) -> None:
    obj = run(**{QUEUE: "q"})
    obj["spec"]["suspend"] = True
    out = create(manifests, obj)
    assert out == obj  # no marker: the controller will never lift it


def test_worker_copies_are_left_alone(manifests: list[dict[str, Any]]) -> None:
    obj = run(**{QUEUE: "q", "kueue.x-k8s.io/multikueue-origin": "multikueue"})
    assert create(manifests, obj, params=LOCAL_QUEUE) == obj


def test_children_of_a_kueue_managed_owner_are_left_alone(manifests: list[dict[str, Any]]) -> None:
    obj = run(**{QUEUE: "q"})
    obj["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": True}
    ]
    assert create(manifests, obj) == obj


# defaults_test.go TestApplyDefaultLocalQueue: the default queue only when it exists.
def test_the_default_local_queue(manifests: list[dict[str, Any]]) -> None:
    with_queue = create(manifests, run(), params=LOCAL_QUEUE)
    assert with_queue["metadata"]["labels"] == {QUEUE: "default"}
    assert with_queue["spec"]["suspend"] is True  # reinvoked: the new label queues it
    assert create(manifests, run(), params=None) == run()
    assert create(manifests, run(**{QUEUE: "mine"}), params=LOCAL_QUEUE)["metadata"]["labels"] == {QUEUE: "mine"}


def update(manifests: list[dict[str, Any]], old: dict[str, Any], new: dict[str, Any], params: Any = None) -> list[str]:
    out = []
    for m in manifests:
        if m["kind"] == "ValidatingAdmissionPolicy":
            out += evaluate_validating(
                m, new, old=old, operation="UPDATE", params=params if "paramKind" in m["spec"] else None
            )
    return out


def running(**labels: str) -> dict[str, Any]:
    obj = run(**labels)
    obj["spec"]["suspend"] = False
    return obj


def suspended(**labels: str) -> dict[str, Any]:
    obj = run(**labels)
    obj["spec"]["suspend"] = True
    return obj


# validation_test.go TestValidateJobOnUpdate and TestValidateJobOnCreate.
@pytest.mark.parametrize(
    ("old", "new", "params", "want"),
    [
        (running(**{QUEUE: "a"}), running(**{QUEUE: "b"}), None, ["queue-name]: Invalid value: field is immutable"]),
        (suspended(**{QUEUE: "a"}), suspended(**{QUEUE: "b"}), None, []),
        (
            suspended(**{QUEUE: "a"}),
            suspended(),
            LOCAL_QUEUE,
            ["queue-name must not be empty in namespace with default queue"],
        ),
        (suspended(**{QUEUE: "a"}), suspended(), None, []),
        (
            running(**{QUEUE: "a", "kueue.x-k8s.io/max-exec-time-seconds": "10"}),
            running(**{QUEUE: "a", "kueue.x-k8s.io/max-exec-time-seconds": "20"}),
            None,
            ["max-exec-time-seconds]: Invalid value: field is immutable"],
        ),
        (
            suspended(**{"kueue.x-k8s.io/max-exec-time-seconds": "10"}),
            suspended(**{"kueue.x-k8s.io/max-exec-time-seconds": "20"}),
            None,
            [],
        ),
        (
            running(),
            running(**{"kueue.x-k8s.io/priority-class": "p"}),
            None,
            ["cannot be added to a non-suspended workload"],
        ),
        (suspended(), suspended(**{"kueue.x-k8s.io/priority-class": "p"}), None, []),
        (suspended(**{"kueue.x-k8s.io/priority-class": "p"}), suspended(), None, ["cannot be removed from a workload"]),
        (
            running(**{"kueue.x-k8s.io/prebuilt-workload-name": "a"}),
            running(**{"kueue.x-k8s.io/prebuilt-workload-name": "b"}),
            None,
            ["prebuilt-workload-name: Invalid value: field is immutable"],
        ),
    ],
)
def test_updates(
    manifests: list[dict[str, Any]], old: dict[str, Any], new: dict[str, Any], params: Any, want: list[str]
) -> None:
    got = update(manifests, old, new, params)
    assert len(got) == len(want) and all(w in g for w, g in zip(want, got, strict=True)), got


@pytest.mark.parametrize(
    ("labels", "want"),
    [
        ({QUEUE: "Not_A_Name"}, "must be a lowercase RFC 1123 subdomain"),
        ({"kueue.x-k8s.io/max-exec-time-seconds": "0"}, "should be greater than 0"),
        ({"kueue.x-k8s.io/max-exec-time-seconds": "ten"}, "should be greater than 0"),
    ],
)
def test_create_validation(manifests: list[dict[str, Any]], labels: dict[str, str], want: str) -> None:
    vap = by_name(manifests, "-validate", "ValidatingAdmissionPolicy")
    (message,) = evaluate_validating(vap, run(**labels))
    assert want in message
    assert evaluate_validating(vap, run(**{QUEUE: "team-a.queue-1"})) == []


def test_managed_by_at_creation(policy: FrameworkPolicy) -> None:
    (map_, binding) = managed_by_policy(policy)
    assert binding["spec"]["policyName"] == map_["metadata"]["name"]
    out = evaluate_mutating(map_, run(**{QUEUE: "q"}))
    assert out["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
    mine = run(**{QUEUE: "q"})
    mine["spec"]["managedBy"] = "example.com/other"
    assert evaluate_mutating(map_, mine) == mine


MIRRORED = """\
apiVersion: mkpolicy.io/v1alpha1
kind: FrameworkPolicy
metadata: {name: wf}
spec:
  framework: Workflow.v1alpha1.argoproj.io
  managedBy: {path: /spec/managedBy}
"""


def test_managed_by_mirrored_from_a_label() -> None:
    wf_policy = loads(MIRRORED, "wf.yaml")[0]
    mirror = ManagedByMirror(label="kueue.x-k8s.io/managed-by")
    create_map, _, sticky_map, _ = managed_by_mirror_policy(wf_policy, mirror, AdmissionOptions(map_version="v1beta1"))
    assert create_map["apiVersion"] == "admissionregistration.k8s.io/v1beta1"
    wf: dict[str, Any] = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": "w", "labels": {"kueue.x-k8s.io/managed-by": "kueue.x-k8s.io/multikueue"}},
        "spec": {"entrypoint": "main"},
    }
    created = evaluate_mutating(create_map, wf)
    assert created["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
    assert created["metadata"]["labels"]["workflows.argoproj.io/controller-instanceid"] == "kueue-multikueue"
    other = copy.deepcopy(wf)
    other["metadata"]["labels"]["kueue.x-k8s.io/managed-by"] = "someone-else"
    assert evaluate_mutating(create_map, other) == other
    dropped = copy.deepcopy(created)
    del dropped["spec"]["managedBy"]
    kept = evaluate_mutating(sticky_map, dropped, old=created, operation="UPDATE")
    assert kept["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
    assert evaluate_mutating(sticky_map, created, old=created, operation="UPDATE") == created
    no_spec = copy.deepcopy(dropped)
    del no_spec["spec"]
    assert evaluate_mutating(sticky_map, no_spec, old=created, operation="UPDATE")["spec"] == {
        "managedBy": "kueue.x-k8s.io/multikueue"
    }


def test_expressions_that_need_more_than_the_object_are_refused() -> None:
    text = (
        (ROOT / "policies/batchrun.yaml")
        .read_text()
        .replace("isSuspended: 'object.spec.?suspend.orValue(false)'", "isSuspended: 'params.x'")
    )
    with pytest.raises(PolicyError, match="integration.isSuspended uses params"):
        suspend_policy(loads(text, str(ROOT / "policies/batchrun.yaml"))[0])


def test_the_cli(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert (
        main(
            [
                "export",
                "admission",
                "--policies",
                str(ROOT / "policies/batchrun.yaml"),
                "--managed-by",
                "--namespace-label",
                "kueue=on",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    docs = [d for d in yaml.safe_load_all(out) if d]
    kinds = [d["kind"] for d in docs]
    assert kinds.count("MutatingAdmissionPolicy") == 3 and kinds.count("ValidatingAdmissionPolicy") == 2
    assert all(
        d["spec"]["matchResources"]["namespaceSelector"] == {"matchLabels": {"kueue": "on"}}
        for d in docs
        if d["kind"].endswith("Binding")
    )
    assert (
        main(["export", "admission", "--policies", str(ROOT / "policies/batchrun.yaml"), "--namespace-label", "nope"])
        == 2
    )
    assert "expected KEY=VALUE" in capsys.readouterr().err
    (tmp_path / "p.yaml").write_text(textwrap.dedent(MIRRORED))
    assert main(["export", "admission", "--policies", str(tmp_path)]) == 0
    assert "no policy has spec.integration" in capsys.readouterr().err


def test_controller_rbac(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "controller-rbac", "--policies", str(ROOT / "policies")]) == 0
    out = capsys.readouterr().out
    controller, kueue = [d for d in yaml.safe_load_all(out) if d]
    rules = {(tuple(r["apiGroups"]), tuple(r["resources"])): r["verbs"] for r in controller["rules"]}
    assert rules[(("batch.example.com",), ("batchruns",))] == ["get", "list", "watch", "update", "patch"]
    assert rules[(("tekton.dev",), ("pipelineruns",))] == ["get", "list", "watch", "update", "patch"]
    assert rules[(("kueue.x-k8s.io",), ("workloads/status",))] == ["get", "update", "patch"]
    assert rules[(("argoproj.io",), ("workflows",))] == ["get", "list", "watch", "update", "patch"]
    assert kueue["rules"] == [{"apiGroups": ["batch.example.com"], "resources": ["batchruns"], "verbs": ["get"]},
                              {"apiGroups": ["tekton.dev"], "resources": ["pipelineruns"], "verbs": ["get"]},
                              {"apiGroups": ["argoproj.io"], "resources": ["workflows"], "verbs": ["get"]}]  # fmt: skip
    assert "# left out: policy kueue-job (Job.v1.batch): no spec.integration" in out
