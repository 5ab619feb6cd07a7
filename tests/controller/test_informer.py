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
