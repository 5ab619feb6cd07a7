"""Compile FrameworkPolicies into adapters and apply them (create, sync, mutate)."""

from mkpolicy.engine.adapter import Adapter, compile, load_schema
from mkpolicy.engine.admission import refused_fields, schema_errors
from mkpolicy.engine.context import DEFAULT_ORIGIN, Context
from mkpolicy.engine.generic import ORIGIN_LABEL, PREBUILT_WORKLOAD_KEY
from mkpolicy.engine.mutate import mutate

__all__ = [
    "DEFAULT_ORIGIN",
    "ORIGIN_LABEL",
    "PREBUILT_WORKLOAD_KEY",
    "Adapter",
    "Context",
    "compile",
    "load_schema",
    "mutate",
    "refused_fields",
    "schema_errors",
]
