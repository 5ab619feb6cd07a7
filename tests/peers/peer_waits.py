"""Waiting on real peers, shared by the real-peer end-to-end tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from mkpolicy.testing.apiserver import ApiError

#: Real Kueue reacts within seconds; generous for a busy 2-core machine.
TIMEOUT = 120.0


def eventually(check: Callable[[], Any], what: str, timeout: float = TIMEOUT) -> Any:
    """Poll ``check()`` until truthy (its value); AssertionError naming ``what`` otherwise."""
    deadline = time.monotonic() + timeout
    value: Any = None
    while True:
        try:
            value = check()
        except ApiError as exc:
            value = f"ApiError {exc.code}: {exc}"
        if value and not isinstance(value, str):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f}s (last: {value!r})")
        time.sleep(0.25)


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    """The condition ``kind`` of ``obj`` ({} when absent)."""
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), {})


def exists(cluster: Any, ns: str, api: tuple[str, str], name: str) -> bool:
    """Whether ``cluster`` has the object (404: no; any other error is raised)."""
    try:
        cluster.admin.get(*api, name, ns)
    except ApiError as exc:
        if exc.code == 404:
            return False
        raise
    return True
