"""Real-peer tests (fixtures: mkpolicy.testing.peers.fixtures). Under pytest-xdist they all run in one
worker (``xdist_group``, with ``--dist loadgroup``): they share one MultiKueue per Kueue version."""

from __future__ import annotations

import importlib.util

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if importlib.util.find_spec("xdist") is None:
        return
    for item in items:
        if item.get_closest_marker("real_peers") is not None:
            item.add_marker(pytest.mark.xdist_group("real-peers"))
