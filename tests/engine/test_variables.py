"""Policy variables: what the engine knows at compile time, and when variables are evaluated.

Kubernetes evaluates variables lazily against the expression that reads them. The engine
computes constants once at compile time, keeps variables that do not depend on ``object``
for a whole call and recomputes the others for every version of ``object``; the values an
expression sees are the same as if every variable were evaluated on each read.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest

import mkpolicy
from mkpolicy.cel import Program
from mkpolicy.errors import CelError
from mkpolicy.policy import loads

CTX = mkpolicy.Context(workload_name="wl-1", origin="mk", cluster="worker1")


def policy(spec: str) -> mkpolicy.Adapter:
    text = (
        "apiVersion: mkpolicy.io/v1alpha1\nkind: FrameworkPolicy\nmetadata: {name: p}\nspec:\n"
        "  framework: PipelineRun.v1.tekton.dev\n" + textwrap.indent(textwrap.dedent(spec), "  ")
    )
    return mkpolicy.compile(loads(text, "p.yaml")[0])


def with_variables(variables: dict[str, str], *patches: str) -> mkpolicy.Adapter:
    lines = ["variables:"]
    lines += [f"  - {{name: {name}, expression: {json.dumps(expr)}}}" for name, expr in variables.items()]
    lines += ["creation:", "  patches:" if patches else "  patches: []"]
    for p in patches:
        lines += ["    - type: JSONPatch", "      jsonPatch:", f"        expression: {json.dumps(p)}"]
    return policy("\n".join(lines) + "\n")


def manager() -> dict[str, Any]:
    return {
        "apiVersion": "tekton.dev/v1",
        "kind": "PipelineRun",
        "metadata": {"name": "pr", "namespace": "ns", "uid": "u-1", "labels": {"a": "1"}},
        "spec": {"managedBy": "kueue.x-k8s.io/multikueue"},
    }


def test_dependencies_are_found_at_compile_time() -> None:
    adapter = with_variables(
        {
            "key": "'kubectl.kubernetes.io/last-applied-configuration'",
            "failing": "1 / 0",
            "uid": "managerObject.metadata.uid",
            "labels": "object.metadata.labels",
            "count": "size(variables.labels)",
            "prefix": "variables.key + '/'",
            "any": "variables['key']",
            "shadow": "[1].map(object, object)",
        }
    )
    variables = adapter.variables
    assert variables.constants == {"key": "kubectl.kubernetes.io/last-applied-configuration"}
    assert variables.dependent == {"labels", "count", "any", "shadow"}
    assert variables.static is None


def test_a_policy_whose_variables_are_all_constants_shares_one_map() -> None:
    adapter = with_variables(
        {"key": "'a/b'", "n": "[1, 2].map(x, x * 2)"},
        "[JSONPatch{op: 'add', path: '/metadata/labels/' + jsonpatch.escapeKey(variables.key), value: 'x'}]",
        "[JSONPatch{op: 'add', path: '/spec/n', value: variables.n}]",
    )
    assert adapter.variables.static == {"key": "a/b", "n": [2, 4]}
    worker = adapter.create(manager(), CTX)
    assert worker["metadata"]["labels"]["a/b"] == "x"
    assert worker["spec"] == {"n": [2, 4]}
    worker["spec"]["n"].append(6)  # the result is the caller's: the constant is not shared
    assert adapter.create(manager(), CTX)["spec"] == {"n": [2, 4]}


def test_a_failing_constant_fails_where_it_is_read() -> None:
    adapter = with_variables(
        {"bad": "1 / 0", "ok": "'x'"},
        "[JSONPatch{op: 'add', path: '/spec/x', value: variables.ok}]",
        "[JSONPatch{op: 'add', path: '/spec/y', value: variables.bad}]",
    )
    assert adapter.variables.constants == {"ok": "x"}
    with pytest.raises(CelError) as info:
        adapter.create(manager(), CTX)
    assert "variable 'bad' failed at p.yaml:7:" in info.value.message and "division by zero" in info.value.message
    assert info.value.location.where == "policy p: creation patch #2 (JSONPatch)"


def test_variables_depending_on_object_see_each_version_of_it() -> None:
    adapter = with_variables(
        {"labels": "object.metadata.labels", "count": "size(variables.labels)"},
        "[JSONPatch{op: 'add', path: '/spec/before', value: variables.count}]",
        "[JSONPatch{op: 'add', path: '/metadata/labels/b', value: '2'}]",
        "[JSONPatch{op: 'add', path: '/spec/after', value: variables.count}]",
        "[JSONPatch{op: 'add', path: '/spec/labels', value: variables.labels}]",
    )
    spec = adapter.create(manager(), CTX)["spec"]
    # The clone carries the origin label and the identifier annotation: 2 labels, then 3.
    assert spec["before"] == 2 and spec["after"] == 3
    assert spec["labels"] == {"a": "1", "kueue.x-k8s.io/multikueue-origin": "mk", "b": "2"}


def _count_evaluations(adapter: mkpolicy.Adapter, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    counts: dict[str, int] = {}
    for name, expr in adapter.variables.by_name.items():
        original = expr.program.evaluate

        def counting(bindings: Any, *args: Any, _name: str = name, _original: Any = original, **kw: Any) -> Any:
            counts[_name] = counts.get(_name, 0) + 1
            return _original(bindings, *args, **kw)

        monkeypatch.setattr(expr, "program", _Counting(expr.program, counting))
    return counts


class _Counting:
    """A program whose evaluations are counted."""

    def __init__(self, program: Program, evaluate: Any) -> None:
        self._program = program
        self.evaluate = evaluate

    def __getattr__(self, name: str) -> Any:
        return getattr(self._program, name)


def test_independent_variables_are_evaluated_once_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = with_variables(
        {"uid": "managerObject.metadata.uid", "name": "object.metadata.name"},
        "[JSONPatch{op: 'add', path: '/spec/a', value: variables.uid + variables.name}]",
        "[JSONPatch{op: 'add', path: '/spec/b', value: variables.uid + variables.name}]",
        "[JSONPatch{op: 'add', path: '/spec/c', value: variables.uid + variables.name + variables.uid}]",
    )
    counts = _count_evaluations(adapter, monkeypatch)
    assert adapter.create(manager(), CTX)["spec"] == {"a": "u-1pr", "b": "u-1pr", "c": "u-1pru-1"}
    # uid: once for the call; name (depends on object): once per version of object.
    assert counts == {"uid": 1, "name": 3}
    adapter.create(manager(), CTX)
    assert counts == {"uid": 2, "name": 6}


def test_an_unchanged_object_keeps_its_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = with_variables(
        {"name": "object.metadata.name"},
        "has(object.spec.nope) ? [JSONPatch{op: 'add', path: '/spec/x', value: 1}] : []",
        "[JSONPatch{op: 'add', path: '/spec/a', value: variables.name}]",
        "[JSONPatch{op: 'add', path: '/spec/b', value: variables.name}]",
    )
    counts = _count_evaluations(adapter, monkeypatch)
    adapter.create(manager(), CTX)
    assert counts == {"name": 2}  # patch 1 changed nothing: patch 2 reads the same version
