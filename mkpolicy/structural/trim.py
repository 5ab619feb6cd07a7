"""Trim a CustomResourceDefinition to what a policy needs, so that it fits a ConfigMap.

Real CRDs with a pod template run past a ConfigMap's 1 MiB, mostly in ``description``
texts. :func:`trim_crd` keeps one served version and, of its schema, everything that
validation, CEL type checking and structured merges read (types, properties, formats,
enums, bounds, defaults, nullability, ``x-kubernetes-*`` extensions including CEL
validation rules); it drops descriptions, examples, titles and external documentation,
the other versions, printer columns and conversion settings. Validation of objects
against the trimmed CRD is the same as against the original.
"""

from __future__ import annotations

from typing import Any

from mkpolicy.errors import Location, PolicyError

#: Schema keywords only people read.
_DOCUMENTATION = frozenset({"description", "example", "externalDocs", "title"})
#: Keywords whose value is one schema, or a list or map of schemas.
_ONE = ("items", "not", "additionalProperties")
_MANY = ("allOf", "anyOf", "oneOf")
_NAMED = ("properties", "patternProperties", "definitions")


def trim_schema(node: Any) -> Any:
    """``node`` (an OpenAPI v3 schema, or a document holding one as ``openAPIV3Schema``)
    without its documentation keywords, recursively."""
    if not isinstance(node, dict):
        return node
    if set(node) == {"openAPIV3Schema"}:
        return {"openAPIV3Schema": trim_schema(node["openAPIV3Schema"])}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DOCUMENTATION:
            continue
        if key in _ONE:
            out[key] = [trim_schema(v) for v in value] if isinstance(value, list) else trim_schema(value)
        elif key in _MANY and isinstance(value, list):
            out[key] = [trim_schema(v) for v in value]
        elif key in _NAMED and isinstance(value, dict):
            # Property names are data here: a property named "description" stays.
            out[key] = {name: trim_schema(v) for name, v in value.items()}
        else:
            out[key] = value
    return out


def trim_crd(document: Any, version: str, source: str = "<crd>") -> dict[str, Any]:
    """A CRD holding only ``version`` of ``document``, its schema without documentation."""
    if not isinstance(document, dict) or document.get("kind") != "CustomResourceDefinition":
        raise PolicyError("expected a CustomResourceDefinition", Location(source))
    spec = document.get("spec") or {}
    versions = [v for v in spec.get("versions") or [] if isinstance(v, dict)]
    chosen = next((v for v in versions if v.get("name") == version), None)
    if chosen is None:
        names = ", ".join(str(v.get("name")) for v in versions)
        raise PolicyError(
            f"the CustomResourceDefinition serves no version {version!r} (it serves: {names})", Location(source)
        )
    kept: dict[str, Any] = {key: chosen[key] for key in ("name", "served", "storage") if key in chosen}
    kept["storage"] = True  # the only version left is the one stored
    if "schema" in chosen:
        kept["schema"] = {"openAPIV3Schema": trim_schema((chosen["schema"] or {}).get("openAPIV3Schema"))}
    if "subresources" in chosen:
        kept["subresources"] = chosen["subresources"]
    name = (document.get("metadata") or {}).get("name")
    return {
        "apiVersion": document.get("apiVersion", "apiextensions.k8s.io/v1"),
        "kind": "CustomResourceDefinition",
        "metadata": {"name": name} if name else {},
        "spec": {key: spec[key] for key in ("group", "names", "scope") if key in spec} | {"versions": [kept]},
    }
