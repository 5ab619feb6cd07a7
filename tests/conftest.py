"""Shared fixtures: repository paths, JSON snapshots, and the loopback API server fixtures
(``apiserver``, ``apiserver_factory``, ``multikueue_clusters`` from mkpolicy.testing.fixtures)."""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path

import pytest
from _pytest.reports import TestReport
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.json import JSONSnapshotExtension

pytest_plugins = ["mkpolicy.testing.fixtures"]

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


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, TestReport, TestReport]:
    """A failure pytest cannot format (a deep recursion in the traceback, CPython's AST
    "recursion depth mismatch" while pytest re-parses the source) fails that test with a
    plain message instead of ending the whole run with INTERNALERROR."""
    try:
        return (yield)
    except (RecursionError, SystemError) as exc:
        raised = call.excinfo
        try:
            text = str(raised.value)[:2000] if raised is not None else ""
        except Exception:
            text = "(unprintable)"
        what = f"{raised.typename}: {text}" if raised is not None else "no exception"
        return TestReport(
            item.nodeid,
            item.location,
            {name: 1 for name in item.keywords},
            "failed",
            f"the test raised {what}\n(pytest could not format the traceback: {type(exc).__name__}: {exc})",
            call.when,
            duration=call.duration,
            start=call.start,
            stop=call.stop,
        )
