"""The framework schema (``spec.schema``): readable (MKP107), of the right kind (MKP108),
small enough to deploy (MKP109)."""

from __future__ import annotations

import os
from typing import Any

from mkpolicy.check.checks.context import PolicyContext
from mkpolicy.errors import Location, PolicyError
from mkpolicy.structural import Schema, read_schema_document

#: Parsed schema files of one lint run: path -> document, or the PolicyError reading it.
SchemaCache = dict[str, Any]


def check_schema(ctx: PolicyContext, cache: SchemaCache) -> None:
    """Load ``spec.schema`` into ``ctx.schema``; report unreadable or mismatched schemas."""
    ref = ctx.policy.spec.schema_
    if ref is None:
        return
    where = ctx.at(("spec", "schema"))
    path = ctx.policy.schema_file
    assert path is not None
    if path not in cache:
        try:
            cache[path] = read_schema_document(path)
        except PolicyError as exc:
            cache[path] = exc
    document = cache[path]
    if isinstance(document, PolicyError):
        # The finding sits at spec.schema; the schema file's own position goes in the message.
        ctx.report("MKP107", f"spec.schema {ref!r} ({document.location.position()}): {document.message}", where)
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
        return
    _check_size(ctx, ref, path, where)


#: The most a ConfigMap holds, all its files together (kube-apiserver's ValidateConfigMap). A
#: client-side ``kubectl apply`` fails far earlier, from 256 KiB (it copies the object into an
#: annotation): the documented install applies server-side.
CONFIGMAP_LIMIT = 1024 * 1024


def _check_size(ctx: PolicyContext, ref: str, path: str, where: Location) -> None:
    try:
        schema_size = os.path.getsize(path)
        policy_size = os.path.getsize(ctx.policy.file) if ctx.policy.file else 0
    except OSError:
        return
    if schema_size + policy_size <= CONFIGMAP_LIMIT:
        return
    ctx.report(
        "MKP109",
        f"spec.schema {ref!r} is {schema_size:,} bytes: with the policy, more than a ConfigMap holds "
        f"({CONFIGMAP_LIMIT:,} bytes of data, kube-apiserver's limit even applied server-side), so the policies "
        f"ConfigMap cannot carry it; 'mkpolicy trim-schema "
        f"{ref} --framework {ctx.policy.spec.framework} -o FILE' writes the same schema without descriptions "
        "and other versions (validation, types and merges unchanged)",
        where,
    )
