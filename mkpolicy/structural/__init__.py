"""Structural schemas: the OpenAPI v3 schema of a Kubernetes kind, navigable.

A :class:`Schema` wraps one node of an ``openAPIV3Schema``. It answers what
server-side apply and the CEL type checker need: is this an object with known
properties, a map, a list (and of which ``x-kubernetes-list-type``), a scalar, or
unknown territory (``x-kubernetes-preserve-unknown-fields`` or no schema at all,
which Kubernetes treats as *deduced*: maps are granular, lists atomic).

``metadata`` is always Kubernetes' ObjectMeta, whatever the CRD declares, exactly as
the API server does.
"""

from __future__ import annotations

import json
import os
from typing import Any

import mkpolicy.yamldata as yamldata
from mkpolicy.errors import InputError, Location, PolicyError


def read_schema_document(path: str) -> Any:
    """Parse a CRD or OpenAPI schema file (JSON or YAML); the first CRD of a YAML stream wins."""
    try:
        text = yamldata.read_text(path)
    except InputError as exc:
        reason = exc.message.removeprefix("cannot read file: ")
        raise PolicyError(f"cannot read schema file: {reason}", exc.location) from None
    try:
        if path.endswith(".json"):
            return json.loads(text)
        documents = yamldata.load_all(text, path)
    except InputError as exc:
        raise PolicyError(f"cannot parse schema file: {exc.message}", exc.location) from None
    except (ValueError, RecursionError) as exc:
        raise PolicyError(f"cannot parse schema file: {exc}", Location(path)) from None
    crds = [d for d in documents if isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition"]
    return crds[0] if crds else (documents[0] if documents else None)


class Schema:
    """One node of a structural schema; ``node`` None means unknown (deduced)."""

    __slots__ = ("_root", "node")

    def __init__(self, node: dict[str, Any] | None, root: bool = False) -> None:
        self.node = node
        self._root = root

    # -- construction ---------------------------------------------------------------
    @classmethod
    def deduced(cls) -> Schema:
        """The schema of unknown data: maps merge key by key, lists are atomic."""
        return _DEDUCED

    @classmethod
    def from_document(cls, document: Any, version: str | None = None, source: str = "<schema>") -> Schema:
        """A schema from a CRD (the served ``version``) or a bare OpenAPI v3 schema."""
        if not isinstance(document, dict):
            raise PolicyError(
                f"expected a CustomResourceDefinition or an OpenAPI v3 schema object; found {type(document).__name__}",
                Location(source),
            )
        if document.get("kind") == "CustomResourceDefinition":
            versions = document.get("spec", {}).get("versions") or []
            chosen = None
            for v in versions:
                if (version is None and v.get("storage")) or v.get("name") == version:
                    chosen = v
                    break
            if chosen is None:
                names = ", ".join(str(v.get("name")) for v in versions)
                raise PolicyError(
                    f"the CustomResourceDefinition serves no version {version!r} (it serves: {names})",
                    Location(source),
                )
            schema = (chosen.get("schema") or {}).get("openAPIV3Schema")
            if not isinstance(schema, dict):
                raise PolicyError(f"version {chosen.get('name')!r} has no openAPIV3Schema", Location(source))
            return cls(schema, root=True)
        if "openAPIV3Schema" in document:
            return cls(document["openAPIV3Schema"], root=True)
        if "type" in document or "properties" in document:
            return cls(document, root=True)
        raise PolicyError(
            "expected a CustomResourceDefinition or an OpenAPI v3 schema (with 'type' or 'properties')",
            Location(source),
        )

    @classmethod
    def load(cls, path: str, version: str | None = None) -> Schema:
        """Load a CRD or OpenAPI schema from a YAML or JSON file."""
        return cls.from_document(read_schema_document(path), version, os.fspath(path))

    # -- navigation -------------------------------------------------------------------
    @property
    def known(self) -> bool:
        """False for unknown (deduced) territory."""
        return self.node is not None

    def field(self, name: str) -> Schema:
        """The schema of field ``name`` of an object or map (deduced when unknown)."""
        node = self.node
        if node is None:
            return _DEDUCED
        if self._root and name == "metadata":
            return _OBJECT_META
        props = node.get("properties")
        if isinstance(props, dict) and name in props:
            return Schema(props[name])
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            return Schema(extra)
        if self._root and name in ("apiVersion", "kind"):
            return Schema({"type": "string"})
        return _DEDUCED if node.get("x-kubernetes-preserve-unknown-fields") else _ABSENT

    def has_field(self, name: str) -> bool:
        """True when ``name`` is declared (or allowed by additionalProperties/unknown fields)."""
        if self.node is None:
            return True
        return self.field(name) is not _ABSENT

    def items(self) -> Schema:
        """The schema of a list's elements."""
        node = self.node
        if node is None:
            return _DEDUCED
        items = node.get("items")
        return Schema(items) if isinstance(items, dict) else _DEDUCED

    @property
    def type(self) -> str | None:
        """The OpenAPI ``type`` ("object", "array", "string", ...), None when unknown."""
        if self.node is None:
            return None
        t = self.node.get("type")
        if t is None and ("properties" in self.node or "additionalProperties" in self.node):
            return "object"
        return t if isinstance(t, str) else None

    @property
    def int_or_string(self) -> bool:
        """``x-kubernetes-int-or-string``."""
        return bool(self.node and self.node.get("x-kubernetes-int-or-string"))

    @property
    def preserves_unknown(self) -> bool:
        """``x-kubernetes-preserve-unknown-fields`` (or no schema at all)."""
        return self.node is None or bool(self.node.get("x-kubernetes-preserve-unknown-fields"))

    @property
    def is_map(self) -> bool:
        """An object whose keys are free (``additionalProperties``)."""
        return bool(self.node and isinstance(self.node.get("additionalProperties"), dict))

    @property
    def list_type(self) -> str:
        """``atomic`` (the default), ``set`` or ``map``."""
        if self.node is None:
            return "atomic"
        value = self.node.get("x-kubernetes-list-type", "atomic")
        return value if value in ("atomic", "set", "map") else "atomic"

    @property
    def list_map_keys(self) -> list[str]:
        """``x-kubernetes-list-map-keys`` of a ``map`` list."""
        if self.node is None:
            return []
        keys = self.node.get("x-kubernetes-list-map-keys") or []
        return [str(k) for k in keys]

    @property
    def atomic_map(self) -> bool:
        """``x-kubernetes-map-type: atomic`` on an object or map."""
        return bool(self.node and self.node.get("x-kubernetes-map-type") == "atomic")

    def __repr__(self) -> str:
        return f"Schema({self.type or 'unknown'})"


_DEDUCED = Schema(None)
# A field the schema does not declare: reads as unknown, lint reports it.
_ABSENT = Schema(None)

_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_OBJECT_META = Schema(
    {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "generateName": {"type": "string"},
            "namespace": {"type": "string"},
            "uid": {"type": "string"},
            "resourceVersion": {"type": "string"},
            "generation": {"type": "integer"},
            "creationTimestamp": {"type": "string", "format": "date-time"},
            "deletionTimestamp": {"type": "string", "format": "date-time"},
            "deletionGracePeriodSeconds": {"type": "integer"},
            "labels": _STRING_MAP,
            "annotations": _STRING_MAP,
            "finalizers": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
            "ownerReferences": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["uid"],
                "items": {
                    "type": "object",
                    "properties": {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "name": {"type": "string"},
                        "uid": {"type": "string"},
                        "controller": {"type": "boolean"},
                        "blockOwnerDeletion": {"type": "boolean"},
                    },
                },
            },
            "managedFields": {
                "type": "array",
                "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
        },
    }
)


def is_absent(schema: Schema) -> bool:
    """True when ``schema`` stands for a field its parent does not declare."""
    return schema is _ABSENT
