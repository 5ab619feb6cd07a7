"""Events on jobs, as client-go's recorder writes them (core/v1, ``generateName``), best effort:
a failed Event write is logged, never fails a reconcile."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Mapping
from typing import Any

from mkpolicy.controller.status import now_rfc3339
from mkpolicy.jsonlogs import fields, plain_error
from mkpolicy.kube.client import KubeClient

log = logging.getLogger("mkpolicy.controller.events")

COMPONENT = "mkpolicy-controller"
#: ``api.TruncateEventMessage``: Event messages are cut to 1 KiB.
MAX_MESSAGE = 1024
#: How many recent Events :attr:`EventRecorder.recorded` keeps.
RECENT = 256


class EventRecorder:
    """Records Events about objects (``Normal`` or ``Warning``)."""

    def __init__(self, client: KubeClient, instance: str) -> None:
        self.client = client
        self.instance = instance
        #: The latest Events written (object name, reason, message), for tests and debugging.
        self.recorded: deque[tuple[str, str, str]] = deque(maxlen=RECENT)

    async def record(self, obj: Mapping[str, Any], kind: str, reason: str, message: str) -> None:
        """Write one Event about ``obj``."""
        meta = obj.get("metadata") or {}
        namespace = str(meta.get("namespace") or "default")
        now = now_rfc3339()
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta.get('name', 'object')}.", "namespace": namespace},
            "involvedObject": {
                "apiVersion": obj.get("apiVersion"),
                "kind": obj.get("kind"),
                "name": meta.get("name"),
                "namespace": namespace,
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "reason": reason,
            "message": message[:MAX_MESSAGE],
            "type": kind,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self.instance,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        self.recorded.append((str(meta.get("name")), reason, message))
        try:
            await self.client.create(f"/api/v1/namespaces/{namespace}/events", event)
        except Exception as exc:  # Events are best effort, as client-go's
            log.warning("cannot record an Event", extra=fields(reason=reason, error=plain_error(exc)))
