"""Conversions between API versions whose fields differ.

Custom resources change only ``apiVersion`` between versions (conversion strategy
``None``). One built-in pair has different fields: Events. kube-apiserver stores one Event
and serves it as ``v1`` (core) and as ``events.k8s.io/v1``
(``pkg/apis/events/v1/conversion.go``: ``regarding`` is ``involvedObject``, ``note`` is
``message``, ``reportingController`` is ``reportingComponent``, and the ``deprecated*``
fields are the core ``source``, ``firstTimestamp``, ``lastTimestamp`` and ``count``).
The server stores core Events and converts at the edges.
"""

from __future__ import annotations

from collections.abc import Callable

from mkpolicy.testing.apiserver.jsonutil import JsonObject

CORE_V1 = "v1"
EVENTS_V1 = "events.k8s.io/v1"

#: events.k8s.io/v1 field -> core v1 field.
_EVENT_RENAMES = {
    "regarding": "involvedObject",
    "note": "message",
    "reportingController": "reportingComponent",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
_EVENT_RENAMES_BACK = {core: events for events, core in _EVENT_RENAMES.items()}


def _renamed(obj: JsonObject, renames: dict[str, str], api_version: str) -> JsonObject:
    out = {renames.get(key, key): value for key, value in obj.items()}
    out["apiVersion"] = api_version
    return out


def event_to_core(obj: JsonObject) -> JsonObject:
    """An events.k8s.io/v1 Event as the core v1 Event kube-apiserver stores."""
    return _renamed(obj, _EVENT_RENAMES, CORE_V1)


def event_from_core(obj: JsonObject) -> JsonObject:
    """A stored (core v1) Event as events.k8s.io/v1 serves it."""
    return _renamed(obj, _EVENT_RENAMES_BACK, EVENTS_V1)


#: (kind, from apiVersion, to apiVersion) -> conversion.
CONVERSIONS: dict[tuple[str, str, str], Callable[[JsonObject], JsonObject]] = {
    ("Event", EVENTS_V1, CORE_V1): event_to_core,
    ("Event", CORE_V1, EVENTS_V1): event_from_core,
}


def convert(obj: JsonObject, api_version: str) -> JsonObject:
    """``obj`` under ``api_version``: converted where the fields differ, else a shallow copy
    with the new ``apiVersion`` (``obj`` itself when it already has it)."""
    current = obj.get("apiVersion")
    if current == api_version:
        return obj
    conversion = CONVERSIONS.get((str(obj.get("kind")), str(current), api_version))
    if conversion is not None:
        return conversion(obj)
    return {**obj, "apiVersion": api_version}
