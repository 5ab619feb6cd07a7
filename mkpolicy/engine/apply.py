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


def apply_configuration(obj: dict[str, Any], patch: dict[str, Any], schema: Schema | None) -> dict[str, Any]:
    """Merge ``patch`` into ``obj`` (neither is modified) and return the result.

    Raises :class:`PatchError` listing every atomic value the patch sets and every
    field the schema does not declare, as Kubernetes rejects such configurations.
    """
    problems: list[str] = []
    merged = _merge(obj, patch, schema if schema is not None else Schema.deduced(), "", problems)
    if problems:
        raise PatchError(
            "invalid ApplyConfiguration: "
            + "; ".join(problems)
            + " (only granular maps and lists with x-kubernetes-list-type map or set merge;"
            " use a JSONPatch to replace an atomic value)"
        )
    assert isinstance(merged, dict)
    return merged


def _merge(live: Any, patch: Any, schema: Schema, path: str, problems: list[str]) -> Any:
    """Merge one value, checking the patch against the schema on the way."""
    if isinstance(patch, dict):
        if schema.atomic_map:
            problems.append(f"{path or '.'} is an atomic map or struct and may not be set")
            return live
        out = dict(live) if isinstance(live, dict) else {}
        for key, value in patch.items():
            child = schema.field(key)
            if schema.known and is_absent(child):
                problems.append(f"{path}.{key}: field not declared in schema")
                continue
            if value is None:
                out.pop(key, None)
                continue
            out[key] = _merge(out.get(key), value, child, f"{path}.{key}", problems)
        return out
    if isinstance(patch, list):
        list_type = schema.list_type
        if list_type == "map":
            return _merge_map_list(live if isinstance(live, list) else [], patch, schema, path, problems)
        if list_type == "set":
            out_set = list(live) if isinstance(live, list) else []
            for value in patch:
                if value not in out_set:
                    out_set.append(value)
            return out_set
        problems.append(f"{path or '.'} is an atomic list and may not be set")
        return live
    return patch


def _merge_map_list(live: list[Any], patch: list[Any], schema: Schema, path: str, problems: list[str]) -> list[Any]:
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
            out[index[key]] = _merge(out[index[key]], item, items, f"{path}[{i}]", problems)
        else:
            out.append(_merge(None, item, items, f"{path}[{i}]", problems))
    return out


def _hashable(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value
