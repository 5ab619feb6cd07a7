"""The context of one create or sync call: which workload, origin and cluster."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

#: Kueue's default MultiKueue origin (Configuration ``multiKueue.origin``).
DEFAULT_ORIGIN = "multikueue"


@dataclass(frozen=True)
class Context:
    """What Kueue knows when it dispatches a job.

    ``identifier`` says where the prebuilt-workload name goes on the worker copy:
    ``"annotation"`` (Kueue >= 0.18, feature gate ``WorkloadIdentifierAnnotations`` on,
    the default) or ``"label"`` (gate off; names longer than 63 characters still go to
    the annotation, as labels cannot hold them).

    ``now`` is the time CEL sees as ``now`` (Kueue's adapters stamp conditions with
    ``metav1.Now()``); None means the wall clock at each create/sync call. Either way
    it is in UTC and truncated to whole seconds, the precision ``metav1.Time`` has on
    the wire. Give a fixed time for reproducible dry runs and tests.
    """

    workload_name: str = ""
    origin: str = DEFAULT_ORIGIN
    cluster: str = ""
    workload: Mapping[str, Any] | None = None
    identifier: Literal["annotation", "label"] = "annotation"
    now: _dt.datetime | None = None

    def __post_init__(self) -> None:
        if self.identifier not in ("annotation", "label"):
            raise ValueError(f"identifier must be 'annotation' or 'label'; found {self.identifier!r}")
        for name in ("workload_name", "origin", "cluster"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"Context.{name} must be a string; found {type(getattr(self, name)).__name__}")
        if self.now is not None:
            if not isinstance(self.now, _dt.datetime):
                raise TypeError(f"Context.now must be a datetime.datetime; found {type(self.now).__name__}")
            if self.now.tzinfo is None or self.now.utcoffset() is None:
                raise ValueError("Context.now must be timezone-aware (for example datetime.timezone.utc)")

    def timestamp(self) -> _dt.datetime:
        """The ``now`` of one create/sync call: UTC, whole seconds (as ``metav1.Time`` serialises)."""
        now = self.now if self.now is not None else _dt.datetime.now(_dt.UTC)
        return now.astimezone(_dt.UTC).replace(microsecond=0)
