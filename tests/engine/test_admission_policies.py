"""``mkpolicy export admission``: the rendered policies run with mkpolicy's engine, case by case
against Kueue's job webhook (``pkg/controller/jobframework``: defaults_test.go, validation_test.go)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from mkpolicy.cli.main import main
from mkpolicy.engine.admission_policies import (
    AdmissionOptions,
    admission_manifests,
    evaluate_mutating,
    evaluate_validating,
    managed_by_policy,
    run_mutating,
    suspend_policy,
)
from mkpolicy.errors import PolicyError
from mkpolicy.kube.kueueconfig import KueueConfig
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
    """The MAPs as kube-apiserver runs them, in the order listed and reversed: it runs them in no
    set order, so both must give the same object."""
    maps = [m for m in manifests if m["kind"] == "MutatingAdmissionPolicy"]
    listed, reversed_ = (run_mutating(order, obj, params=params) for order in (maps, maps[::-1]))
    assert listed == reversed_, "the outcome depends on the order the MAPs run in"
    return listed


def _map(name: str, conditions: list[str], expression: str) -> dict[str, Any]:
    return {"kind": "MutatingAdmissionPolicy", "metadata": {"name": name}, "spec": {
        "matchConstraints": {"resourceRules": [{"operations": ["CREATE"]}]}, "reinvocationPolicy": "IfNeeded",
        "matchConditions": [{"name": f"c{i}", "expression": c} for i, c in enumerate(conditions)],
        "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": expression}}]}}  # fmt: skip


# kube-apiserver's dispatcher.go: a MAP is reinvoked only if it applied on the first pass.
def test_a_map_skipped_by_its_match_conditions_is_not_reinvoked() -> None:
    label = _map("label", ['!has(object.metadata.labels)'],
                 'Object{metadata: Object.metadata{labels: {"x": "1"}}}')  # fmt: skip
    after_label = _map("after-label", ["has(object.metadata.labels)"],
                       'Object{metadata: Object.metadata{annotations: {"seen": "x"}}}')  # fmt: skip
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    assert run_mutating([label, after_label], obj)["metadata"] == {
        "name": "c", "labels": {"x": "1"}, "annotations": {"seen": "x"}}  # fmt: skip
    assert run_mutating([after_label, label], obj)["metadata"] == {"name": "c", "labels": {"x": "1"}}
    # tested inside the mutation instead, the MAP applies on the first pass and runs again
    inside = _map("inside", [], 'has(object.metadata.labels) ? Object{metadata: Object.metadata{annotations: '
                  '{"seen": "x"}}} : Object{}')  # fmt: skip
    for order in ([label, inside], [inside, label]):
        assert run_mutating(order, obj)["metadata"]["annotations"] == {"seen": "x"}


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
    # Every binding leaves out kube-system and Kueue's namespace (as Kueue's webhook configurations do)
    # and binds where --namespace-label says; managedJobsNamespaceSelector (its default: the same
    # exclusion) adds nothing more here.
    system = {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", "kueue-system"]}
    assert all(
        d["spec"]["matchResources"]["namespaceSelector"]
        == {"matchLabels": {"kueue": "on"}, "matchExpressions": [system]}
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


# Kueue's configuration: the bindings' namespaceSelector (managedJobsNamespaceSelector) and
# manageJobsWithoutQueueName, as BaseWebhook.Default applies them (base_webhook.go, defaults.go, utils.go).
ON = {"matchLabels": {"kueue": "on"}}


def binding(manifests: list[dict[str, Any]], suffix: str) -> dict[str, Any]:
    return by_name(manifests, suffix, "MutatingAdmissionPolicyBinding")


@pytest.mark.parametrize(
    ("version", "selector"),
    [("v0.19.2", ON), ("v0.17.1", None)],  # ApplyDefaultLocalQueueWithManagedJobsNamespaceSelector is 0.19's
)
def test_the_default_queue_binding_follows_the_kueue_version(
    policy: FrameworkPolicy, version: str, selector: dict[str, Any] | None
) -> None:
    config = KueueConfig(version=version, managed_jobs_namespace_selector=ON)
    manifests = admission_manifests(policy, AdmissionOptions(kueue=config))
    assert (binding(manifests, "-default-queue")["spec"].get("matchResources") or {}).get(
        "namespaceSelector"
    ) == selector
    # A queued object is suspended in every namespace (WorkloadShouldBeSuspended reads no selector for it).
    assert "matchResources" not in binding(manifests, "-suspend")["spec"]


def test_manage_jobs_without_queue_name_suspends_unqueued_objects_where_selected(policy: FrameworkPolicy) -> None:
    base = {"matchExpressions": [{"key": "team", "operator": "Exists"}]}
    plain = admission_manifests(policy, AdmissionOptions(kueue=KueueConfig(managed_jobs_namespace_selector=ON)))
    assert not [m for m in plain if m["metadata"]["name"].endswith("-suspend-unqueued")]
    config = KueueConfig(manage_jobs_without_queue_name=True, managed_jobs_namespace_selector=ON)
    manifests = admission_manifests(policy, AdmissionOptions(namespace_selector=base, kueue=config))
    unqueued = by_name(manifests, "-suspend-unqueued", "MutatingAdmissionPolicy")
    assert binding(manifests, "-suspend-unqueued")["spec"]["matchResources"]["namespaceSelector"] == {
        **ON, **base}  # fmt: skip
    created = evaluate_mutating(unqueued, run())
    assert created["spec"]["suspend"] is True and created["metadata"]["annotations"] == {SUSPENDED_BY_KUEUE: "true"}
    assert evaluate_mutating(unqueued, run(**{QUEUE: "q"})) == run(**{QUEUE: "q"})  # the queued MAP's job


def test_the_cli_reads_kueues_configuration(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "namespace": "kq",
              "manageJobsWithoutQueueName": True, "managedJobsNamespaceSelector": ON}  # fmt: skip
    (tmp_path / "kueue.yaml").write_text(yaml.safe_dump(config))
    args = ["export", "admission", "--policies", str(ROOT / "policies/batchrun.yaml")]
    assert main([*args, "--kueue-config", str(tmp_path / "kueue.yaml")]) == 0
    docs = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]
    system = {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", "kq"]}
    assert binding(docs, "-suspend-unqueued")["spec"]["matchResources"]["namespaceSelector"] == {
        **ON, "matchExpressions": [system]}  # fmt: skip
    assert main([*args, "--managed-jobs-namespace-selector", "{matchLabels: [x]}"]) == 2
    assert "--managed-jobs-namespace-selector.matchLabels: expected a map" in capsys.readouterr().err
    assert main([*args, "--kueue-version", "v0.18.0"]) == 2
    assert "--kueue-version: expected a release mkpolicy follows (v0.19.2, v0.17.1)" in capsys.readouterr().err


def test_cel_bind_is_refused_where_it_would_reach_kube_apiserver(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """MKP607: kube-apiserver's admission CEL has no cel.bind; the export refuses it, located."""
    text = (ROOT / "policies/batchrun.yaml").read_text()
    bound = "isSuspended: 'cel.bind(s, object.spec.?suspend, s.orValue(false))'"
    text = text.replace("isSuspended: 'object.spec.?suspend.orValue(false)'", bound)
    (tmp_path / "batchrun.yaml").write_text(text)
    line = next(i for i, row in enumerate(text.splitlines(), 1) if bound in row)
    column = text.splitlines()[line - 1].index("bind(") + 1
    with pytest.raises(PolicyError) as err:
        suspend_policy(load(str(tmp_path / "batchrun.yaml"))[0])
    assert err.value.message.startswith(
        "MKP607 admission-dialect: policy batchrun: integration.isSuspended uses cel.bind, which kube-apiserver's "
        "admission CEL does not have"
    )
    assert (err.value.location.file, err.value.location.line, err.value.location.column) == (
        str(tmp_path / "batchrun.yaml"), line, column)  # fmt: skip
    assert main(["export", "admission", "--policies", str(tmp_path)]) == 1
    assert f"batchrun.yaml:{line}:{column}" in capsys.readouterr().err
    # The webhook configurations carry no policy CEL: that export still works.
    (tmp_path / "ca.pem").write_bytes(b"-----BEGIN CERTIFICATE-----\n")
    assert main(["export", "admission", "--policies", str(tmp_path), "--webhook", "ns/svc", "--ca-bundle",
                 str(tmp_path / "ca.pem")]) == 0  # fmt: skip
