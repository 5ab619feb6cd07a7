"""The JSON Schema of FrameworkPolicy documents, generated from the pydantic models.

``schemas/frameworkpolicy.schema.json`` is this output, committed so that editors
(yaml-language-server) validate policies; a test fails when it drifts from the models.
Regenerate it with ``mkpolicy schema > schemas/frameworkpolicy.schema.json``.
"""

from __future__ import annotations

import json
from typing import Any

from mkpolicy.policy.model import FrameworkPolicy

SCHEMA_ID = "https://mkpolicy.io/schemas/frameworkpolicy.schema.json"


def frameworkpolicy_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a FrameworkPolicy document."""
    schema = FrameworkPolicy.model_json_schema(by_alias=True, mode="validation")
    out: dict[str, Any] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
    }
    out.update(schema)
    out["description"] = (
        "A FrameworkPolicy (mkpolicy.io/v1alpha1): how Kueue MultiKueue creates one external job kind on a "
        "worker cluster and writes its status back, with CEL patches."
    )
    return out


def render() -> str:
    """The schema as the committed file holds it (stable key order, trailing newline)."""
    return json.dumps(frameworkpolicy_schema(), indent=2, sort_keys=True) + "\n"
