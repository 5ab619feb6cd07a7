"""Adapter semantics (docs/architecture.md, "Semantics"): patches, invariants, failure policy, errors with locations."""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest

import mkpolicy
from mkpolicy.errors import CelError, MkpolicyError, PatchError
from mkpolicy.policy import loads

CTX = mkpolicy.Context(workload_name="wl-1", origin="mk", cluster="worker1")


def policy(spec: str, framework: str = "PipelineRun.v1.tekton.dev") -> mkpolicy.Adapter:
    text = (
        "apiVersion: mkpolicy.io/v1alpha1\nkind: FrameworkPolicy\nmetadata: {name: p}\nspec:\n"
        f"  framework: {framework}\n" + textwrap.indent(textwrap.dedent(spec), "  ")
    )
    return mkpolicy.compile(loads(text, "p.yaml")[0])


def creation(*expressions: str, kind: str = "JSONPatch", extra: str = "") -> mkpolicy.Adapter:
    field = "jsonPatch" if kind == "JSONPatch" else "applyConfiguration"
    lines = [extra.rstrip("\n")] if extra else []
    lines += ["creation:", "  patches:"]
    for e in expressions:
        lines += [f"    - type: {kind}", f"      {field}:", f"        expression: {json.dumps(e)}"]
    return policy("\n".join(lines) + "\n")


def manager(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "tekton.dev/v1",
        "kind": "PipelineRun",
        "metadata": {"name": "pr", "namespace": "ns", "uid": "u-1", "labels": {"dry-run": "false"}},
        "spec": {"managedBy": "kueue.x-k8s.io/multikueue", **spec},
        "status": {"phase": "Pending"},
    }


@pytest.mark.parametrize(
    ("expression", "violation"),
    [
        ("[JSONPatch{op: 'replace', path: '/metadata/name', value: 'x'}]", "metadata.name changed from 'pr' to 'x'"),
        (
            "[JSONPatch{op: 'replace', path: '/metadata/namespace', value: 'other'}]",
            "metadata.namespace changed from 'ns' to 'other'",
        ),
        (
            "[JSONPatch{op: 'add', path: '/metadata/ownerReferences', value: []}]",
            "metadata.ownerReferences must not be set on a worker copy",
        ),
        ("[JSONPatch{op: 'add', path: '/metadata/uid', value: 'u'}]", "metadata.uid must not be set on a worker copy"),
        ("[JSONPatch{op: 'add', path: '/status', value: {}}]", "status must not be set on a worker copy"),
        (
            "[JSONPatch{op: 'add', path: '/spec/managedBy', value: 'x'}]",
            "the managedBy field /spec/managedBy must stay removed",
        ),
        ("[JSONPatch{op: 'replace', path: '/kind', value: 'TaskRun'}]", "kind changed from 'PipelineRun' to 'TaskRun'"),
        (
            "[JSONPatch{op: 'remove', path: '/metadata/labels/kueue.x-k8s.io~1multikueue-origin'}]",
            "the origin label kueue.x-k8s.io/multikueue-origin='mk' was changed or removed",
        ),
        (
            "[JSONPatch{op: 'replace', path: '/metadata/annotations/kueue.x-k8s.io~1prebuilt-workload-name', "
            "value: 'other'}]",
            "the prebuilt-workload annotation kueue.x-k8s.io/prebuilt-workload-name was changed or removed",
        ),
    ],
)
def test_creation_invariants(expression: str, violation: str) -> None:
    adapter = creation(expression)
    with pytest.raises(PatchError) as info:
        adapter.create(manager(), CTX)
    assert info.value.message == f"the patch breaks an invariant: {violation}"
    assert info.value.location.where == "policy p: creation patch #1 (JSONPatch)"
    assert (info.value.location.file, info.value.location.line) == ("p.yaml", 10)


def test_failure_policy_ignore_skips_failing_patches_and_counts_them() -> None:
    adapter = creation(
        "[JSONPatch{op: 'add', path: '/spec/a', value: 1}]",
        "[JSONPatch{op: 'remove', path: '/spec/absent'}]",
        "[JSONPatch{op: 'replace', path: '/metadata/name', value: 'x'}]",
        "[JSONPatch{op: 'add', path: '/spec/b', value: object.spec.nope}]",
        "[JSONPatch{op: 'add', path: '/spec/c', value: 3}]",
        extra="failurePolicy: Ignore\n",
    )
    ignored: list[MkpolicyError] = []
    worker = adapter.create(manager(), CTX, ignored)
    assert worker["spec"] == {"a": 1, "c": 3}
    assert [type(e).__name__ for e in ignored] == ["PatchError", "PatchError", "CelEvalError"]
    assert adapter.ignored_count == 3


