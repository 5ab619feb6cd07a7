"""Point Kueue's MultiKueueCluster kubeconfig Secrets at the sidecar (``--wire``) and back (``--unwire``).

Wiring saves the Secret's original kubeconfig under another data key and marks the
Secret with annotations (wired, the endpoint, and the digest of the kubeconfig it wrote);
unwiring restores it (or deletes a Secret wiring created). Both are idempotent. The
sidecar reads a worker's real kubeconfig from a wired Secret's saved copy, so an
existing install can be wired in place.

A wired Secret that someone rewrites (GitOps re-applying it, a credential rotation)
holds a kubeconfig that is not the sidecar's: that one is the worker's real kubeconfig
now (:func:`split_secret`), saved in place of the old copy when the Secret is wired again
— also by a restart with ``--wire``, which never restores a stale copy over a rotation.

Kueue can also read a MultiKueueCluster's kubeconfig from a file (``locationType:
Path``) or connect through a ClusterProfile; :func:`multikueue_secret` says what the
sidecar can do for those.
"""

from __future__ import annotations

import base64
import hashlib
import logging
from typing import Any, Literal

from mkpolicy.kube.client import ApiError, KubeClient
from mkpolicy.kube.kubeconfig import KUBECONFIG_SECRET_KEY, KubeconfigError, parse_kubeconfig
from mkpolicy.kube.rest import resource_path
from mkpolicy.sidecar.config import ConfigError, Worker
from mkpolicy.sidecar.logs import fields

log = logging.getLogger("mkpolicy.sidecar.wiring")

#: Annotation on a wired Secret: "updated" (original kept) or "created" (wiring created it).
WIRED_ANNOTATION = "mkpolicy.io/wired"
#: Annotation recording the endpoint a wired Secret points at.
ENDPOINT_ANNOTATION = "mkpolicy.io/endpoint"
#: Annotation holding the SHA-256 of the kubeconfig wiring wrote (how the sidecar knows its own).
DIGEST_ANNOTATION = "mkpolicy.io/wired-digest"
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


def digest(data: bytes) -> str:
    """The digest wiring records for the kubeconfig it writes."""
    return hashlib.sha256(data).hexdigest()


def is_ours(secret: dict[str, Any], data: bytes, endpoints: frozenset[str] = frozenset()) -> bool:
    """Whether ``data`` (a kubeconfig held by ``secret``) is one wiring wrote, not a worker's real one.

    It is when its digest is the one wiring recorded, or (Secrets wired before digests
    were recorded) when its server is the recorded endpoint or one of ``endpoints``.
    """
    annotations = (secret.get("metadata") or {}).get("annotations") or {}
    if annotations.get(DIGEST_ANNOTATION) == digest(data):
        return True
    if not annotations.get(WIRED_ANNOTATION):
        return False
    try:
        config = parse_kubeconfig(data)
    except KubeconfigError:
        return False
    servers = {
        str((c.get("cluster") or {}).get("server") or "").rstrip("/")
        for c in config.get("clusters") or []
        if isinstance(c, dict)
    }
    known = set(endpoints) | {str(annotations.get(ENDPOINT_ANNOTATION) or "").rstrip("/")}
    return bool(servers & (known - {""}))


