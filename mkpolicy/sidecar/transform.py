"""The transforms on the wire (docs/architecture.md, "The wire"), as pure functions on JSON objects.

* :func:`worker_copy` — a POST of a policy kind: the policy's ``create`` on the
  manager's object, with the context Kueue put in the body it sent.
* :func:`rewrite_status` — an object of a policy kind handed back to Kueue (a full GET,
  or the answer to a create): its ``status`` becomes the manager's status after the
  policy's ``sync``, so that Kueue's "copy the whole status" writes exactly that.

A refused creation is a :class:`StatusError` (a Kubernetes ``Status`` for the client); a
failing sync leaves the status out.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from mkpolicy.engine import ORIGIN_LABEL, PREBUILT_WORKLOAD_KEY, Adapter, Context
from mkpolicy.errors import MkpolicyError, NotManagedError
from mkpolicy.jsonvalues import apply_merge_patch
from mkpolicy.sidecar.status import StatusError

_MISSING: Any = object()

Result = Literal["ok", "unchanged", "not_managed", "not_ours", "no_manager", "error"]


@dataclass
class Outcome:
    """What a transform did: ``result`` for metrics, the patches skipped under ``Ignore``."""

    result: Result
    ignored: list[MkpolicyError] = field(default_factory=list)
    error: str | None = None


def _meta_map(obj: Mapping[str, Any], key: str) -> dict[str, Any]:
    meta = obj.get("metadata")
    value = meta.get(key) if isinstance(meta, dict) else None
    return value if isinstance(value, dict) else {}


def context_of(obj: Mapping[str, Any], cluster: str) -> Context | None:
    """The create/sync context recorded on a MultiKueue copy, or None when it carries no origin label.

    The workload name comes from the prebuilt-workload annotation (Kueue >= 0.18) or
    label (older Kueue, or the gate ``WorkloadIdentifierAnnotations`` off); the
    identifier mode follows where it was found.
    """
    labels, annotations = _meta_map(obj, "labels"), _meta_map(obj, "annotations")
    origin = labels.get(ORIGIN_LABEL)
    if not isinstance(origin, str) or not origin:
        return None
    if isinstance(annotations.get(PREBUILT_WORKLOAD_KEY), str):
        return Context(str(annotations[PREBUILT_WORKLOAD_KEY]), origin, cluster, None, "annotation")
    if isinstance(labels.get(PREBUILT_WORKLOAD_KEY), str):
        return Context(str(labels[PREBUILT_WORKLOAD_KEY]), origin, cluster, None, "label")
    return Context("", origin, cluster, None, "annotation")


def where(exc: MkpolicyError) -> str:
    """``policy X: creation patch #2 (JSONPatch): message`` — the policy, the patch and what failed."""
    loc = exc.location
    parts = [p for p in (loc.where, loc.position(), exc.message) if p]
    return ": ".join(parts)


def worker_copy(
    adapter: Adapter, manager_obj: Mapping[str, Any], body: Mapping[str, Any], cluster: str
) -> tuple[dict[str, Any], Outcome]:
    """The object to create on the worker: the policy's ``create`` of the manager's object.

    ``body`` is what Kueue sent (its generic clone); it supplies the context only.
    Raises :class:`StatusError`: 400 when the body is not a MultiKueue copy, 403 when
    the policy does not manage the object, 500 when a patch fails (``failurePolicy: Fail``).
    """
    ctx = context_of(body, cluster)
    if ctx is None:
        raise StatusError(
            400,
            f"mkpolicy: policy {adapter.name}: expected the label {ORIGIN_LABEL} on the object to create "
            "(a MultiKueue copy); found none",
        )
    if not ctx.workload_name:
        raise StatusError(
            400,
            f"mkpolicy: policy {adapter.name}: expected the prebuilt workload name under {PREBUILT_WORKLOAD_KEY} "
            "(annotation or label) on the object to create; found none",
        )
    outcome = Outcome("ok")
    manager = _with_type(manager_obj, adapter)
    try:
        worker = adapter.create(manager, ctx, outcome.ignored)
    except NotManagedError as exc:
        raise StatusError(403, f"mkpolicy: policy {adapter.name} does not manage this object: {exc.reason}") from None
    except MkpolicyError as exc:
        raise StatusError(500, f"mkpolicy: creation refused: {where(exc)}") from None
    return worker, outcome


def rewrite_status(
    adapter: Adapter,
    worker_obj: dict[str, Any],
    manager_obj: Mapping[str, Any] | None,
    cluster: str,
    origin: str,
) -> tuple[dict[str, Any], Outcome]:
    """``worker_obj`` with ``status`` = the manager's status after the policy's ``sync``.

    * manager object unknown (``None``): status removed — nothing for Kueue to copy;
    * not our copy (origin label differs) or not managed by the policy: the manager's
      current status — Kueue sees no change and writes nothing;
    * a failing sync patch (``failurePolicy: Fail``): status removed, the outcome an
      ``error`` naming the policy and the patch (Kueue copies nothing; failing the read
      would keep Kueue from ever finishing the workload).

    The input is not modified; other fields are returned as they came.
    """
    out = dict(worker_obj)
    if manager_obj is None:
        out.pop("status", None)
        return out, Outcome("no_manager")
    manager = _with_type(manager_obj, adapter)
    current = manager.get("status", _MISSING)
    ctx = context_of(worker_obj, cluster)
    if ctx is None or ctx.origin != origin:
        _set_status(out, current)
        return out, Outcome("not_ours")
    outcome = Outcome("ok")
    try:
        patch = adapter.sync(manager, _with_type(worker_obj, adapter), ctx, outcome.ignored)
    except NotManagedError:
        _set_status(out, current)
        return out, Outcome("not_managed")
    except MkpolicyError as exc:
        out.pop("status", None)
        return out, Outcome("error", outcome.ignored, f"mkpolicy: status write-back refused: {where(exc)}")
    if patch is None:
        _set_status(out, current)
        outcome.result = "unchanged"
        return out, outcome
    merged = apply_merge_patch(manager, patch)
    _set_status(out, merged.get("status", _MISSING) if isinstance(merged, dict) else _MISSING)
    return out, outcome


def _set_status(obj: dict[str, Any], status: Any) -> None:
    if status is _MISSING or status is None:
        obj.pop("status", None)
    else:
        obj["status"] = status


def _with_type(obj: Mapping[str, Any], adapter: Adapter) -> dict[str, Any]:
    """``obj`` with apiVersion and kind (list items of built-in kinds come without them)."""
    out = dict(obj)
    out.setdefault("apiVersion", adapter.gvk.api_version)
    out.setdefault("kind", adapter.gvk.kind)
    return out


def measure(fn: Callable[..., tuple[dict[str, Any], Outcome]], *args: Any) -> tuple[Any, Outcome, float]:
    """One transform: (object or StatusError, outcome, seconds)."""
    started = time.perf_counter()
    try:
        obj, outcome = fn(*args)
    except StatusError as exc:
        return exc, Outcome("error"), time.perf_counter() - started
    return obj, outcome, time.perf_counter() - started
