"""The framework schema (``spec.schema``): readable (MKP107) and of the right kind (MKP108)."""

from __future__ import annotations

import json
import os
from typing import Any

from mkpolicy.errors import PolicyError
from mkpolicy.lint.checks.context import PolicyContext
from mkpolicy.structural import Schema

#: Parsed schema files of one lint run: path -> document, or the PolicyError reading it.
SchemaCache = dict[str, Any]


def schema_path(policy_file: str | None, ref: str) -> str:
    """``ref`` resolved against the policy's directory (as the engine resolves it)."""
    base = os.path.dirname(policy_file) if policy_file and not policy_file.startswith("<") else os.getcwd()
    return os.path.normpath(ref if os.path.isabs(ref) else os.path.join(base, ref))


def read_schema_document(path: str) -> Any:
    """Parse a CRD or OpenAPI schema file (JSON or YAML); the first CRD of a YAML stream wins."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise PolicyError(f"cannot read schema file {path}: {exc.strerror or exc}") from None
    try:
        if path.endswith(".json"):
            return json.loads(raw)
        import yaml

        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        documents = [d for d in yaml.load_all(raw, Loader=loader) if d is not None]
    except (ValueError, UnicodeDecodeError) as exc:
        raise PolicyError(f"cannot parse schema file {path}: {exc}") from None
    except Exception as exc:  # yaml.YAMLError and friends
        raise PolicyError(f"cannot parse schema file {path}: {exc}") from None
    crds = [d for d in documents if isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition"]
    return crds[0] if crds else (documents[0] if documents else None)


def check_schema(ctx: PolicyContext, cache: SchemaCache) -> None:
    """Load ``spec.schema`` into ``ctx.schema``; report unreadable or mismatched schemas."""
    ref = ctx.policy.spec.schema_
    if ref is None:
        return
    where = ctx.at(("spec", "schema"))
    path = schema_path(ctx.policy.file, ref)
    if path not in cache:
        try:
            cache[path] = read_schema_document(path)
        except PolicyError as exc:
            cache[path] = exc
    document = cache[path]
    if isinstance(document, PolicyError):
        ctx.report("MKP107", f"spec.schema {ref!r}: {document.message}", where)
        return
    gvk = ctx.policy.spec.gvk
    if isinstance(document, dict) and document.get("kind") == "CustomResourceDefinition":
        spec = document.get("spec") or {}
        group, kind = spec.get("group", ""), (spec.get("names") or {}).get("kind")
        if group != gvk.group or kind != gvk.kind:
            ctx.report(
                "MKP108",
                f"spec.schema {ref!r} is the CustomResourceDefinition of kind {kind!r} in group {group!r}; "
                f"expected kind {gvk.kind!r} in group {gvk.group!r} (the framework {gvk})",
                where,
            )
            return
    try:
        ctx.schema = Schema.from_document(document, gvk.version, path)
    except PolicyError as exc:
        ctx.report("MKP107", f"spec.schema {ref!r}: {exc.message}", where)
