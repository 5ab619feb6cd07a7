"""spec.integration compiled: the GenericJob methods on the shipped BatchRun policy and on
small inline policies (errors located in the policy file)."""

from __future__ import annotations

import copy
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from mkpolicy.engine import compile
from mkpolicy.engine.integration import CompiledIntegration, Finished, same_object
from mkpolicy.engine.podsets import PodSetConflict, empty_info
from mkpolicy.errors import CelError, PatchError
from mkpolicy.policy import load, loads
from mkpolicy.policy.model import SUSPENDED_BY_KUEUE

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def batchrun() -> CompiledIntegration:
    integration = compile(load(str(ROOT / "policies/batchrun.yaml"))[0]).integration
    assert integration is not None
    return integration


def run_object() -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load((ROOT / "examples/batchrun/batchrun.yaml").read_text())
    return obj


def admission(**fields: Any) -> dict[str, Any]:
    info = empty_info("main", 3)
    info.update(fields)
    return info


def test_suspend_marks_and_resume_undoes(batchrun: CompiledIntegration) -> None:
    obj = run_object()
    suspended = batchrun.suspend(obj)
    assert suspended["spec"]["suspend"] is True
    assert suspended["metadata"]["annotations"] == {SUSPENDED_BY_KUEUE: "true"}
    assert batchrun.is_suspended(suspended) and batchrun.suspended_by_kueue(suspended)
    resumed = batchrun.resume(suspended)
    assert resumed["spec"]["suspend"] is False and "annotations" not in resumed["metadata"]
    assert obj == run_object()  # the input is never modified


def test_a_users_suspension_is_never_lifted(batchrun: CompiledIntegration) -> None:
    obj = run_object()
    obj["spec"]["suspend"] = True
    assert batchrun.suspend(obj) == obj  # already suspended: no marker added
    assert batchrun.resume(obj) == obj
    assert batchrun.start(obj, [admission()])["spec"]["suspend"] is True


def test_pod_sets_are_defaulted_and_checked(batchrun: CompiledIntegration) -> None:
    (pod_set,) = batchrun.pod_sets(run_object())
    assert pod_set["name"] == "main" and pod_set["count"] == 3
    assert pod_set["template"]["metadata"] == {"labels": {"app": "etl"}}


def test_start_injects_the_admission_and_stop_restores(batchrun: CompiledIntegration) -> None:
    suspended = batchrun.suspend(run_object())
    pod_sets = batchrun.pod_sets(suspended)
    toleration = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}
    started = batchrun.start(
        suspended,
        [
            admission(
                count=2, nodeSelector={"zone": "a"}, tolerations=[toleration], labels={"kueue.x-k8s.io/podset": "main"}
            )
        ],
    )
    assert started["spec"]["suspend"] is False and batchrun.active(started) is False
    assert started["spec"]["parallelism"] == 2
    template = started["spec"]["template"]
    assert template["metadata"]["labels"] == {"app": "etl", "kueue.x-k8s.io/podset": "main"}
    assert template["spec"]["nodeSelector"] == {"zone": "a"}
    assert template["spec"]["tolerations"] == [toleration]
    stopped = batchrun.stop(started, pod_sets)
    assert batchrun.is_suspended(stopped) and batchrun.suspended_by_kueue(stopped)
    assert same_object(stopped, suspended)
    assert not same_object(started, suspended)


def test_a_conflicting_admission_is_permanent(batchrun: CompiledIntegration) -> None:
    obj = run_object()
    with pytest.raises(PodSetConflict, match="conflict for labels: conflict for key=app, value1=etl, value2=web"):
        batchrun.inject(obj, [admission(labels={"app": "web"})])
    with pytest.raises(PodSetConflict, match="expecting 1 podset, got 2"):
        batchrun.inject(obj, [admission(), admission(name="other")])


@pytest.mark.parametrize(
    ("status", "want"),
    [
        (None, Finished(False)),
        ({"conditions": [{"type": "Complete", "status": "True", "message": "ok"}]}, Finished(True, True, "ok")),
        (
            {"conditions": [{"type": "Failed", "status": "True", "message": "BackoffLimitExceeded"}]},
            Finished(True, False, "BackoffLimitExceeded"),
        ),
        ({"conditions": [{"type": "Failed", "status": "False"}]}, Finished(False)),
    ],
)
def test_finished(batchrun: CompiledIntegration, status: dict[str, Any] | None, want: Finished) -> None:
    obj = run_object()
    if status is not None:
        obj["status"] = status
    assert batchrun.finished(obj) == want


