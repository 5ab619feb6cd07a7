"""A Workload's conditions and the status changes the job reconciler makes, on plain dicts.

Follows apimachinery's ``meta/conditions.go`` (``SetStatusCondition``: a condition is
updated in place; its ``lastTransitionTime`` changes only when the status flips) and Kueue
v0.19.2's ``pkg/workload``: ``HasQuotaReservation``, ``IsAdmitted``, ``IsFinished``
(``finish/finish.go``), ``UnsetQuotaReservationWithCondition`` + ``SyncAdmittedCondition``
(``admissionchecks.go``, with the ``UnadmittedWorkloadsObservability`` gate off, its default),
``SetRequeuedCondition``, ``IsOnHold``.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from typing import Any

from mkpolicy.jsonvalues import copy_json

QUOTA_RESERVED = "QuotaReserved"
ADMITTED = "Admitted"
EVICTED = "Evicted"
FINISHED = "Finished"
REQUEUED = "Requeued"
#: ``WorkloadOnHold``: quota released on purpose, the Workload is not requeued.
ON_HOLD = "OnHold"
#: ``api.TruncateConditionMessage``: messages are cut to 32 KiB.
MAX_MESSAGE = 32 * 1024


def now_rfc3339(now: _dt.datetime | None = None) -> str:
    """``metav1.Now()`` as it serialises: UTC, whole seconds."""
    moment = now or _dt.datetime.now(_dt.UTC)
    return moment.astimezone(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def conditions(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The object's ``status.conditions`` (empty when absent)."""
    found = (obj.get("status") or {}).get("conditions") or []
    return [c for c in found if isinstance(c, dict)]


def find(obj: Mapping[str, Any], kind: str) -> dict[str, Any] | None:
    """``FindStatusCondition``."""
    return next((c for c in conditions(obj) if c.get("type") == kind), None)


def is_true(obj: Mapping[str, Any], kind: str) -> bool:
    """``IsStatusConditionTrue``."""
    found = find(obj, kind)
    return found is not None and found.get("status") == "True"


def set_condition(status: dict[str, Any], condition: dict[str, Any], now: str) -> bool:
    """``SetStatusCondition`` on ``status`` (a Workload's status, modified); True when it changed."""
    items: list[dict[str, Any]] = status.setdefault("conditions", [])
    condition = {**condition, "message": str(condition.get("message", ""))[:MAX_MESSAGE]}
    for existing in items:
        if existing.get("type") != condition["type"]:
            continue
        changed = False
        if existing.get("status") != condition["status"]:
            existing["status"] = condition["status"]
            existing["lastTransitionTime"] = condition.get("lastTransitionTime") or now
            changed = True
        for key in ("reason", "message", "observedGeneration"):
            if key in condition and existing.get(key) != condition[key]:
                existing[key] = condition[key]
                changed = True
        return changed
    items.append({**condition, "lastTransitionTime": condition.get("lastTransitionTime") or now})
    return True


def has_quota_reservation(wl: Mapping[str, Any]) -> bool:
    """``HasQuotaReservation``."""
    return is_true(wl, QUOTA_RESERVED)


def is_admitted(wl: Mapping[str, Any]) -> bool:
    """``IsAdmitted``."""
    return is_true(wl, ADMITTED)


def is_finished(wl: Mapping[str, Any]) -> bool:
    """``finish.IsFinished``."""
    return is_true(wl, FINISHED)


def is_on_hold(wl: Mapping[str, Any]) -> bool:
    """``IsOnHold``: QuotaReserved False with reason OnHold."""
    found = find(wl, QUOTA_RESERVED)
    return found is not None and found.get("status") == "False" and found.get("reason") == ON_HOLD


def _generation(wl: Mapping[str, Any]) -> int:
    return int((wl.get("metadata") or {}).get("generation") or 0)


def finished_status(wl: Mapping[str, Any], reason: str, message: str, now: str) -> dict[str, Any]:
    """The status with ``Finished=True`` (``finish.Finish``'s ``setFinishedCondition``)."""
    status: dict[str, Any] = copy_json(dict(wl.get("status") or {}))
    set_condition(
        status,
        {
            "type": FINISHED,
            "status": "True",
            "reason": reason,
            "message": message,
            "observedGeneration": _generation(wl),
        },
        now,
    )
    return status


def _all_checks_ready(status: Mapping[str, Any]) -> bool:
    return all(check.get("state") == "Ready" for check in status.get("admissionChecks") or [])


def unset_quota_reservation(wl: Mapping[str, Any], reason: str, message: str, now: _dt.datetime) -> dict[str, Any]:
    """``UnsetQuotaReservationWithCondition``: QuotaReserved False, no admission, Admitted synced
    (``SyncAdmittedCondition``: False with NoReservation, the admitted time accumulated)."""
    stamp = now_rfc3339(now)
    status: dict[str, Any] = copy_json(dict(wl.get("status") or {}))
    set_condition(
        status,
        {
            "type": QUOTA_RESERVED,
            "status": "False",
            "reason": reason,
            "message": message,
            "observedGeneration": _generation(wl),
        },
        stamp,
    )
    status.pop("admission", None)
    admitted = find({"status": status}, ADMITTED)
    if admitted is not None and admitted.get("status") == "True":
        checks_ready = _all_checks_ready(status)
        since = admitted.get("lastTransitionTime")
        if isinstance(since, str):
            try:
                started = _dt.datetime.strptime(since, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=_dt.UTC)
                elapsed = int((now - started).total_seconds())
                status["accumulatedPastExecutionTimeSeconds"] = (
                    int(status.get("accumulatedPastExecutionTimeSeconds") or 0) + elapsed
                )
            except ValueError:
                pass
        set_condition(
            status,
            {
                "type": ADMITTED,
                "status": "False",
                "reason": "NoReservation" if checks_ready else "NoReservationUnsatisfiedChecks",
                "message": "The workload has no reservation"
                if checks_ready
                else "The workload has no reservation and not all checks ready",
                "observedGeneration": _generation(wl),
            },
            stamp,
        )
    return status


def requeued(status: dict[str, Any], reason: str, message: str, value: bool, generation: int, now: str) -> None:
    """``SetRequeuedCondition`` on ``status``."""
    set_condition(
        status,
        {
            "type": REQUEUED,
            "status": "True" if value else "False",
            "reason": reason,
            "message": message,
            "observedGeneration": generation,
        },
        now,
    )
