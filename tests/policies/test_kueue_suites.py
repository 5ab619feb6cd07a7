"""Runs the policy test suites ``policies/kueue/*.test.yaml`` (format: docs/policy-tests.md)
with the engine API, independently of ``mkpolicy test``, and checks every expectation
against the Python model of Kueue's adapters: a suite cannot pass by agreeing with a
policy that Kueue disagrees with.
"""

from __future__ import annotations

import copy
import datetime as dt
from pathlib import Path
from typing import Any

import kueue_reference as ref
import pytest
import yaml
from kueue_cases import KINDS, POLICIES

import mkpolicy

CONTEXT_KEYS = {"workloadName", "origin", "cluster", "identifier", "workload", "workloadFile", "now"}
CASE_KEYS = {
    "name",
    "phase",
    "managerObject",
    "managerObjectFile",
    "workerObject",
    "workerObjectFile",
    "context",
    "expect",
}
EXPECT_KEYS = {"workerObject", "workerObjectFile", "statusPatch", "notManaged", "error"}


def _suite(kind: str) -> tuple[Path, dict[str, Any]]:
    path = POLICIES / f"{kind}.test.yaml"
    with path.open() as f:
        doc = yaml.safe_load(f)
    return path, doc


def _object(base: Path, case: dict[str, Any], key: str) -> dict[str, Any] | None:
    inline, file = case.get(key), case.get(f"{key}File")
    assert (inline is None) or (file is None), f"{key} and {key}File are exclusive"
    if file is not None:
        with (base / file).open() as f:
            inline = yaml.safe_load(f)
    return copy.deepcopy(inline)


def _context(defaults: dict[str, Any], override: dict[str, Any] | None) -> mkpolicy.Context:
    values = {**defaults, **(override or {})}
    assert set(values) <= CONTEXT_KEYS, set(values) - CONTEXT_KEYS
    now = values.get("now")
    return mkpolicy.Context(
        workload_name=values.get("workloadName", ""),
        origin=values.get("origin", "multikueue"),
        cluster=values.get("cluster", ""),
        workload=values.get("workload"),
        identifier=values.get("identifier", "annotation"),
        now=dt.datetime.fromisoformat(now.replace("Z", "+00:00")) if isinstance(now, str) else now,
    )


def _cases() -> list[Any]:
    out = []
    for kind in KINDS:
        _, doc = _suite(kind)
        out.extend(pytest.param(kind, i, id=f"{kind}: {c['name']}") for i, c in enumerate(doc["spec"]["cases"]))
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_suite_document(kind: str) -> None:
    path, doc = _suite(kind)
    assert doc["apiVersion"] == "mkpolicy.io/v1alpha1"
    assert doc["kind"] == "FrameworkPolicyTest"
    assert doc["metadata"]["name"] == f"kueue-{kind}"
    assert set(doc["spec"]) <= {"policy", "context", "cases"}
    assert (path.parent / doc["spec"]["policy"]).is_file()
    assert doc["spec"]["policy"] == f"{kind}.yaml"
    cases = doc["spec"]["cases"]
    names = [c["name"] for c in cases]
    assert len(names) == len(set(names)), "case names are unique"
    expects = [next(iter(c["expect"])) for c in cases]
    phases = {(c["phase"], next(iter(c["expect"]))) for c in cases}
    assert ("create", "workerObject") in phases, "a create case with a full expected object"
    assert "notManaged" in expects, "a not-managed case"
    model = ref.KINDS[kind]
    if model.sync != "none":
        assert ("sync", "statusPatch") in phases, "a sync case"
    if model.managed_by is not None:
        reasons = [c["expect"]["notManaged"] for c in cases if "notManaged" in c["expect"]]
        assert any(r.endswith(' not ""') for r in reasons), "a case without the managedBy field"
        assert any(not r.endswith(' not ""') for r in reasons), "a case with another managedBy value"


@pytest.mark.parametrize(("kind", "index"), _cases())
def test_suite_case(kind: str, index: int) -> None:
    path, doc = _suite(kind)
    case = doc["spec"]["cases"][index]
    assert set(case) <= CASE_KEYS, set(case) - CASE_KEYS
    assert set(case["expect"]) <= EXPECT_KEYS and len(case["expect"]) == 1, case["expect"]
    (policy,) = mkpolicy.load(str(path.parent / doc["spec"]["policy"]))
    adapter = mkpolicy.compile(policy)
    ctx = _context(doc["spec"].get("context") or {}, case.get("context"))
    manager = _object(path.parent, case, "managerObject")
    worker = _object(path.parent, case, "workerObject")
    assert manager is not None
    expect = case["expect"]
    model = ref.KINDS[kind]
    kueue_manages = ref.is_managed(model, manager) and (manager.get("apiVersion"), manager.get("kind")) == (
        model.api_version,
        model.kind,
    )

    if "notManaged" in expect:
        assert not kueue_manages, "Kueue's adapter manages this object"
        managed, reason = adapter.is_managed(manager, ctx)
        assert not managed
        assert expect["notManaged"] is True or expect["notManaged"] in reason
        with pytest.raises(mkpolicy.NotManagedError):
            if case["phase"] == "create":
                adapter.create(manager, ctx)
            else:
                adapter.sync(manager, worker or {}, ctx)
        return
    assert kueue_manages
    if case["phase"] == "create":
        want = expect.get("workerObject")
        if want is None:
            want = _object(path.parent, {"workerObjectFile": expect["workerObjectFile"]}, "workerObject")
        got = adapter.create(manager, ctx)
        assert got == want
        kueue = ref.create(
            model, manager, ctx.workload_name, ctx.origin, annotations_gate=ctx.identifier == "annotation"
        )
        assert want == kueue, "the suite's expectation is not what Kueue creates"
    else:
        assert case["phase"] == "sync" and worker is not None
        got = adapter.sync(manager, worker, ctx)
        assert got == expect["statusPatch"]
        kueue = ref.sync(model, manager, worker, ctx.timestamp())
        if not kueue.changed:
            assert expect["statusPatch"] is None, "Kueue writes nothing here"
        else:
            after = ref.apply_merge_patch(manager, expect["statusPatch"])
            assert ref.typed_status(model, after) == kueue.status, "the suite's expectation is not what Kueue writes"