def test_active_and_pods_ready(batchrun: CompiledIntegration) -> None:
    obj = run_object()
    obj["status"] = {"active": 3, "ready": 2}
    assert batchrun.active(obj) is True and batchrun.pods_ready(obj) is False
    obj["status"]["ready"] = 3
    assert batchrun.pods_ready(obj) is True
    assert batchrun.priority_class(obj) is None


BASE = """\
apiVersion: mkpolicy.io/v1alpha1
kind: FrameworkPolicy
metadata: {name: p}
spec:
  framework: Thing.v1.example.com
  integration:
    isSuspended: 'object.spec.?suspend.orValue(false)'
    suspend: [{type: JSONPatch, jsonPatch: {expression: '[JSONPatch{op: "add", path: "/spec/suspend", value: true}]'}}]
    resume: [{type: JSONPatch, jsonPatch: {expression: 'RESUME'}}]
    podSets: 'PODSETS'
    finished: '{"finished": false}'
    active: 'false'
    priorityClass: 'object.spec.?priority.orValue("")'
"""


def integration(
    pod_sets: str = '[{"name": "main", "template": object.spec.template}]',
    resume: str = '[JSONPatch{op: "remove", path: "/spec/suspend"}]',
) -> CompiledIntegration:
    text = BASE.replace("PODSETS", pod_sets).replace("RESUME", resume)
    compiled = compile(loads(text, "p.yaml")[0]).integration
    assert compiled is not None
    return compiled


THING: dict[str, Any] = {
    "apiVersion": "example.com/v1",
    "kind": "Thing",
    "metadata": {"name": "t"},
    "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}},
}


@pytest.mark.parametrize(
    ("pod_sets", "message"),
    [
        ("[]", "expected 1 to 18 podSets; found 0"),
        ('[{"name": "Main", "template": object.spec.template}]', "podSets[0].name: expected a DNS-1123 label"),
        (
            '[{"name": "a", "count": dyn(-1), "template": object.spec.template}]',
            "podSets[0].count: expected an integer >= 0",
        ),
        ('[{"name": "a", "template": dyn({})}]', "podSets[0].template.spec: expected a PodSpec"),
        (
            '[{"name": "a", "template": object.spec.template}, {"name": "a", "template": object.spec.template}]',
            "podSets[1].name: duplicate podSet name 'a'",
        ),
        (
            '[{"name": "a", "minCount": dyn(2), "count": dyn(1), "template": object.spec.template}]',
            "podSets[0].minCount: expected at most count (1); found 2",
        ),
        ('[{"name": "a", "replicas": dyn(2), "template": object.spec.template}]', "unknown field 'replicas'"),
        ("object.spec", "expected a list of podSets; found a map"),
    ],
)
def test_pod_sets_the_workload_api_refuses(pod_sets: str, message: str) -> None:
    with pytest.raises(CelError) as info:
        integration(pod_sets).pod_sets(THING)
    assert message in info.value.message
    assert (info.value.location.file, info.value.location.line) == ("p.yaml", 10)


def test_nineteen_pod_sets_are_refused() -> None:
    many = "[" + ", ".join(f'{{"name": "p{i}", "template": object.spec.template}}' for i in range(19)) + "]"
    with pytest.raises(CelError, match="expected 1 to 18 podSets; found 19"):
        integration(many).pod_sets(THING)
    assert (
        len(integration(many.replace(', {"name": "p18", "template": object.spec.template}', "")).pod_sets(THING)) == 18
    )


def test_a_resume_that_leaves_the_object_suspended_is_an_error() -> None:
    broken = integration(resume="[]")
    suspended = broken.suspend(THING)
    with pytest.raises(PatchError, match="after the resume patches isSuspended is still true"):
        broken.resume(suspended)


def test_a_cel_error_is_located_in_the_policy() -> None:
    with pytest.raises(CelError) as info:
        integration('[{"name": "main", "template": object.spec.missing}]').pod_sets(THING)
    assert info.value.location.line == 10 and "no such key: missing" in info.value.message


def test_priority_class() -> None:
    thing = copy.deepcopy(THING)
    thing["spec"]["priority"] = "high"
    assert integration().priority_class(thing) == "high"


def test_unknown_integration_fields_are_refused() -> None:
    text = BASE.replace("PODSETS", "[]").replace("RESUME", "[]") + "    resumeAll: 'true'\n"
    with pytest.raises(Exception, match="resumeAll") as info:
        loads(textwrap.dedent(text), "p.yaml")
    assert "p.yaml:14" in str(info.value)