def test_failure_policy_fail_stops_at_the_first_error_with_a_file_position() -> None:
    adapter = creation("[JSONPatch{op: 'add', path: '/spec/b', value: object.spec.nope}]")
    with pytest.raises(CelError) as info:
        adapter.create(manager(), CTX)
    err = info.value
    assert err.report() == "p.yaml:10:82: error: no such key: nope [policy p: creation patch #1 (JSONPatch)]"


def test_cel_syntax_error_is_located_in_the_file() -> None:
    with pytest.raises(CelError) as info:
        creation("[JSONPatch{op: 'add', path: '/x', value: 1 +}]")
    assert info.value.location.position() == "p.yaml:10:68"
    assert "syntax error: unexpected '}'" in info.value.message


def test_unknown_variable_is_a_compile_error() -> None:
    with pytest.raises(CelError, match="undeclared reference to 'objet'"):
        creation("[JSONPatch{op: 'add', path: '/x', value: objet.spec}]")


def test_json_patch_expression_of_the_wrong_shape() -> None:
    with pytest.raises(CelError, match="a JSONPatch expression must evaluate to a list of JSONPatch"):
        creation("JSONPatch{op: 'add', path: '/x', value: 1}")
    adapter = creation("[1].map(x, x)")
    with pytest.raises(PatchError, match="element 0 of the JSONPatch list is a int, not a JSONPatch"):
        adapter.create(manager(), CTX)


def test_variables_are_lazy_and_cached_and_see_the_context() -> None:
    adapter = policy(
        """\
        variables:
          - {name: unused, expression: "1 / 0"}
          - {name: where, expression: "cluster + '/' + workloadName + '/' + origin"}
        creation:
          patches:
            - type: ApplyConfiguration
              applyConfiguration:
                expression: "Object{metadata: Object.metadata{annotations: {'at': variables.where}}}"
        """
    )
    worker = adapter.create(manager(), CTX)
    assert worker["metadata"]["annotations"]["at"] == "worker1/wl-1/mk"


def test_variable_errors_name_the_variable() -> None:
    adapter = policy(
        """\
        variables:
          - {name: bad, expression: "object.spec.nope"}
        creation:
          patches:
            - type: JSONPatch
              jsonPatch: {expression: "[JSONPatch{op: 'add', path: '/x', value: variables.bad}]"}
        """
    )
    with pytest.raises(CelError) as info:
        adapter.create(manager(), CTX)
    assert "variable 'bad' failed at p.yaml:7:44" in info.value.message and "no such key: nope" in info.value.message


def test_match_conditions() -> None:
    adapter = policy(
        """\
        matchConditions:
          - {name: notDryRun, expression: "object.metadata.labels[?'dry-run'].orValue('') != 'true'"}
        """
    )
    obj = manager()
    assert adapter.is_managed(obj) == (True, "")
    obj["metadata"]["labels"]["dry-run"] = "true"
    assert adapter.is_managed(obj) == (False, "match condition 'notDryRun' is false")


@pytest.mark.parametrize(("failure_policy", "raises"), [("Fail", True), ("Ignore", False)])
def test_match_condition_errors_follow_the_failure_policy(failure_policy: str, raises: bool) -> None:
    adapter = policy(f"failurePolicy: {failure_policy}\nmatchConditions:\n  - {{name: m, expression: 'object.x'}}\n")
    if raises:
        with pytest.raises(CelError, match="no such key: x"):
            adapter.is_managed(manager())
    else:
        managed, reason = adapter.is_managed(manager())
        assert not managed and reason.startswith("match condition 'm' failed:") and "no such key: x" in reason


def test_managed_by_elsewhere_and_null() -> None:
    kubeflow = policy("managedBy: {path: /spec/runPolicy/managedBy}\n", framework="PyTorchJob.v1.kubeflow.org")
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "j", "namespace": "ns"},
        "spec": {"runPolicy": {"managedBy": "kueue.x-k8s.io/multikueue", "x": 1}},
    }
    assert kubeflow.create(job, CTX)["spec"] == {"runPolicy": {"x": 1}}
    always = policy("managedBy: null\nsync: {mode: none}\n", framework="StatefulSet.v1.apps")
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"}, "spec": {"replicas": 1}}
    assert always.is_managed(sts) == (True, "")
    assert always.create(sts, CTX)["spec"] == {"replicas": 1}
    assert always.sync(sts, {**sts, "status": {"replicas": 1}}, CTX) is None


