"""Point Kueue's MultiKueueCluster kubeconfig Secrets at the sidecar (``--wire``) and back (``--unwire``).

Wiring saves the Secret's original kubeconfig under another data key and marks the
Secret with an annotation; unwiring restores it (or deletes a Secret wiring created).
Both are idempotent. The sidecar reads a worker's real kubeconfig from a wired
Secret's saved copy, so an existing install can be wired in place.
"""

from __future__ import annotations

import base64
import logging
from typing import Any, Literal

from mkpolicy.kube.client import ApiError, KubeClient
from mkpolicy.kube.kubeconfig import KUBECONFIG_SECRET_KEY
from mkpolicy.kube.rest import resource_path
from mkpolicy.sidecar.config import ConfigError, Worker
from mkpolicy.sidecar.logs import fields

log = logging.getLogger("mkpolicy.sidecar.wiring")

#: Annotation on a wired Secret: "updated" (original kept) or "created" (wiring created it).
WIRED_ANNOTATION = "mkpolicy.io/wired"
#: Annotation recording the endpoint a wired Secret points at.
ENDPOINT_ANNOTATION = "mkpolicy.io/endpoint"
#: Data key keeping the original kubeconfig of a wired Secret.
ORIGINAL_KEY = "mkpolicy.original-kubeconfig"

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSIONS = ("v1beta2", "v1beta1")

WireResult = Literal["created", "updated", "unchanged"]
UnwireResult = Literal["restored", "deleted", "unchanged", "absent"]


def secret_path(namespace: str, name: str | None = None) -> str:
    """REST path of the Secrets collection (or one Secret) in ``namespace``."""
    return resource_path("", "v1", "secrets", namespace, name)


def decoded(secret: dict[str, Any], key: str) -> bytes | None:
    """The decoded value of ``key`` in a Secret's data, or None."""
    value = (secret.get("data") or {}).get(key)
    return base64.b64decode(value) if isinstance(value, str) else None


def real_kubeconfig(secret: dict[str, Any], key: str) -> bytes | None:
    """The kubeconfig a Secret holds for the worker itself: the saved original when the Secret is wired."""
    annotations = (secret.get("metadata") or {}).get("annotations") or {}
    if annotations.get(WIRED_ANNOTATION) and key == KUBECONFIG_SECRET_KEY:
        return decoded(secret, ORIGINAL_KEY)
    return decoded(secret, key)


async def multikueue_secret(client: KubeClient, worker: Worker) -> str:
    """The Secret the worker's MultiKueueCluster reads its kubeconfig from (or ``wireSecret``)."""
    if worker.wire_secret:
        return worker.wire_secret
    last: ApiError | None = None
    for version in KUEUE_VERSIONS:
        try:
            cluster = await client.get(resource_path(KUEUE_GROUP, version, "multikueueclusters", None, worker.name))
        except ApiError as exc:
            if exc.status == 404:
                last = exc
                continue
            raise
        spec = cluster.get("spec") or {}
        ref = (spec.get("clusterSource") or {}).get("kubeConfig") or spec.get("kubeConfig") or {}
        if ref.get("locationType", "Secret") != "Secret" or not ref.get("location"):
            raise ConfigError(
                f"worker {worker.name}: the MultiKueueCluster reads its kubeconfig from "
                f"{ref.get('locationType', 'nothing')} {ref.get('location', '')!r}; --wire needs locationType Secret "
                "(or set wireSecret)"
            )
        return str(ref["location"])
    raise ConfigError(
        f"worker {worker.name}: no MultiKueueCluster named {worker.name!r} in the manager cluster "
        f"({last}); create it or set wireSecret"
    )


async def wire(client: KubeClient, namespace: str, name: str, kubeconfig_yaml: str, endpoint: str) -> WireResult:
    """Make Secret ``namespace/name`` hold ``kubeconfig_yaml`` for Kueue, keeping what it held before."""
    data = base64.b64encode(kubeconfig_yaml.encode()).decode()
    for _ in range(5):
        try:
            secret = await client.get(secret_path(namespace, name))
        except ApiError as exc:
            if exc.status != 404:
                raise
            body = {
                "apiVersion": "v1",
                "kind": "Secret",
                "type": "Opaque",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "annotations": {WIRED_ANNOTATION: "created", ENDPOINT_ANNOTATION: endpoint},
                    "labels": {"app.kubernetes.io/managed-by": "mkpolicy"},
                },
                "data": {KUBECONFIG_SECRET_KEY: data},
            }
            try:
                await client.create(secret_path(namespace), body)
            except ApiError as exc2:
                if exc2.status == 409:
                    continue
                raise
            log.info("wired", extra=fields(secret=f"{namespace}/{name}", result="created", endpoint=endpoint))
            return "created"
        meta = secret.setdefault("metadata", {})
        annotations = meta.setdefault("annotations", {}) or {}
        meta["annotations"] = annotations
        secret_data = secret.setdefault("data", {}) or {}
        secret["data"] = secret_data
        if annotations.get(WIRED_ANNOTATION) and secret_data.get(KUBECONFIG_SECRET_KEY) == data:
            return "unchanged"
        if not annotations.get(WIRED_ANNOTATION):
            annotations[WIRED_ANNOTATION] = "updated"
            if KUBECONFIG_SECRET_KEY in secret_data:
                secret_data[ORIGINAL_KEY] = secret_data[KUBECONFIG_SECRET_KEY]
        annotations[ENDPOINT_ANNOTATION] = endpoint
        secret_data[KUBECONFIG_SECRET_KEY] = data
        try:
            await client.replace(secret_path(namespace, name), secret)
        except ApiError as exc:
            if exc.status == 409:
                continue  # changed meanwhile: read again
            raise
        log.info("wired", extra=fields(secret=f"{namespace}/{name}", result="updated", endpoint=endpoint))
        return "updated"
    raise ApiError(409, "Conflict", f"Secret {namespace}/{name} kept changing; --wire gave up after 5 attempts")


async def unwire(client: KubeClient, namespace: str, name: str) -> UnwireResult:
    """Undo :func:`wire`: restore the original kubeconfig, or delete a Secret wiring created."""
    for _ in range(5):
        try:
            secret = await client.get(secret_path(namespace, name))
        except ApiError as exc:
            if exc.status == 404:
                return "absent"
            raise
        meta = secret.get("metadata") or {}
        annotations = dict(meta.get("annotations") or {})
        mode = annotations.get(WIRED_ANNOTATION)
        if not mode:
            return "unchanged"
        if mode == "created":
            try:
                await client.delete(secret_path(namespace, name), propagation=None)
            except ApiError as exc:
                if exc.status != 404:
                    raise
            log.info("unwired", extra=fields(secret=f"{namespace}/{name}", result="deleted"))
            return "deleted"
        data = dict(secret.get("data") or {})
        original = data.pop(ORIGINAL_KEY, None)
        if original is not None:
            data[KUBECONFIG_SECRET_KEY] = original
        else:
            data.pop(KUBECONFIG_SECRET_KEY, None)
        annotations.pop(WIRED_ANNOTATION, None)
        annotations.pop(ENDPOINT_ANNOTATION, None)
        secret["data"] = data
        secret["metadata"] = {**meta, "annotations": annotations}
        try:
            await client.replace(secret_path(namespace, name), secret)
        except ApiError as exc:
            if exc.status == 409:
                continue
            raise
        log.info("unwired", extra=fields(secret=f"{namespace}/{name}", result="restored"))
        return "restored"
    raise ApiError(409, "Conflict", f"Secret {namespace}/{name} kept changing; --unwire gave up after 5 attempts")
