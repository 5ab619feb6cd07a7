"""The controller's watch caches keep objects without managedFields (controller-runtime's
TransformStripManagedFields): memory, with 10,000 jobs and their Workloads cached."""

from __future__ import annotations

import asyncio
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
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": version, "managedFields": MANAGED}}


def test_listed_and_written_objects_are_cached_without_managed_fields() -> None:
    info = ResourceInfo("batch.example.com", "v1alpha1", "BatchRun", "batchruns", True)
    client: Any = _Pages([obj("listed", "5")])
    informer = Informer(client, info)
    asyncio.run(informer._list())
    informer.observe(obj("written", "9"))
    for name in ("listed", "written"):
        cached = informer.get("ns", name)
        assert cached is not None and "managedFields" not in cached["metadata"]
        assert cached["metadata"]["resourceVersion"] in ("5", "9")
