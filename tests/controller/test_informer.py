"""The controller's watch caches keep objects compact (memory, with 10,000 jobs and their Workloads
cached): without managedFields (controller-runtime's TransformStripManagedFields), keys and short
strings shared between objects."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from mkpolicy.controller.informer import Informer
from mkpolicy.kube.client import ResourceInfo

MANAGED = [{"manager": "kubectl", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {"f:suspend": {}}}}]  # fmt: skip


class _Pages:
    """A client answering one LIST page (what the informer reads first)."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items

    async def get(self, path: str, params: Any = None) -> dict[str, Any]:
        return {"items": self.items, "metadata": {"resourceVersion": "7"}}


def obj(name: str, version: str) -> dict[str, Any]:
    """As decoded from the server's JSON: strings of its own (not the literals')."""
    decoded: dict[str, Any] = json.loads(json.dumps(
        {"metadata": {"name": name, "namespace": "ns", "resourceVersion": version, "managedFields": MANAGED}}))  # fmt: skip
    return decoded


def test_listed_and_written_objects_are_cached_without_managed_fields() -> None:
    info = ResourceInfo("batch.example.com", "v1alpha1", "BatchRun", "batchruns", True)
    client: Any = _Pages([obj("listed", "5"), obj("other", "6")])
    informer = Informer(client, info)
    asyncio.run(informer._list())
    informer.observe(obj("written", "9"))
    for name in ("listed", "written"):
        cached = informer.get("ns", name)
        assert cached is not None and "managedFields" not in cached["metadata"]
        assert cached["metadata"]["resourceVersion"] in ("5", "9")
    listed, other = informer.get("ns", "listed"), informer.get("ns", "other")
    assert listed is not None and other is not None
    for a, b in zip(listed["metadata"], other["metadata"], strict=True):
        assert a == b and a is b  # one copy of each key
    assert listed["metadata"]["namespace"] is other["metadata"]["namespace"]


def test_the_owner_index_follows_adds_updates_and_deletes() -> None:
    """Workloads by controller owner (Kueue's OwnerReferenceIndexFieldMatcher): a reconcile reads a
    job's Workloads without walking every Workload."""
    from mkpolicy.controller.equivalence import owner_key

    def wl(name: str, owner: str | None, version: str) -> dict[str, Any]:
        refs = [{"apiVersion": "batch.example.com/v1alpha1", "kind": "BatchRun", "name": owner, "controller": True}]
        return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": version,
                             "ownerReferences": refs if owner else []}}  # fmt: skip

    info = ResourceInfo("kueue.x-k8s.io", "v1beta2", "Workload", "workloads", True)
    client: Any = _Pages([wl("w1", "a", "1"), wl("w2", "a", "2"), wl("w3", None, "3")])
    informer = Informer(client, info, index=owner_key)
    asyncio.run(informer._list())
    a, b = ("ns", "batch.example.com", "BatchRun", "a"), ("ns", "batch.example.com", "BatchRun", "b")
    assert sorted(w["metadata"]["name"] for w in informer.indexed(a)) == ["w1", "w2"]
    informer.observe(wl("w2", "b", "4"))  # its owner changed
    assert [w["metadata"]["name"] for w in informer.indexed(a)] == ["w1"]
    assert [w["metadata"]["name"] for w in informer.indexed(b)] == ["w2"]
    informer._store(("ns", "w1"), None)  # deleted
    assert informer.indexed(a) == [] and len(informer) == 2
