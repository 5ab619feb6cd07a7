"""Would the API server accept what a policy produced? Schema checks of create and sync results.

A worker copy that breaks the framework's CRD schema is refused by the worker's API
server (Kueue retries forever); a status write that breaks it is refused by the
manager's. Only the violations the policy brings count: the manager's object, as the
test or the user gave it, may be incomplete, and what it already lacks is not the
policy's doing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from mkpolicy.engine.adapter import Adapter
from mkpolicy.engine.crdrules import rule_errors
from mkpolicy.jsonvalues import apply_merge_patch
from mkpolicy.structural.objectmeta import object_meta_errors
from mkpolicy.structural.validation import FieldError, validate


def schema_errors(obj: Any, schema: Mapping[str, Any], old: Any = None) -> list[FieldError]:
    """What kube-apiserver's validation of a custom resource against ``schema`` reports.

    The schema's types, bounds and patterns first; its ``x-kubernetes-validations`` rules
    when those pass (a rule on a value of the wrong type would only add noise). ``old``
    is the stored object on an update: transition rules (``oldSelf``) need it.
    """
    return validate(obj, schema) or rule_errors(obj, schema, old)


#: Who refuses a phase's result, for messages: ``f"{REFUSER[phase]} (spec.schema): ..."``.
REFUSER = {
    "create": "the worker's API server would refuse the worker copy",
    "sync": "the manager's API server would refuse the status write",
}


def refused_fields(
    adapter: Adapter, manager_obj: Mapping[str, Any], phase: Literal["create", "sync"], result: Any
) -> list[FieldError]:
    """Violations of the framework's schema in ``result`` that ``manager_obj`` does not have.

    ``result`` is what ``adapter.create`` (the worker copy) or ``adapter.sync`` (the
    status merge patch, applied to the manager's object here) returned. Empty when the
    policy has no schema or the result is None.
    """
    schema = adapter.schema.node if adapter.schema is not None else None
    if schema is None or result is None:
        return []
    after = result if phase == "create" else apply_merge_patch(dict(manager_obj), result)
    old = manager_obj if phase == "sync" else None  # a status write updates the manager's object
    before = {str(e) for e in schema_errors(manager_obj, schema)}
    return [e for e in schema_errors(after, schema, old) if str(e) not in before]


def refused_metadata(manager_obj: Mapping[str, Any], phase: Literal["create", "sync"], result: Any) -> list[FieldError]:
    """ObjectMeta violations of the worker copy (labels, annotations, name) that ``manager_obj`` does not have.

    The worker's API server validates ``metadata`` on every create whatever the CRD's schema
    (:mod:`mkpolicy.structural.objectmeta`); a status write leaves metadata alone.
    """
    if phase != "create" or not isinstance(result, Mapping):
        return []
    before = {str(e) for e in object_meta_errors(manager_obj)}
    return [e for e in object_meta_errors(result) if str(e) not in before]


def refusals(
    adapter: Adapter, manager_obj: Mapping[str, Any], phase: Literal["create", "sync"], result: Any
) -> list[str]:
    """Why the API server would refuse what the policy produced, one line per source:
    ``"<who> (ObjectMeta): <field error>; ..."``, then ``"<who> (spec.schema): ..."``."""
    found = [
        ("ObjectMeta", refused_metadata(manager_obj, phase, result)),
        ("spec.schema", refused_fields(adapter, manager_obj, phase, result)),
    ]
    return [f"{REFUSER[phase]} ({source}): " + "; ".join(map(str, errors)) for source, errors in found if errors]
