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


class MergeSchema:
    """A :class:`Schema` node as the merge reads it, each answer computed once.

    Navigating a structural schema builds a new node per step; an adapter keeps one
    ``MergeSchema`` for its kind, so every merge after the first finds the children and
    their list types ready.
    """

    __slots__ = ("_fields", "_items", "absent", "atomic_map", "known", "list_map_keys", "list_type", "schema")

    def __init__(self, schema: Schema, absent: bool = False) -> None:
        self.schema = schema
        #: A field the parent does not declare.
        self.absent = absent
        self.known = schema.known
        self.atomic_map = schema.atomic_map
        self.list_type = schema.list_type
        self.list_map_keys = schema.list_map_keys
        self._fields: dict[str, MergeSchema] = {}
        self._items: MergeSchema | None = None

    def field(self, name: str) -> MergeSchema:
        """The schema of field ``name``."""
        found = self._fields.get(name)
        if found is None:
            child = self.schema.field(name)
            found = self._fields[name] = MergeSchema(child, is_absent(child))
        return found

    def items(self) -> MergeSchema:
        """The schema of a list's elements."""
        if self._items is None:
            self._items = MergeSchema(self.schema.items())
        return self._items


def merge_schema(schema: Schema | None) -> MergeSchema:
    """The :class:`MergeSchema` of ``schema`` (unknown territory when None)."""
    return MergeSchema(schema if schema is not None else Schema.deduced())


def apply_configuration(
    obj: dict[str, Any], patch: dict[str, Any], schema: Schema | MergeSchema | None
) -> dict[str, Any]:
    """Merge ``patch`` into ``obj`` (neither is modified) and return the result.

    Raises :class:`PatchError` listing every atomic value the patch sets and every
    field the schema does not declare, as Kubernetes rejects such configurations.
    """
    problems: list[str] = []
    if not isinstance(schema, MergeSchema):
        schema = merge_schema(schema)
    merged = _merge(obj, patch, schema, "", problems)
    if problems:
        raise PatchError(
            "invalid ApplyConfiguration: "
            + "; ".join(problems)
            + " (only granular maps and lists with x-kubernetes-list-type map or set merge;"
            " use a JSONPatch to replace an atomic value)"
        )
    assert isinstance(merged, dict)
    return merged


def _merge(live: Any, patch: Any, schema: MergeSchema, path: str, problems: list[str]) -> Any:
    """Merge one value, checking the patch against the schema on the way."""
    if type(patch) is dict or isinstance(patch, dict):
        if schema.atomic_map:
            problems.append(f"{path or '.'} is an atomic map or struct and may not be set")
            return live
        out = dict(live) if isinstance(live, dict) else {}
        known = schema.known
        for key, value in patch.items():
            child = schema.field(key)
            if known and child.absent:
                problems.append(f"{path}.{key}: field not declared in schema")
                continue
            if value is None:
                out.pop(key, None)
                continue
            tv = type(value)
            if tv is str or tv is int or tv is bool or tv is float:
                out[key] = value  # a scalar replaces
            else:
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


def _merge_map_list(
    live: list[Any], patch: list[Any], schema: MergeSchema, path: str, problems: list[str]
) -> list[Any]:
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
