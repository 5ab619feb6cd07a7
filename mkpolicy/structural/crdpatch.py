"""A CRD given the managedBy field stock Kueue reads, for a kind that has none (Argo's ``Workflow``).

Stock Kueue decides "managed by MultiKueue" by ``.spec.managedBy`` alone. A structural CRD
without that property prunes it on every write (``kube-apiserver``'s pruning of unknown
fields, ``apiextensions-apiserver/pkg/apiserver/schema/pruning``), so the field must be
declared on the manager's CRD. :func:`add_field` declares it (a string) in the schema of
every version that would prune it; :func:`field_state` says whether a CRD keeps it.

The whole CRD is the unit of change: ``spec.versions`` is an atomic list for server-side
apply (``+listType=atomic`` in ``apiextensions/v1/types.go``), so the patched CRD is applied
whole, with its own field manager.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, Literal

from mkpolicy.errors import Location, PolicyError

#: The schema of the declared field. Kueue's own kinds cap managedBy at 63 characters.
FIELD_SCHEMA: dict[str, Any] = {
    "type": "string",
    "maxLength": 63,
    "description": "The controller that manages this object (kueue.x-k8s.io/multikueue: dispatched by "
    "MultiKueue). Added by mkpolicy export crd-patch; not part of the upstream CRD.",
}
#: The field manager the patched CRD is applied with (``kubectl apply --server-side --field-manager``).
FIELD_MANAGER = "mkpolicy-crd-patch"
#: Metadata the API server owns; an applied object must not carry it.
_SERVER_METADATA = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink")

FieldState = Literal["declared", "kept", "pruned"]


def _parent(version: dict[str, Any], tokens: Sequence[str]) -> tuple[dict[str, Any] | None, FieldState]:
    """(the object schema that would declare the field, or None; the field's state there)."""
    node: Any = (version.get("schema") or {}).get("openAPIV3Schema") or {}
    for token in tokens[:-1]:
        props = node.get("properties") if isinstance(node, dict) else None
        if isinstance(props, dict) and isinstance(props.get(token), dict):
            node = props[token]
        elif isinstance(node, dict) and node.get("x-kubernetes-preserve-unknown-fields") is True:
            return None, "kept"
        else:
            return None, "pruned"
    props = node.get("properties") if isinstance(node, dict) else None
    if isinstance(props, dict) and tokens[-1] in props:
        return node, "declared"
    if isinstance(node, dict) and node.get("x-kubernetes-preserve-unknown-fields") is True:
        return node, "kept"
    return node if isinstance(node, dict) else None, "pruned"


def field_state(crd: dict[str, Any], version: str, tokens: Sequence[str]) -> FieldState:
    """Whether ``version``'s schema declares the field at ``tokens``, keeps it as an unknown field
    (``x-kubernetes-preserve-unknown-fields``), or prunes it."""
    return _parent(_version(crd, version), tokens)[1]


def add_field(crd: dict[str, Any], tokens: Sequence[str], source: str = "<crd>") -> tuple[dict[str, Any], list[str]]:
    """(``crd`` ready to apply with the field at ``tokens`` declared in every version that would
    prune it, the names of the versions changed). Server-owned metadata and ``status`` are left out."""
    out = copy.deepcopy(crd)
    meta = out.get("metadata")
    if isinstance(meta, dict):
        for key in _SERVER_METADATA:
            meta.pop(key, None)
        annotations = meta.get("annotations")
        if isinstance(annotations, dict):
            annotations.pop("kubectl.kubernetes.io/last-applied-configuration", None)
            if not annotations:
                meta.pop("annotations")
    out.pop("status", None)
    changed: list[str] = []
    versions = (out.get("spec") or {}).get("versions")
    if not isinstance(versions, list) or not versions:
        raise PolicyError("expected a CustomResourceDefinition with spec.versions; found none", Location(source))
    for version in versions:
        if not isinstance(version, dict):
            continue
        node, state = _parent(version, tokens)
        if state != "pruned":
            continue
        if node is None:
            where = "/".join(tokens[:-1])
            raise PolicyError(
                f"version {version.get('name')}: expected an object schema at {where} to declare "
                f"{tokens[-1]} in; found none",
                Location(source),
            )
        node.setdefault("properties", {})[tokens[-1]] = dict(FIELD_SCHEMA)
        changed.append(str(version.get("name")))
    return out, changed


def _version(crd: dict[str, Any], version: str) -> dict[str, Any]:
    for entry in (crd.get("spec") or {}).get("versions") or []:
        if isinstance(entry, dict) and entry.get("name") == version:
            return entry
    raise PolicyError(f"the CustomResourceDefinition serves no version {version!r}", Location("<crd>"))


__all__ = ["FIELD_MANAGER", "FIELD_SCHEMA", "FieldState", "add_field", "field_state"]
