"""ApplyConfiguration: merge an ``Object{...}`` into an object as server-side apply does.

Kubernetes' MutatingAdmissionPolicy merges the apply configuration with
structured-merge-diff, guided by the kind's schema:

* objects and maps merge key by key; keys the configuration does not name are kept;
* lists with ``x-kubernetes-list-type: map`` merge item by item, matched on their
  ``x-kubernetes-list-map-keys``; ``set`` lists gain the values they lack; the order of
  the result, and live items that repeat a key, follow structured-merge-diff (see
  :func:`_merge_list`);
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
        if list_type == "atomic":
            problems.append(f"{path or '.'} is an atomic list and may not be set")
            return live
        return _merge_list(live if isinstance(live, list) else [], patch, schema, path, problems)
    return patch


# Associative lists (x-kubernetes-list-type map or set) merge as structured-merge-diff v6
# merges them: typed/merge.go (mergingWalker.visitListItems, indexListPathElements) and
# typed/helpers.go (keyedAssociativeListItemToPathElement, setItemToPathElement).

_DUPLICATE = object()


def _merge_list(live: list[Any], patch: list[Any], schema: MergeSchema, path: str, problems: list[str]) -> list[Any]:
    """Merge the items of an associative list; the result's order interleaves both lists as
    structured-merge-diff's does: live items keep their place, applied items that are also
    live follow the applied order, new ones come after the live item before them. Live items
    that repeat a key are collapsed into the applied item, at the first one's place."""
    items = schema.items()
    key_of = _map_key(schema) if schema.list_type == "map" else _set_key
    rhs_keys = [key_of(item, f"{path}: element {i}") for i, item in enumerate(patch)]
    lhs_keys = [key_of(item, f"{path}: element {i} of the object") for i, item in enumerate(live)]
    rhs: dict[Any, Any] = {}
    for i, (key, item) in enumerate(zip(rhs_keys, patch, strict=True)):
        if key in rhs:
            raise PatchError(f"{path}: element {i}: duplicate entries for key {_show(key)}")
        rhs[key] = item
    lhs: dict[Any, Any] = {}
    for key, item in zip(lhs_keys, live, strict=True):
        lhs[key] = _DUPLICATE if key in lhs else item  # repeated keys are not merged
    shared = [key for key in rhs_keys if key in lhs]
    next_shared = shared.pop(0) if shared else None

    def merged(key: Any, live_item: Any, index: int) -> Any:
        before = None if live_item is _DUPLICATE else live_item
        return _merge(before, rhs[key], items, f"{path}[{index}]", problems)

    out: list[Any] = []
    merged_rhs: set[Any] = set()
    li, ri = 0, 0
    while li < len(lhs_keys) or ri < len(rhs_keys):
        if li < len(lhs_keys) and ri < len(rhs_keys):
            key = lhs_keys[li]
            if key == rhs_keys[ri]:
                merged_rhs.add(key)
                out.append(merged(key, lhs[key], ri))
                li += 1
                ri += 1
                next_shared = shared.pop(0) if shared else None
                continue
            if key in rhs and next_shared is not None and next_shared != key:
                li += 1  # a shared item, but not the one this round wants
                continue
        if li < len(lhs_keys):
            key = lhs_keys[li]
            if key not in rhs:
                out.append(live[li])
                li += 1
                continue
            if key in merged_rhs:
                li += 1  # merged with the applied item already
        if ri < len(rhs_keys):
            key = rhs_keys[ri]
            merged_rhs.add(key)
            out.append(merged(key, lhs.get(key), ri))
            ri += 1
            if next_shared is not None and next_shared == key:
                next_shared = shared.pop(0) if shared else None
    return out


def _map_key(schema: MergeSchema) -> Any:
    keys = schema.list_map_keys
    item_schema = schema.items().schema.node or {}
    props = item_schema.get("properties")
    defaults: dict[str, Any] = {
        name: node["default"]
        for name, node in (props.items() if isinstance(props, dict) else ())
        if isinstance(node, dict) and node.get("default") is not None
    }

    def key_of(item: Any, where: str) -> tuple[Any, ...]:
        if item is None:
            raise PatchError(f"{where}: associative list with keys may not have a null element")
        if not isinstance(item, dict):
            raise PatchError(f"{where}: associative list with keys may not have non-map elements")
        fields = []
        for name in keys:
            if name in item:
                fields.append((name, _hashable(item[name])))
            elif name in defaults:
                fields.append((name, _hashable(defaults[name])))
            # else: the key is left out, and the item is a different entry than one with it
        if not fields:
            raise PatchError(
                f"{where}: associative list with keys has an element that omits all key fields {keys} "
                "(and doesn't have default values for any key fields)"
            )
        return ("map", *sorted(fields))

    return key_of


def _set_key(item: Any, where: str) -> tuple[Any, ...]:
    if isinstance(item, dict):
        raise PatchError(f"{where}: associative list without keys has an element that's a map type")
    if isinstance(item, list):
        raise PatchError(f"{where}: not supported: associative list with lists as elements")
    if item is None:
        raise PatchError(f"{where}: associative list without keys has an element that's an explicit null")
    return ("set", _hashable(item))


def _show(key: tuple[Any, ...]) -> str:
    if key[0] == "set":
        return repr(key[1][1])
    return "{" + ", ".join(f"{name}={value[1]!r}" for name, value in key[1:]) + "}"


def _hashable(value: Any) -> Any:
    # Typed, so that true and 1 (equal in Python) stay different keys, as in JSON.
    if isinstance(value, dict):
        return ("object", tuple(sorted((k, _hashable(v)) for k, v in value.items())))
    if isinstance(value, list):
        return ("array", tuple(_hashable(v) for v in value))
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        return ("number", value)
    return (type(value).__name__, value)
