"""Kueue's generic adapter for external frameworks, and the jobframework helpers it uses.

``pkg/controller/admissionchecks/multikueue/externalframeworks/adapter.go`` and
``pkg/controller/jobframework/utils.go`` (v0.15 to main; version differences in
:mod:`.versions`):

- ``IsJobManagedByKueue``: the manager's object, read live (unstructured), is managed when
  ``.spec.managedBy`` is ``kueue.x-k8s.io/multikueue``.
- ``ValidateRemoteObjectOwnership``: a metadata-only GET of the worker's object; absent is
  fine, present without our ``kueue.x-k8s.io/multikueue-origin`` label is an error.
- ``SyncJob``: the manager's object (live); the worker's (JSON GET); on 404 a POST of the
  clone (managedBy removed, origin label, prebuilt-workload identifier); otherwise the
  worker's ``status`` copied over the manager object and, when that changed anything,
  merge-patched to the manager's ``/status`` (``client.MergeFrom``). A worker object
  without ``status`` copies nothing.
- ``DeleteRemoteObject``: DELETE with ``propagationPolicy: Background`` (404 is fine);
  behind ``DeleteRemoteObjectIfOwned``'s ownership check from v0.17.6/v0.18.2/v0.19.0.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Literal

from mkpolicy.testing.kueue.goclient import ApiStatusError, GoClient, Gvk
from mkpolicy.testing.kueue.versions import Identifier, KueueVersion

ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
PREBUILT_WORKLOAD_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"
PREBUILT_WORKLOAD_ANNOTATION = "kueue.x-k8s.io/prebuilt-workload-name"
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
LABEL_VALUE_MAX = 63

SyncResult = Literal["created", "synced", "unchanged"]


class NotOwned(Exception):
    """``ErrRemoteObjectNotOwnedByMultiKueue``: the worker's object is not ours."""


def merge_patch(original: Any, modified: Any) -> Any:
    """The RFC 7386 patch from ``original`` to ``modified`` (evanphx/json-patch
    ``CreateMergePatch``, what ``client.MergeFrom`` sends)."""
    if not isinstance(original, dict) or not isinstance(modified, dict):
        return modified
    patch: dict[str, Any] = {key: None for key in original if key not in modified}
    for key, value in modified.items():
        if key not in original:
            patch[key] = value
        elif original[key] != value:
            patch[key] = merge_patch(original[key], value)
    return patch


def prebuilt_workload_name(obj: dict[str, Any], version: KueueVersion, identifier: Identifier) -> str:
    """``PrebuiltWorkloadNameFor``: which workload a worker object belongs to."""
    meta = obj.get("metadata") or {}
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    if identifier == "annotation":
        return str(annotations.get(PREBUILT_WORKLOAD_ANNOTATION) or labels.get(PREBUILT_WORKLOAD_LABEL) or "")
    label = str(labels.get(PREBUILT_WORKLOAD_LABEL) or "")
    if label or not version.identifier_fallback:
        return label
    annotated = str(annotations.get(PREBUILT_WORKLOAD_ANNOTATION) or "")
    return annotated if len(annotated) > LABEL_VALUE_MAX else ""


def set_multikueue_meta(
    obj: dict[str, Any], workload: str, origin: str, version: KueueVersion, identifier: Identifier
) -> None:
    """``SetMultiKueueMeta``: the origin label and the prebuilt workload name."""
    meta = obj.setdefault("metadata", {})
    labels = dict(meta.get("labels") or {})
    labels[ORIGIN_LABEL] = origin
    use_annotation = identifier == "annotation" or (version.identifier_fallback and len(workload) > LABEL_VALUE_MAX)
    if use_annotation:
        annotations = dict(meta.get("annotations") or {})
        annotations[PREBUILT_WORKLOAD_ANNOTATION] = workload
        meta["annotations"] = annotations
    else:
        labels[PREBUILT_WORKLOAD_LABEL] = workload
    meta["labels"] = labels


