"""Pruning and defaulting of custom resources from their structural schema.

kube-apiserver drops the fields a CRD's ``openAPIV3Schema`` does not declare (unless
``x-kubernetes-preserve-unknown-fields`` keeps them), drops ``null`` values of
non-nullable fields, and fills in ``default`` values. The server does the same on every
write, and reports the dropped paths so that ``fieldValidation=Strict`` can reject them
and ``Warn`` can return them in ``Warning`` headers.

Validation against the schema happens after this, in the write operations
(:mod:`mkpolicy.structural.validation`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mkpolicy.testing.apiserver.jsonutil import copy_json
from mkpolicy.testing.apiserver.validation import OBJECT_META_FIELDS

_ROOT_KEEP = ("apiVersion", "kind", "metadata")


def prune_metadata(obj: dict[str, Any], unknown: list[str], path: str = "metadata") -> None:
    """Drop unknown ``ObjectMeta`` fields of ``obj`` (in place), recording their paths."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return
    for key in list(meta):
        if key not in OBJECT_META_FIELDS:
            del meta[key]
            unknown.append(f"{path}.{key}")


def normalize(obj: dict[str, Any], schema: Mapping[str, Any] | None) -> list[str]:
    """Prune and default ``obj`` (in place) from ``schema``; returns the pruned field paths."""
    unknown: list[str] = []
    prune_metadata(obj, unknown)
    if schema:
        _object(obj, schema, "", unknown, root=True)
    return unknown


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _value(value: Any, schema: Mapping[str, Any], path: str, unknown: list[str]) -> None:
    if isinstance(value, dict):
        _object(value, schema, path, unknown, root=schema.get("x-kubernetes-embedded-resource") is True)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i, item in enumerate(value):
                _value(item, items, f"{path}[{i}]", unknown)


def _object(obj: dict[str, Any], schema: Mapping[str, Any], path: str, unknown: list[str], *, root: bool) -> None:
    props = schema.get("properties")
    props = props if isinstance(props, Mapping) else {}
    additional = schema.get("additionalProperties")
    preserve = schema.get("x-kubernetes-preserve-unknown-fields") is True
    for key in list(obj):
        if root and key in _ROOT_KEEP:
            if key == "metadata" and path:
                # An embedded resource keeps its metadata, restricted to ObjectMeta.
                prune_metadata(obj, unknown, _join(path, "metadata"))
            continue
        sub = props.get(key)
        if sub is None and isinstance(additional, Mapping):
            sub = additional
        if sub is None:
            if not (preserve or additional is True):
                del obj[key]
                unknown.append(_join(path, key))
            continue
        if obj[key] is None and sub.get("nullable") is not True:
            # Nulls of non-nullable fields are pruned before defaulting (so a default can apply).
            del obj[key]
            continue
        _value(obj[key], sub, _join(path, key), unknown)
    for key, sub in props.items():
        if key not in obj and isinstance(sub, Mapping) and "default" in sub:
            obj[key] = copy_json(sub["default"])
            # Defaults are pruned too, but what they lose is not the client's unknown field.
            _value(obj[key], sub, _join(path, key), [])
