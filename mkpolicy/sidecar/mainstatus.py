"""The policy's status written to the manager's main resource, for kinds without a status subresource.

Argo's ``Workflow`` CRD serves no ``/status``: Kueue's generic adapter would merge-patch
``.../workflows/<name>/status`` and get 404 at every reconcile, and since Kueue finishes a
manager Workload only after a successful ``SyncJob`` (``multikueue/workload.go``, "Finish the
local workload when the remote workload is finished"), the Workload would hold its quota
forever. For such a kind (``sync.subresource: none``, or no ``/status`` in the manager's
discovery) the sidecar therefore hands Kueue the worker's object **without** ``status`` —
Kueue then copies nothing (``copyStatusFromRemote`` returns early,
``externalframeworks/adapter.go``) — and writes the policy's sync result itself:

* on each full read Kueue makes of the worker's copy: Kueue reads it at every reconcile, and
  reconciles on the worker's watch events, so the manager follows the worker;
* only when the status changes, from a live read of the manager's object, as a JSON merge
  patch holding ``status`` alone (and ``metadata.resourceVersion`` as a precondition: a
  conflict is read again and retried), with the field manager ``mkpolicy-sidecar``;
* a write the manager refuses (an admission policy, validation: 4xx) becomes an Event on the
  object; Kueue's read still succeeds, without status (failing it would keep Kueue from ever
  finishing the workload);
* the manager unreachable or failing (5xx): Kueue's read is answered 503, and Kueue retries.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp

from mkpolicy.jsonvalues import create_merge_patch
from mkpolicy.kube.client import MERGE_PATCH, ApiError, KubeClient
from mkpolicy.sidecar.cache import read_object
from mkpolicy.sidecar.logs import plain_error
from mkpolicy.sidecar.policies import Entry
from mkpolicy.sidecar.relay import ref
from mkpolicy.sidecar.status import StatusError
from mkpolicy.sidecar.transform import Outcome, rewrite_status

#: The field manager of the sidecar's status writes (``managedFields`` on the manager's object).
FIELD_MANAGER = "mkpolicy-sidecar"
#: Writes tried when the object changes between the read and the write (409 Conflict).
ATTEMPTS = 3

WriteResult = Literal["written", "unchanged", "gone", "refused", "conflict"]

#: Runs the policy's sync (``rewrite_status`` and its arguments) off the event loop when needed.
Run = Callable[..., Awaitable[tuple[Any, Outcome, float]]]


@dataclass(frozen=True)
class Written:
    """What a write did; ``message`` says why the manager refused it."""

    result: WriteResult
    manager: dict[str, Any] | None = None
    message: str = ""


def without_status(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` without ``status``: what Kueue gets for a kind whose status mkpolicy writes itself."""
    out = dict(obj)
    out.pop("status", None)
    return out


def status_patch(manager: dict[str, Any], synced: dict[str, Any]) -> dict[str, Any] | None:
    """The merge patch taking the manager's ``status`` to the synced one (None when equal), with
    the manager's resourceVersion as the write's precondition."""
    patch = create_merge_patch({"status": manager.get("status")}, {"status": synced.get("status")})
    if not patch:
        return None
    version = (manager.get("metadata") or {}).get("resourceVersion")
    return {"metadata": {"resourceVersion": version}, **patch} if version else patch


async def write_status(
    client: KubeClient, entry: Entry, worker: dict[str, Any], cluster: str, origin: str, run: Run
) -> Written:
    """Write the policy's sync of ``worker`` to the manager's object (read live), status only.

    Raises :class:`StatusError` 503 when the manager cannot be read or written (Kueue retries
    its read); a refusal (4xx) comes back as ``refused`` with the manager's message.
    """
    meta = worker.get("metadata") or {}
    namespace, name = meta.get("namespace"), str(meta.get("name") or "")
    info = entry.info
    path = info.path(namespace if info.namespaced else None, name)
    manager: dict[str, Any] | None = None
    for _ in range(ATTEMPTS):
        try:
            manager = await read_object(client, info, namespace, name)
            if manager is None:
                return Written("gone")
            synced, outcome, _ = await run(
                entry.adapter, rewrite_status, entry.adapter, worker, manager, cluster, origin
            )
            if outcome.result != "ok" or not isinstance(synced, dict):
                return Written("unchanged", manager)
            patch = status_patch(manager, synced)
            if patch is None:
                return Written("unchanged", manager)
            await client.request(
                "PATCH", path, params={"fieldManager": FIELD_MANAGER}, body=patch, content_type=MERGE_PATCH
            )
            return Written("written", manager)
        except ApiError as exc:
            if exc.status == 409:
                continue  # changed since the read: read it again
            if exc.status == 404:
                return Written("gone")
            if 400 <= exc.status < 500:
                return Written("refused", manager, f"{exc.status} {exc.message}")
            raise _unavailable(entry, namespace, name, plain_error(exc)) from None
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise _unavailable(entry, namespace, name, plain_error(exc)) from None
    return Written("conflict", manager)


def _unavailable(entry: Entry, namespace: Any, name: str, why: str) -> StatusError:
    return StatusError(
        503,
        f"mkpolicy sidecar: cannot write the status of {entry.adapter.gvk.kind} {ref(namespace, name)} "
        f"to the manager: {why}",
    )


__all__ = ["ATTEMPTS", "FIELD_MANAGER", "Written", "status_patch", "without_status", "write_status"]
