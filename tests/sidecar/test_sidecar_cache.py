"""The manager cache's parsed objects: the most recently used stay parsed."""

from __future__ import annotations

import json
from typing import Any

from mkpolicy.kube.client import ResourceInfo
from mkpolicy.sidecar.cache import PARSED, ManagerCache
from mkpolicy.sidecar.metrics import Metrics


def cache_of(count: int) -> ManagerCache:
    cache = ManagerCache(None, ResourceInfo("g", "v1", "K", "ks", True), "p", Metrics())  # type: ignore[arg-type]
    cache._objects = {("ns", f"o{i}"): json.dumps({"i": i}).encode() for i in range(count)}
    return cache


def test_parsed_objects_are_evicted_least_recently_used_first() -> None:
    cache = cache_of(PARSED + 1)
    first: dict[str, Any] | None = cache.get("ns", "o0")
    for i in range(1, PARSED):
        cache.get("ns", f"o{i}")
    assert cache.get("ns", "o0") is first  # used again: now the most recent
    cache.get("ns", f"o{PARSED}")  # one too many: evicts o1, the least recently used
    assert cache.get("ns", "o0") is first
    assert len(cache._parsed) == PARSED and ("ns", "o1") not in cache._parsed


def test_a_changed_object_is_parsed_again() -> None:
    cache = cache_of(1)
    before = cache.get("ns", "o0")
    cache._objects[("ns", "o0")] = b'{"i":1}'
    after = cache.get("ns", "o0")
    assert after == {"i": 1} and before == {"i": 0} and len(cache._parsed) == 1