def clone_for_creation(local: dict[str, Any], version: KueueVersion) -> dict[str, Any]:
    """The object Kueue sends to the worker, before the MultiKueue markers.

    From v0.17.7/v0.18.3/v0.19.0 ``cloneUnstructuredForCreation``: apiVersion, kind, the
    metadata ``api.CloneObjectMetaForCreation`` keeps (name, namespace, labels,
    annotations; its zero ``creationTimestamp`` is left out, as every Kueue with the generic
    clone omits it: :attr:`KueueVersion.omits_zero_timestamp`), and spec. Before: the
    manager's object with ``resourceVersion`` cleared (``localObj.DeepCopy();
    SetResourceVersion("")``).
    """
    if not version.generic_clone:
        whole = copy.deepcopy(local)
        whole.get("metadata", {}).pop("resourceVersion", None)
        return whole
    meta = local.get("metadata") or {}
    kept: dict[str, Any] = {}
    for key in ("name", "namespace", "labels", "annotations"):
        if meta.get(key):
            kept[key] = copy.deepcopy(meta[key])
    remote: dict[str, Any] = {"apiVersion": local.get("apiVersion"), "kind": local.get("kind"), "metadata": kept}
    if "spec" in local:
        remote["spec"] = copy.deepcopy(local["spec"])
    return remote


@dataclass
class GenericAdapter:
    """The adapter for one external framework kind (``externalFrameworks`` in Kueue's Configuration)."""

    gvk: Gvk
    version: KueueVersion
    identifier: Identifier
    origin: str

    def creation_body(self, local: dict[str, Any], workload: str) -> dict[str, Any]:
        """What ``SyncJob`` POSTs for ``local``: this version's clone, ``managedBy`` removed,
        the MultiKueue markers set."""
        body = clone_for_creation(local, self.version)
        spec = body.get("spec")
        if isinstance(spec, dict):
            spec.pop("managedBy", None)
        set_multikueue_meta(body, workload, self.origin, self.version, self.identifier)
        return body

    async def is_managed(self, manager: GoClient, namespace: str, name: str) -> tuple[bool, str]:
        """``IsJobManagedByKueue`` (the manager's object, unstructured)."""
        obj = await manager.get(self.gvk, namespace, name, "unstructured")
        value = (obj.get("spec") or {}).get("managedBy") or ""
        if value != MULTIKUEUE_CONTROLLER:
            return False, f'Expecting .spec.managedBy to be "{MULTIKUEUE_CONTROLLER}" not "{value}"'
        return True, ""

    async def validate_ownership(self, worker: GoClient, namespace: str, name: str) -> bool:
        """``ValidateRemoteObjectOwnership``: False when absent, :class:`NotOwned` when not ours."""
        try:
            meta = (await worker.get(self.gvk, namespace, name, "metadata")).get("metadata") or {}
        except ApiStatusError as exc:
            if exc.not_found:
                return False
            raise
        if (meta.get("labels") or {}).get(ORIGIN_LABEL) != self.origin:
            raise NotOwned(
                f'remote object is not owned by MultiKueue: expected "{ORIGIN_LABEL}"="{self.origin}" on '
                f'*v1.PartialObjectMetadata "{namespace}/{name}"'
            )
        return True

    async def sync_job(
        self, manager: GoClient, worker: GoClient, namespace: str, name: str, workload: str
    ) -> tuple[SyncResult, dict[str, Any] | None]:
        """``SyncJob``: create the worker's copy, or write its status back; returns what
        happened and the merge patch sent (None when nothing was sent)."""
        local = await manager.get(self.gvk, namespace, name, "unstructured")
        try:
            remote = await worker.get(self.gvk, namespace, name, "unstructured")
        except ApiStatusError as exc:
            if not exc.not_found:
                raise
            await worker.create(self.gvk, namespace, self.creation_body(local, workload), "unstructured")
            return "created", None
        original = copy.deepcopy(local)
        status = remote.get("status")
        if isinstance(status, dict):
            local["status"] = status
        if local == original:
            return "unchanged", None
        patch = merge_patch(original, local)
        await manager.patch_status(self.gvk, namespace, name, patch, "unstructured")
        return "synced", patch

    async def delete_remote(self, worker: GoClient, namespace: str, name: str) -> bool:
        """``DeleteRemoteObject`` (v0.15: after a JSON GET); True when a DELETE was sent and succeeded."""
        if self.version.reads_before_delete:
            try:
                await worker.get(self.gvk, namespace, name, "unstructured")
            except ApiStatusError as exc:
                if exc.not_found:
                    return False
                raise
        try:
            await worker.delete(self.gvk, namespace, name, "unstructured", propagation="Background")
        except ApiStatusError as exc:
            if exc.not_found:
                return False
            raise
        return True

    async def delete_remote_if_owned(self, worker: GoClient, namespace: str, name: str) -> bool:
        """``DeleteRemoteObjectIfOwned`` (from v0.17.6/v0.18.2/v0.19.0; before, the delete alone)."""
        if self.version.ownership_check:
            try:
                if not await self.validate_ownership(worker, namespace, name):
                    return False
            except NotOwned:
                return False
        return await self.delete_remote(worker, namespace, name)
