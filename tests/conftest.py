"""Shared fixtures: repository paths, JSON snapshots, and the loopback API server fixtures
(``apiserver``, ``apiserver_factory``, ``multikueue_clusters`` from mkpolicy.testing.fixtures) and the
real-peer fixtures (``real_kube``, ``real_multikueue``, ``real_namespace`` from mkpolicy.testing.peers.fixtures)."""

from __future__ import annotations

from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.json import JSONSnapshotExtension

pytest_plugins = ["mkpolicy.testing.fixtures", "mkpolicy.testing.peers.fixtures"]

ROOT = Path(__file__).resolve().parent.parent
#: ``../shared`` beside the clone (CI provides it); some tests skip without it.
SHARED = ROOT.parent / "shared"


@pytest.fixture
def snapshot_json(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    """Snapshots stored as readable JSON files under ``__snapshots__/``."""
    return snapshot.use_extension(JSONSnapshotExtension)


@pytest.fixture
def root() -> Path:
    """The repository root."""
    return ROOT
