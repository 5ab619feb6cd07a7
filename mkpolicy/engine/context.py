"""The context of one create or sync call: which workload, origin and cluster."""

from __future__ import annotations

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
    """

    workload_name: str = ""
    origin: str = DEFAULT_ORIGIN
    cluster: str = ""
    workload: Mapping[str, Any] | None = None
    identifier: Literal["annotation", "label"] = "annotation"

    def __post_init__(self) -> None:
        if self.identifier not in ("annotation", "label"):
            raise ValueError(f"identifier must be 'annotation' or 'label'; found {self.identifier!r}")
        for name in ("workload_name", "origin", "cluster"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"Context.{name} must be a string; found {type(getattr(self, name)).__name__}")
