"""mkpolicy: declarative FrameworkPolicies for Kueue MultiKueue external frameworks.

The public API (docs/architecture.md, "Public Python API")::

    import mkpolicy
    policies = mkpolicy.load("policies/")
    adapter = mkpolicy.compile(policies[0])
    worker = adapter.create(manager_obj, mkpolicy.Context(workload_name="wl-1"))
    patch = adapter.sync(manager_obj, worker_obj, mkpolicy.Context(workload_name="wl-1"))
    mkpolicy.mutate(obj, [{"patchType": "JSONPatch", "expression": "..."}])
    mkpolicy.cel.evaluate("object.spec.x + 1", {"object": {...}})

Names are imported lazily so that ``mkpolicy --help`` stays fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from mkpolicy.errors import (
    CelError,
    Location,
    MkpolicyError,
    NotManagedError,
    PatchError,
    PolicyError,
)

if TYPE_CHECKING:
    from mkpolicy import cel
    from mkpolicy.engine import Adapter, Context, compile
    from mkpolicy.engine.mutate import mutate  # not via mkpolicy.engine: mypy mistakes it for the submodule
    from mkpolicy.policy import FrameworkPolicy, load

__version__ = "0.1.0"

_LAZY = {
    "load": ("mkpolicy.policy", "load"),
    "FrameworkPolicy": ("mkpolicy.policy", "FrameworkPolicy"),
    "compile": ("mkpolicy.engine", "compile"),
    "Adapter": ("mkpolicy.engine", "Adapter"),
    "Context": ("mkpolicy.engine", "Context"),
    "mutate": ("mkpolicy.engine", "mutate"),
    "cel": ("mkpolicy.cel", None),
}

__all__ = [
    "Adapter",
    "CelError",
    "Context",
    "FrameworkPolicy",
    "Location",
    "MkpolicyError",
    "NotManagedError",
    "PatchError",
    "PolicyError",
    "cel",
    "compile",
    "load",
    "mutate",
]


def __getattr__(name: str) -> Any:
    try:
        module_name, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'mkpolicy' has no attribute {name!r}") from None
    module = importlib.import_module(module_name)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    return value
