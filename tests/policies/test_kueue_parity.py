"""Differential tests: every shipped Kueue policy against the Python model of Kueue's Go
adapter, on the examples and many variants of them (create in every identifier mode,
sync for every manager x worker pair, managed or not)."""

from __future__ import annotations

import copy
from typing import Any

import kueue_reference as ref
import pytest
from kueue_cases import (
    KINDS,
    LONG_WORKLOAD,
    NOW,
    WORKLOAD,
    adapter,
    context,
    manager_variants,
    worker_variants,
)

import mkpolicy
from mkpolicy.engine.generic import FORBIDDEN_METADATA


def _create_cases() -> list[Any]:
    out = []
    for kind in KINDS:
        for variant in manager_variants(kind):
            for identifier, name in (("annotation", WORKLOAD), ("label", WORKLOAD), ("label", LONG_WORKLOAD)):
                mode = f"{identifier}{'-long' if name == LONG_WORKLOAD else ''}"
                out.append(pytest.param(kind, variant.obj, identifier, name, id=f"{kind}-{variant.name}-{mode}"))
    return out


@pytest.mark.parametrize(("kind", "manager", "identifier", "workload_name"), _create_cases())
def test_create_equals_kueue(kind: str, manager: dict[str, Any], identifier: str, workload_name: str) -> None:
    model = ref.KINDS[kind]
    before = copy.deepcopy(manager)
    worker = adapter(kind).create(manager, context(identifier, workload_name))
    expected = ref.create(model, manager, workload_name, "multikueue", annotations_gate=identifier == "annotation")
    assert worker == expected
    assert manager == before, "create must not modify its input"
    # the invariants, checked on the result too
    assert "status" not in worker
    assert not set(FORBIDDEN_METADATA) & set(worker["metadata"])
    assert worker["metadata"]["labels"][ref.ORIGIN_LABEL] == "multikueue"


def _sync_cases() -> list[Any]:
    out = []
    for kind in KINDS:
        workers = list(worker_variants(kind))
        for m in manager_variants(kind):
            pairs = [(w.name, w.obj) for w in workers] + [("same-as-manager", copy.deepcopy(m.obj))]
            for wname, wobj in pairs:
                out.append(pytest.param(kind, m.obj, wobj, id=f"{kind}-{m.name}-{wname}"))
    return out


@pytest.mark.parametrize(("kind", "manager", "worker"), _sync_cases())
def test_sync_equals_kueue(kind: str, manager: dict[str, Any], worker: dict[str, Any]) -> None:
    model = ref.KINDS[kind]
    before = copy.deepcopy((manager, worker))
    patch = adapter(kind).sync(manager, worker, context())
    expected = ref.sync(model, manager, worker, NOW)
    assert (manager, worker) == before, "sync must not modify its inputs"
    _check_sync(model, manager, patch, expected)


def _check_sync(
    model: ref.Kind, manager: dict[str, Any], patch: dict[str, Any] | None, expected: ref.SyncResult
) -> None:
    if not expected.changed:
        assert patch is None
        return
    assert patch is not None
    assert set(patch) == {"status"}, "only the status subresource is written"
    after = ref.apply_merge_patch(manager, patch)
    assert ref.typed_status(model, after) == expected.status
    assert {k: v for k, v in after.items() if k != "status"} == {k: v for k, v in manager.items() if k != "status"}


def _managed_cases() -> list[Any]:
    out = []
    for kind in KINDS:
        model = ref.KINDS[kind]
        base = next(manager_variants(kind)).obj
        cases: dict[str, dict[str, Any]] = {"example": base}
        if model.managed_by is not None:
            for name, value in (("job-controller", "kubernetes.io/job-controller"), ("empty", ""), ("other", "x")):
                obj = copy.deepcopy(base)
                cur = obj
                for token in model.managed_by[:-1]:
                    cur = cur[token]
                cur[model.managed_by[-1]] = value
                cases[f"managed-by-{name}"] = obj
            obj = copy.deepcopy(base)
            cur = obj
            for token in model.managed_by[:-1]:
                cur = cur[token]
            del cur[model.managed_by[-1]]
            cases["managed-by-missing"] = obj
            if model.managed_by != ref.SPEC_MANAGED_BY:
                obj = copy.deepcopy(obj)
                obj["spec"]["managedBy"] = ref.MULTIKUEUE
                cases["managed-by-at-the-generic-place-only"] = obj
        else:
            obj = copy.deepcopy(base)
            obj["spec"]["managedBy"] = "someone-else"
            cases["unrelated-managed-by-field"] = obj
        out.extend(pytest.param(kind, obj, id=f"{kind}-{name}") for name, obj in cases.items())
    return out


@pytest.mark.parametrize(("kind", "manager"), _managed_cases())
def test_is_managed_equals_kueue(kind: str, manager: dict[str, Any]) -> None:
    managed, reason = adapter(kind).is_managed(manager)
    assert managed is ref.is_managed(ref.KINDS[kind], manager)
    if managed:
        assert reason == ""
    else:
        assert reason.startswith("Expecting .spec.")
        with pytest.raises(mkpolicy.NotManagedError):
            adapter(kind).create(manager, context())
        with pytest.raises(mkpolicy.NotManagedError):
            adapter(kind).sync(manager, manager, context())


@pytest.mark.parametrize("kind", KINDS)
def test_other_kinds_are_not_managed(kind: str) -> None:
    other = {"apiVersion": "example.com/v1", "kind": "Other", "metadata": {"name": "x"}, "spec": {}}
    managed, reason = adapter(kind).is_managed(other)
    assert not managed
    assert "found apiVersion 'example.com/v1', kind 'Other'" in reason
