"""FrameworkPolicy documents: models, GVK parsing and loading with positions."""

from mkpolicy.policy.gvk import GVK, parse_gvk
from mkpolicy.policy.loader import load, loads
from mkpolicy.policy.model import (
    API_VERSION,
    DEFAULT_MANAGED_BY_PATH,
    KIND,
    MULTIKUEUE_CONTROLLER,
    ApplyConfigurationMutation,
    Creation,
    FrameworkPolicy,
    Integration,
    JSONPatchMutation,
    ManagedBy,
    Mutation,
    NamedExpression,
    Spec,
    Sync,
)

__all__ = [
    "API_VERSION",
    "DEFAULT_MANAGED_BY_PATH",
    "GVK",
    "KIND",
    "MULTIKUEUE_CONTROLLER",
    "ApplyConfigurationMutation",
    "Creation",
    "FrameworkPolicy",
    "Integration",
    "JSONPatchMutation",
    "ManagedBy",
    "Mutation",
    "NamedExpression",
    "Spec",
    "Sync",
    "load",
    "loads",
    "parse_gvk",
]
