"""Kueue, replayed: the entry point kept for existing imports.

The model lives in :mod:`mkpolicy.testing.kueue` (Kueue's MultiKueue controllers, read
from Kueue's Go code): :class:`Kueue` runs them, :class:`KueueSteps` takes the generic
adapter's steps one at a time, :class:`ManagerKueue` and :class:`WorkerKueue` play the
rest of Kueue. docs/testing.md describes them.
"""

from __future__ import annotations

from mkpolicy.testing.kueue import (
    ORIGIN_LABEL,
    PREBUILT_WORKLOAD_ANNOTATION,
    PREBUILT_WORKLOAD_LABEL,
    Kueue,
    KueueVersion,
    ManagerKueue,
    WorkerKueue,
    merge_patch,
)
from mkpolicy.testing.kueue.steps import KueueSteps

__all__ = [
    "ORIGIN_LABEL",
    "PREBUILT_WORKLOAD_ANNOTATION",
    "PREBUILT_WORKLOAD_LABEL",
    "Kueue",
    "KueueSteps",
    "KueueVersion",
    "ManagerKueue",
    "WorkerKueue",
    "merge_patch",
]