@pytest.mark.parametrize(
    ("mode", "ctx_identifier", "labels", "annotations"),
    [
        ("context", "annotation", False, True),
        ("context", "label", True, False),
        ("annotation", "label", False, True),
        ("label", "annotation", True, False),
        ("none", "annotation", False, False),
    ],
)
def test_workload_identifier_modes(mode: str, ctx_identifier: str, labels: bool, annotations: bool) -> None:
    adapter = policy(f"creation: {{workloadIdentifier: {mode}}}\n")
    ctx = mkpolicy.Context(workload_name="wl-1", identifier=ctx_identifier)  # type: ignore[arg-type]
    meta = adapter.create(manager(), ctx)["metadata"]
    key = "kueue.x-k8s.io/prebuilt-workload-name"
    assert (key in meta.get("labels", {}), key in meta.get("annotations", {})) == (labels, annotations)


def test_sync_patches_only_write_status() -> None:
    adapter = policy(
        """\
        sync:
          patches:
            - type: JSONPatch
              jsonPatch:
                expression: "[JSONPatch{op: 'add', path: '/status/phase', value: workerObject.status.phase}]"
            - type: JSONPatch
              jsonPatch:
                expression: "[JSONPatch{op: 'add', path: '/metadata/labels/x', value: 'y'}]"
        """
    )
    worker = {"status": {"phase": "Done"}}
    with pytest.raises(PatchError) as info:
        adapter.sync(manager(), worker, CTX)
    assert info.value.message == (
        "the patch breaks an invariant: sync patches may only write /status; this one writes /metadata/labels/x"
    )
    assert info.value.location.where == "policy p: sync patch #2 (JSONPatch)"


def test_sync_with_patches_returns_a_status_merge_patch() -> None:
    adapter = policy(
        """\
        sync:
          patches:
            - type: JSONPatch
              jsonPatch:
                expression: >-
                  [JSONPatch{op: 'replace', path: '/status',
                   value: {'phase': workerObject.status.phase, 'cluster': cluster}}]
        """
    )
    assert adapter.sync(manager(), {"status": {"phase": "Done", "noise": 1}}, CTX) == {
        "status": {"phase": "Done", "cluster": "worker1"}
    }
    assert (
        adapter.sync(
            {**manager(), "status": {"phase": "Done", "cluster": "worker1"}}, {"status": {"phase": "Done"}}, CTX
        )
        is None
    )


def test_sync_without_status_subresource_may_write_the_main_resource() -> None:
    adapter = policy(
        """\
        sync:
          subresource: none
          patches:
            - type: JSONPatch
              jsonPatch:
                expression: "[JSONPatch{op: 'add', path: '/metadata/labels/phase', value: 'Done'}]"
            - type: JSONPatch
              jsonPatch:
                expression: "[JSONPatch{op: 'replace', path: '/metadata/name', value: 'x'}]"
        """
    )
    with pytest.raises(PatchError, match="metadata.name must not change"):
        adapter.sync(manager(), {}, CTX)


def test_hostile_expression_stops_on_the_cost_budget() -> None:
    adapter = creation(
        "[JSONPatch{op: 'add', path: '/x', value: object.spec.items.map(a, object.spec.items.map(b, "
        "object.spec.items.map(c, a + b + c)))}]"
    )
    with pytest.raises(CelError, match="cost limit exceeded"):
        adapter.create(manager(items=list(range(200))), CTX)


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.mark.parametrize(
    ("call", "where"),
    [
        (lambda a, deep: a.create(manager(deep=deep), CTX), "policy p, creation"),
        (lambda a, deep: a.sync(manager(), {"status": deep}, CTX), "policy p, status write-back"),
        (lambda a, deep: mkpolicy.mutate(manager(deep=deep), []), "mutate"),
    ],
    ids=["create", "sync", "mutate"],
)
def test_objects_nesting_too_deeply_are_a_typed_error(call: Any, where: str) -> None:
    adapter = policy("""
        sync:
          patches:
            - type: JSONPatch
              jsonPatch:
                expression: "[JSONPatch{op: 'add', path: '/status/copy', value: workerObject.status}]"
        """)
    call(adapter, nested(20))  # Kubernetes-sized nesting is fine
    with pytest.raises(PatchError, match="expected an object nested at most a few hundred levels deep") as info:
        call(adapter, nested(5_000))
    assert where in str(info.value.location)


def test_sync_patches_replacing_a_field_outside_status_by_another_are_caught() -> None:
    # As many top-level fields before and after, all but one the same objects.
    adapter = policy(
        """\
        sync:
          patches:
            - type: JSONPatch
              jsonPatch:
                expression: >-
                  [JSONPatch{op: 'remove', path: '/spec'}, JSONPatch{op: 'add', path: '/extra', value: 1},
                   JSONPatch{op: 'add', path: '/status/phase', value: 'Done'}]
        """
    )
    with pytest.raises(PatchError) as info:
        adapter.sync(manager(), {"status": {}}, CTX)
    assert info.value.message == (
        "the patch breaks an invariant: sync patches may only write /status; this one writes /spec, /extra"
    )
