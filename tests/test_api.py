"""The public Python API exactly as docs/architecture.md lists it."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

import mkpolicy

ROOT = Path(__file__).resolve().parent.parent


def test_design_section_6_walkthrough() -> None:
    policies = mkpolicy.load(str(ROOT / "policies"))
    assert all(isinstance(p, mkpolicy.FrameworkPolicy) for p in policies)
    tekton = next(p for p in policies if p.name == "tekton-pipelinerun")
    adapter = mkpolicy.compile(tekton)
    assert isinstance(adapter, mkpolicy.Adapter)
    ctx = mkpolicy.Context(
        workload_name="wl-1", origin="multikueue", cluster="worker1", workload=None, identifier="annotation"
    )
    obj = {
        "apiVersion": "tekton.dev/v1",
        "kind": "PipelineRun",
        "metadata": {"name": "a", "namespace": "n"},
        "spec": {"managedBy": "kueue.x-k8s.io/multikueue"},
    }
    assert adapter.is_managed(obj) == (True, "")
    worker = adapter.create(obj, ctx)
    assert worker["metadata"]["annotations"]["kueue.x-k8s.io/prebuilt-workload-name"] == "wl-1"
    worker["status"] = {"conditions": [{"type": "Succeeded", "status": "True"}]}
    assert adapter.sync(obj, worker, ctx) == {"status": {"conditions": [{"type": "Succeeded", "status": "True"}]}}


def test_mutate_and_cel_evaluate() -> None:
    out = mkpolicy.mutate(
        {"spec": {"x": 1}},
        [
            {"patchType": "JSONPatch", "expression": "[JSONPatch{op: 'add', path: '/spec/y', value: object.spec.x}]"},
            {"patchType": "ApplyConfiguration", "expression": "Object{spec: Object.spec{z: params.z}}"},
        ],
        schema=None,
        params={"z": "zz"},
    )
    assert out == {"spec": {"x": 1, "y": 1, "z": "zz"}}
    assert mkpolicy.cel.evaluate("object.spec.x + 1", {"object": {"spec": {"x": 41}}}) == 42


@pytest.mark.parametrize(
    ("expression", "bindings", "expected"),
    [
        ("1u + x", {"x": mkpolicy.cel.Uint(2)}, mkpolicy.cel.Uint(3)),
        (
            "t + duration('1h')",
            {"t": dt.datetime(2026, 1, 1, tzinfo=dt.UTC)},
            dt.datetime(2026, 1, 1, 1, tzinfo=dt.UTC),
        ),
        ("d * 2.0", {"d": 1.5}, 3.0),
        ("b'ab' + b", {"b": b"c"}, b"abc"),
        ("duration('90s')", {}, dt.timedelta(seconds=90)),
        ("[null, {'a': [1]}]", {}, [None, {"a": [1]}]),
    ],
)
def test_value_mapping(expression: str, bindings: dict[str, object], expected: object) -> None:
    result = mkpolicy.cel.evaluate(expression, bindings)
    assert result == expected and type(result) is type(expected)


def test_error_hierarchy_and_locations() -> None:
    for cls in (mkpolicy.PolicyError, mkpolicy.CelError, mkpolicy.PatchError, mkpolicy.NotManagedError):
        assert issubclass(cls, mkpolicy.MkpolicyError)
    with pytest.raises(mkpolicy.CelError) as info:
        mkpolicy.cel.evaluate("1 +\n  'a'")
    assert (info.value.location.line, info.value.location.column) == (1, 3)
    assert str(info.value) == "1:3: no such overload: _+_(int, string)"
