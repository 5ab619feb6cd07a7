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
from mkpolicy.jsonvalues import apply_merge_patch
from mkpolicy.structural.validation import FieldError, validate


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
    before = {str(e) for e in validate(manager_obj, schema)}
    return [e for e in validate(after, schema) if str(e) not in before]
