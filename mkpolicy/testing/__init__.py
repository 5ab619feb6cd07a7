"""Test support shipped with mkpolicy: the loopback Kubernetes API server (docs/apiserver.md).

``mkpolicy.testing.ApiServer`` is :class:`mkpolicy.testing.apiserver.ApiServer`;
pytest fixtures live in :mod:`mkpolicy.testing.fixtures`, and real clusters as an opt-in
target of the same tests in :mod:`mkpolicy.testing.targets` (docs/testing.md). Kueue's
MultiKueue, modelled from its code, is :mod:`mkpolicy.testing.kueue`; kubectl as a test
client :mod:`mkpolicy.testing.kubectl`. Names are imported lazily so that importing this
package stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mkpolicy.testing.apiserver import ApiError, ApiServer, Faults, bundled_crds, load_crds

_LAZY = {
    "ApiServer": "mkpolicy.testing.apiserver",
    "ApiError": "mkpolicy.testing.apiserver",
    "Faults": "mkpolicy.testing.apiserver",
    "bundled_crds": "mkpolicy.testing.apiserver",
    "load_crds": "mkpolicy.testing.apiserver",
}

__all__ = ["ApiError", "ApiServer", "Faults", "bundled_crds", "load_crds"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mkpolicy.testing' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
