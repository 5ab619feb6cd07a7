"""ApplyConfiguration: merge an ``Object{...}`` into an object as server-side apply does.

Kubernetes' MutatingAdmissionPolicy merges the apply configuration with
structured-merge-diff, guided by the kind's schema:

* objects and maps merge key by key; keys the configuration does not name are kept;
* lists with ``x-kubernetes-list-type: map`` merge item by item, matched on their
  ``x-kubernetes-list-map-keys`` (existing items keep their place, new ones are appended);
  ``set`` lists gain the values they lack;
* atomic lists (the default for lists, and every list where the schema is unknown),
  atomic maps and atomic structs (``x-kubernetes-map-type: atomic``) may *not* be set:
  Kubernetes rejects the whole configuration, because replacing them wholesale would
  silently drop values the author did not mention.

A ``null`` value in the configuration removes the field (documented deviation: the
MAP plugin's behaviour for nulls is undocumented). The input object is never modified:
containers along the merged paths are copied, the rest is shared.
"""

from __future__ import annotations

from typing import Any

from mkpolicy.errors import PatchError
from mkpolicy.structural import Schema, is_absent


def check_configuration(patch: Any, schema: Schema, path: str = "") -> list[str]:
    """Problems that make Kubernetes reject ``patch``: atomic values set, undeclared fields."""
    problems: list[str] = []
    if isinstance(patch, dict):
        if schema.atomic_map:
            return [f"{path or '.'} is an atomic map or struct and may not be set"]
        for key, value in patch.items():
            child = schema.field(key)
            if is_absent(child) and schema.known:
                problems.append(f"{path}.{key}: field not declared in schema")
                continue
            problems.extend(check_configuration(value, child, f"{path}.{key}"))
    elif isinstance(patch, list):
        if schema.list_type == "atomic":
            return [f"{path or '.'} is an atomic list and may not be set"]
        items = schema.items()
        for i, value in enumerate(patch):
            problems.extend(check_configuration(value, items, f"{path}[{i}]"))
    return problems


def apply_configuration(obj: dict[str, Any], patch: dict[str, Any], schema: Schema | None) -> dict[str, Any]:
    """Merge ``patch`` into ``obj`` (neither is modified) and return the result."""
    schema = schema if schema is not None else Schema.deduced()
    problems = check_configuration(patch, schema)
    if problems:
        raise PatchError(
            "invalid ApplyConfiguration: "
            + "; ".join(problems)
            + " (only granular maps and lists with x-kubernetes-list-type map or set merge;"
            " use a JSONPatch to replace an atomic value)"
        )
    merged = _merge(obj, patch, schema, "")
    assert isinstance(merged, dict)
    return merged


def _merge(live: Any, patch: Any, schema: Schema, path: str) -> Any:
    if isinstance(patch, dict) and isinstance(live, dict):
        out = dict(live)
        for key, value in patch.items():
            if value is None:
                out.pop(key, None)
                continue
            out[key] = _merge(live.get(key), value, schema.field(key), f"{path}.{key}")
        return out
    if isinstance(patch, dict):
        return {k: _merge(None, v, schema.field(k), f"{path}.{k}") for k, v in patch.items() if v is not None}
    if isinstance(patch, list) and schema.list_type == "map":
        return _merge_map_list(live if isinstance(live, list) else [], patch, schema, path)
    if isinstance(patch, list) and schema.list_type == "set":
        out_set = list(live) if isinstance(live, list) else []
        for value in patch:
            if value not in out_set:
                out_set.append(value)
        return out_set
    return patch


def _merge_map_list(live: list[Any], patch: list[Any], schema: Schema, path: str) -> list[Any]:
    keys = schema.list_map_keys
    items = schema.items()

    def key_of(item: Any, where: str) -> tuple[Any, ...]:
        if not isinstance(item, dict):
            raise PatchError(f"{where}: expected an object in a map list keyed by {keys}; found {item!r}")
        return tuple(_hashable(item.get(k)) for k in keys)

    out = list(live)
    index = {}
    for i, item in enumerate(live):
        if isinstance(item, dict):
            index[key_of(item, f"{path}[{i}]")] = i
    seen: set[tuple[Any, ...]] = set()
    for i, item in enumerate(patch):
        key = key_of(item, f"{path}[{i}]")
        if key in seen:
            raise PatchError(f"{path}[{i}]: duplicate entry for key {dict(zip(keys, key, strict=True))}")
        seen.add(key)
        if key in index:
            out[index[key]] = _merge(out[index[key]], item, items, f"{path}[{i}]")
        else:
            out.append(_merge(None, item, items, f"{path}[{i}]"))
    return out


def _hashable(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value