def split_secret(
    secret: dict[str, Any], key: str, endpoints: frozenset[str] = frozenset()
) -> tuple[bytes | None, bool]:
    """(the worker's real kubeconfig in ``secret``, whether ``key`` holds the sidecar's kubeconfig).

    The real one is the saved original while ``key`` holds the sidecar's; anything else in
    ``key`` (a rotation, GitOps re-applying the Secret) is the real one.
    """
    current = decoded(secret, key)
    if current is not None and key == KUBECONFIG_SECRET_KEY and is_ours(secret, current, endpoints):
        return decoded(secret, ORIGINAL_KEY), True
    return current, False


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
        source = spec.get("clusterSource") or {}
        profile = source.get("clusterProfileRef") or {}
        if profile:
            # Kueue builds this connection from the ClusterProfile's status (server, CA) and an
            # exec plugin of its own configuration (multikueuecluster.go, loadClientConfig): no
            # Secret or file to point at the sidecar.
            raise ConfigError(
                f"worker {worker.name}: MultiKueueCluster {worker.name} connects through ClusterProfile "
                f"{profile.get('name')!r}: Kueue takes the server from the profile's status and runs an access "
                "plugin for credentials, so --wire cannot put the sidecar in between. Give the MultiKueueCluster "
                "spec.clusterSource.kubeConfig {locationType: Secret, location: <a Secret>} and set wireSecret to "
                "it, with the worker's real kubeconfig in kubeconfig.secret or kubeconfig.file (with OCM, the Secret "
                "the ClusterProfile's credentials name)"
            )
        ref = source.get("kubeConfig") or spec.get("kubeConfig") or {}
        location_type = ref.get("locationType", "Secret")
        if location_type == "Path":
            raise ConfigError(
                f"worker {worker.name}: MultiKueueCluster {worker.name} reads its kubeconfig from the file "
                f"{ref.get('location')!r} in Kueue's container (locationType: Path); --wire writes Secrets only. "
                "Write the sidecar's kubeconfigs into a volume Kueue's container mounts at that directory "
                "(--kubeconfig-dir; Kueue re-reads the file when it changes), or use locationType: Secret"
            )
        if location_type != "Secret" or not ref.get("location"):
            raise ConfigError(
                f"worker {worker.name}: MultiKueueCluster {worker.name} names no kubeconfig Secret "
                f"(spec.clusterSource.kubeConfig: {ref or 'absent'}); --wire needs locationType: Secret "
                "(or set wireSecret)"
            )
        return str(ref["location"])
    raise ConfigError(
        f"worker {worker.name}: no MultiKueueCluster named {worker.name!r} in the manager cluster "
        f"({last}); create it or set wireSecret"
    )


async def wire(
    client: KubeClient,
    namespace: str,
    name: str,
    kubeconfig_yaml: str,
    endpoint: str,
    endpoints: frozenset[str] = frozenset(),
) -> WireResult:
    """Make Secret ``namespace/name`` hold ``kubeconfig_yaml`` for Kueue, keeping what it held before.

    What the Secret holds that is not the sidecar's (:func:`is_ours`; ``endpoints`` are
    this sidecar's) is kept as the original: the one before the first wiring, or the
    rotated one written since.
    """
    raw = kubeconfig_yaml.encode()
    data = base64.b64encode(raw).decode()
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
                    "annotations": {
                        WIRED_ANNOTATION: "created",
                        ENDPOINT_ANNOTATION: endpoint,
                        DIGEST_ANNOTATION: digest(raw),
                    },
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
        if (
            annotations.get(WIRED_ANNOTATION)
            and secret_data.get(KUBECONFIG_SECRET_KEY) == data
            and annotations.get(DIGEST_ANNOTATION) == digest(raw)
        ):
            return "unchanged"
        current = decoded(secret, KUBECONFIG_SECRET_KEY)
        rotated = current is not None and not is_ours(secret, current, endpoints)
        if not annotations.get(WIRED_ANNOTATION):
            annotations[WIRED_ANNOTATION] = "updated"
        if rotated:
            secret_data[ORIGINAL_KEY] = secret_data[KUBECONFIG_SECRET_KEY]
        annotations[ENDPOINT_ANNOTATION] = endpoint
        annotations[DIGEST_ANNOTATION] = digest(raw)
        secret_data[KUBECONFIG_SECRET_KEY] = data
        try:
            await client.replace(secret_path(namespace, name), secret)
        except ApiError as exc:
            if exc.status == 409:
                continue  # changed meanwhile: read again
            raise
        log.info(
            "wired",
            extra=fields(secret=f"{namespace}/{name}", result="updated", endpoint=endpoint, kept_rotated=rotated),
        )
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
        current = decoded(secret, KUBECONFIG_SECRET_KEY)
        if current is not None and not is_ours(secret, current):
            pass  # rotated since it was wired: the newer kubeconfig stays
        elif original is not None:
            data[KUBECONFIG_SECRET_KEY] = original
        else:
            data.pop(KUBECONFIG_SECRET_KEY, None)
        for key in (WIRED_ANNOTATION, ENDPOINT_ANNOTATION, DIGEST_ANNOTATION):
            annotations.pop(key, None)
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
