"""The three PATCH formats: JSON merge patch, JSON patch and strategic merge patch.

- ``application/merge-patch+json`` (RFC 7386): maps merge, ``null`` deletes, anything
  else (lists included) replaces.
- ``application/json-patch+json`` (RFC 6902): a list of operations. A malformed
  document is a 400 BadRequest; an operation that does not apply (missing path,
  failed ``test``) is a 422, as kube-apiserver answers.
- ``application/strategic-merge-patch+json`` (built-in kinds only): a merge patch
  whose lists merge by key where the Kubernetes types say so (``containers`` and
  ``env`` by ``name``, ``conditions`` by ``type``, ``metadata.finalizers`` as a set,
  ...), with the ``$patch: replace|delete``, ``$retainKeys``,
  ``$deleteFromPrimitiveList/<field>`` and ``$setElementOrder/<field>`` directives.
  The merge-key table covers the fields of the built-in kinds this server serves;
  ``$setElementOrder`` is accepted and ignored (the order of merged lists is kept).
"""

from __future__ import annotations

import re
from typing import Any

import jsonpatch

from mkpolicy.testing.apiserver.errors import ApiError, bad_request
from mkpolicy.testing.apiserver.jsonutil import copy_json, json_equal, type_name

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

#: List fields of the served built-in kinds that merge by a key (``patchMergeKey``).
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "conditions": "type",
    "ownerReferences": "uid",
    "resourceClaims": "name",
}


_OPS = {
    "add": ("path", "value"),
    "remove": ("path",),
    "replace": ("path", "value"),
    "move": ("from", "path"),
    "copy": ("from", "path"),
    "test": ("path", "value"),
}


def json_patch(target: dict[str, Any], ops: Any) -> Any:
    """Apply an RFC 6902 patch; 400 when the document is malformed, 422 when it does not apply."""
    if not isinstance(ops, list):
        raise bad_request(f"json patch: expected an array of operations, found {type_name(ops)}")
    for i, op in enumerate(ops):
        if not isinstance(op, dict):
            raise bad_request(f"json patch operation #{i}: expected an object, found {type_name(op)}")
        name = op.get("op")
        if name not in _OPS:
            raise bad_request(f"json patch operation #{i}: expected op to be one of {', '.join(_OPS)}, found {name!r}")
        for key in _OPS[name]:
            if key not in op:
                raise bad_request(f"json patch operation #{i} ({name}): missing {key!r}")
            if key in ("path", "from") and not isinstance(op[key], str):
                raise bad_request(f"json patch operation #{i} ({name}): {key} must be a string, found {op[key]!r}")
    doc: Any = copy_json(target)
    for i, op in enumerate(ops):
        try:
            # One operation at a time (in place, on a private copy) to name the one that fails.
            doc = jsonpatch.JsonPatch([op]).apply(doc, in_place=True)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError, KeyError, IndexError,
                ValueError) as exc:  # fmt: skip
            # jsonpatch quotes the whole document in some messages: keep the reason only.
            reason = re.sub(r" in \{.*$", "", str(exc), flags=re.S) or type(exc).__name__
            raise ApiError(
                422, f"json patch operation #{i} ({op['op']} {op['path']!r}) does not apply: {reason}"
            ) from None
    return doc


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Apply a strategic merge patch to a built-in object; returns a new value."""
    if not isinstance(patch, dict):
        raise bad_request(f"strategic merge patch: expected an object, found {type_name(patch)}")
    return _smp_map(target if isinstance(target, dict) else {}, patch, "")


def _smp_map(target: dict[str, Any], patch: dict[str, Any], path: str) -> dict[str, Any] | None:
    directive = patch.get("$patch")
    if directive == "delete":
        return None
    body = {k: v for k, v in patch.items() if k != "$patch"}
    if directive == "replace":
        return {k: copy_json(v) for k, v in body.items() if not k.startswith("$")}
    if directive not in (None, "merge"):
        raise bad_request(f"strategic merge patch at {path or '/'}: unknown $patch directive {directive!r}")
    result = dict(target)
    retain = body.pop("$retainKeys", None)
    for key, value in body.items():
        if key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            current = result.get(field)
            if isinstance(current, list) and isinstance(value, list):
                result[field] = [v for v in current if not any(json_equal(v, d) for d in value)]
            continue
        child = f"{path}.{key}" if path else key
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            existing = result.get(key)
            merged = _smp_map(existing if isinstance(existing, dict) else {}, value, child)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _smp_list(result.get(key), value, key, child)
        else:
            result[key] = value
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _smp_list(current: Any, patch: list[Any], field: str, path: str) -> list[Any]:
    if path == "metadata.finalizers":
        # patchStrategy=merge on a list of strings: a set union that keeps the order.
        merged = list(current) if isinstance(current, list) else []
        merged.extend(v for v in patch if v not in merged)
        return merged
    key = MERGE_KEYS.get(field)
    if key is None or not all(isinstance(item, dict) for item in patch):
        return [copy_json(item) for item in patch]
    if any(item.get("$patch") == "replace" for item in patch):
        return [copy_json(item) for item in patch if item.get("$patch") != "replace"]
    result = [item for item in current if isinstance(item, dict)] if isinstance(current, list) else []
    for item in patch:
        if key not in item:
            raise bad_request(f"strategic merge patch at {path}: every element needs the merge key {key!r}")
        index = next((i for i, existing in enumerate(result) if json_equal(existing.get(key), item[key])), None)
        if item.get("$patch") == "delete":
            if index is not None:
                del result[index]
            continue
        if index is None:
            result.append(_smp_map({}, item, path) or {})
        else:
            result[index] = _smp_map(result[index], item, path) or {}
    return result
