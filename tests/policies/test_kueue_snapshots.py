"""Whole-object snapshots of every shipped Kueue policy on its examples (syrupy).

Create: the worker object, in both identifier modes. Sync: the status patch and the
manager's object after the patch, for every manager x worker example pair. A change to a
policy or to the engine that changes any byte of these objects shows up here.
"""

from __future__ import annotations

from typing import Any

import kueue_reference as ref
import pytest
from kueue_cases import KINDS, adapter, context, example_files, read
from syrupy.assertion import SnapshotAssertion


def _create_cases() -> list[Any]:
    return [
        pytest.param(kind, path.name, identifier, id=f"{kind}-{path.stem}-{identifier}")
        for kind in KINDS
        for path in example_files(kind, "manager")
        for identifier in ("annotation", "label")
    ]


def _sync_cases() -> list[Any]:
    return [
        pytest.param(kind, m.name, w.name, id=f"{kind}-{m.stem}-{w.stem}")
        for kind in KINDS
        for m in example_files(kind, "manager")
        for w in example_files(kind, "worker")
    ]


def test_every_kind_has_examples() -> None:
    for kind in KINDS:
        assert example_files(kind, "manager"), kind
        assert example_files(kind, "worker"), kind


@pytest.mark.parametrize(("kind", "manager_file", "identifier"), _create_cases())
def test_create(kind: str, manager_file: str, identifier: str, snapshot: SnapshotAssertion) -> None:
    manager = read(example_files(kind, "manager")[0].parent / manager_file)
    worker = adapter(kind).create(manager, context(identifier))
    assert worker == snapshot


@pytest.mark.parametrize(("kind", "manager_file", "worker_file"), _sync_cases())
def test_sync(kind: str, manager_file: str, worker_file: str, snapshot: SnapshotAssertion) -> None:
    folder = example_files(kind, "manager")[0].parent
    manager, worker = read(folder / manager_file), read(folder / worker_file)
    patch = adapter(kind).sync(manager, worker, context())
    after = ref.apply_merge_patch(manager, patch) if patch is not None else manager
    assert {"statusPatch": patch, "managerAfter": after} == snapshot
