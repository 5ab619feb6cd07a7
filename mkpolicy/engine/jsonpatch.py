"""JSON Patch (RFC 6902) with the behaviour Kubernetes' MutatingAdmissionPolicy has.

Kubernetes applies ``JSONPatch`` mutations with the json-patch library it vendors
(evanphx/json-patch v4). The ``jsonpatch`` package is used where it behaves the same
(pointer parsing, ``move``, ``copy``, validation of operations); the operations that
differ are subclassed. Differences from textbook RFC 6902, all on purpose:

* ``replace`` of a missing object member adds it (RFC: error).
* ``add``, ``remove`` and ``replace`` accept negative array indices counted from the end
  (``-1`` is the last element; for ``add``, ``-1`` inserts before the end... exactly
  as v4 does: index ``i < 0`` becomes ``len + 1 + i``); RFC: error.
* ``add``/``replace`` without ``value`` store ``null`` (v4 sends no value: null).
* A failing ``test`` (a value that differs) is not an error: the whole patch is discarded
  and the object is returned unchanged (Kubernetes' MAP plugin does this). A ``test``
  whose path cannot be walked (a missing or null parent, an array index out of range) is
  an error, as in v4. As Kubernetes feeds v4 (a value set in CEL, null included, is sent
  as JSON text): a ``test`` without ``value`` passes on an absent or null member only; a
  ``test`` with value ``null`` never passes.
* ``test`` compares JSON values: ``1`` equals ``1.0``, ``true`` does not equal ``1``.

Deliberate deviations from Kubernetes, where v4 misbehaves:

* A path that does not start with ``/`` is an error (v4 silently treats ``a/b`` as ``/b``).
* The root path ``""`` is an error for every operation (v4 errors for most, panics for some).

Application is copy-on-write: containers along each operation's path are copied, the
rest of the document is shared with the input, which is never modified. Well-formed
``add``, ``remove`` and ``replace`` operations (nearly all of them) are applied as
*steps*: a function of the parent container and the path parsed once per distinct path,
without building an operation object; ``test``, ``move`` and ``copy`` use the classes.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import jsonpatch
import jsonpointer

from mkpolicy.errors import PatchError
from mkpolicy.jsonvalues import copy_json, json_equal


class TestFailed(Exception):
    """A ``test`` operation did not hold: Kubernetes discards the whole patch."""


def _parent(op: jsonpatch.PatchOperation, doc: Any) -> tuple[Any, str]:
    """The container holding the operation's target, and the raw last token."""
    parts = op.pointer.parts
    cur = doc
    for part in parts[:-1]:
        if isinstance(cur, dict):
            if part not in cur:
                raise PatchError(f"missing path: {op.location!r} (no member {part!r})")
            cur = cur[part]
        elif isinstance(cur, list):
            if not part.isdigit() or (len(part) > 1 and part[0] == "0") or int(part) >= len(cur):
                raise PatchError(f"missing path: {op.location!r} (no array element {part!r})")
            cur = cur[int(part)]
        else:
            raise PatchError(f"missing path: {op.location!r} ({part!r} is inside a scalar)")
    return cur, parts[-1]


def _index(token: str, location: str, allow_negative: bool) -> int:
    try:
        value = int(token)
    except ValueError:
        raise PatchError(f"invalid array index {token!r} in {location!r}") from None
    if value < 0 and not allow_negative:
        raise PatchError(f"invalid array index {token!r} in {location!r}")
    return value


def _add_at(container: Any, token: str, value: Any, location: str) -> None:
    if isinstance(container, dict):
        container[token] = value
    elif isinstance(container, list):
        if token == "-":
            container.append(value)
            return
        i = _index(token, location, allow_negative=True)
        size = len(container) + 1
        if i >= size or i < -size:
            raise PatchError(f"array index {i} out of range for add at {location!r} (length {size - 1})")
        container.insert(i + size if i < 0 else i, value)
    else:
        raise PatchError(f"cannot add {location!r}: the parent is not an object or array")


def _remove_at(container: Any, token: str, value: Any, location: str) -> None:
    if isinstance(container, dict):
        if token not in container:
            raise PatchError(f"cannot remove {location!r}: the member does not exist")
        del container[token]
    elif isinstance(container, list):
        i = _index(token, location, allow_negative=True)
        if i >= len(container) or i < -len(container):
            raise PatchError(f"array index {i} out of range for remove at {location!r}")
        del container[i]
    else:
        raise PatchError(f"cannot remove {location!r}: the parent is not an object or array")


def _replace_at(container: Any, token: str, value: Any, location: str) -> None:
    if isinstance(container, dict):
        container[token] = value  # Kubernetes: a missing member is added
    elif isinstance(container, list):
        # json-patch v4.13.0 partialArray.get/set (Kubernetes 1.36 vendors it): negative counts from the end.
        i = _index(token, location, allow_negative=True)
        if i >= len(container) or i < -len(container):
            raise PatchError(f"array index {i} out of range for replace at {location!r}")
        container[i] = value
    else:
        raise PatchError(f"cannot replace {location!r}: the parent is not an object or array")


#: ``at(container, token, value, location)`` applies an add, remove or replace to the
#: parent ``container`` of its target, whose member is ``token`` (``value`` is ignored
#: by remove; ``location`` is the path, for error messages).
At = Callable[[Any, str, Any, str], None]


class _Cheap(jsonpatch.PatchOperation):
    """Construction without re-rendering the pointer (the library renders ``path`` from
    the parsed pointer on every construction, a real cost when patches run per request)."""

    operation: dict[str, Any]
    pointer: jsonpointer.JsonPointer
    location: str
    pointer_cls = jsonpointer.JsonPointer
    at: At

    def __init__(self, operation: dict[str, Any]) -> None:
        self.location = operation["path"]
        self.pointer = _pointer(self.location)
        self.operation = operation

    def apply(self, obj: Any) -> Any:
        container, token = _parent(self, obj)
        type(self).at(container, token, self.operation.get("value"), self.location)
        return obj


class _Add(_Cheap, jsonpatch.AddOperation):
    at = staticmethod(_add_at)


class _Remove(_Cheap, jsonpatch.RemoveOperation):
    at = staticmethod(_remove_at)


class _Replace(_Cheap, jsonpatch.ReplaceOperation):
    at = staticmethod(_replace_at)


class _Test(_Cheap, jsonpatch.TestOperation):
    # Follows evanphx/json-patch v4.13.0 (the gopkg.in/evanphx/json-patch.v4 Kubernetes 1.36's
    # MAP plugin vendors), patch.go: Patch.test, findObject, partialDoc.get and
    # partialArray.get. Only a value that differs is ErrTestFailed (the patch is then
    # discarded); a path that cannot be walked is an error.
    def apply(self, obj: Any) -> Any:
        parts = self.pointer.parts
        cur = obj
        for part in parts[:-1]:
            # findObject: a missing or null parent, or a scalar on the way, is ErrMissing.
            cur = _test_get(cur, part, self.location) if isinstance(cur, (dict, list)) else None
            if cur is None:
                raise PatchError(f"test operation does not apply: is missing path: {self.location}")
        if not isinstance(cur, (dict, list)):
            raise PatchError(f"test operation does not apply: is missing path: {self.location}")
        actual = _test_get(cur, parts[-1], self.location)
        # Kubernetes sends a JSONPatch's value as JSON text when the CEL object sets it, null
        # included (k8s.io/apiserver pkg/admission/plugin/policy/mutating/patch/json_patch.go),
        # and v4's Patch.test passes on an absent or null member only for an operation with
        # no value at all: a test without value passes exactly there, a null value never.
        if "value" not in self.operation:
            if actual is None:
                return obj
            raise TestFailed(self.location)
        expected = self.operation["value"]
        if actual is None or expected is None or not json_equal(actual, expected):
            raise TestFailed(self.location)
        return obj


def _test_get(container: Any, token: str, location: str) -> Any:
    """``container.get(token)`` as json-patch v4 reads it: a missing member is None; an array
    index is what Go's ``strconv.Atoi`` reads (a sign, leading zeros), negative counts from
    the end, and one out of range is an error."""
    if isinstance(container, dict):
        return container.get(token)
    if not _ATOI.fullmatch(token):
        raise PatchError(f'error in test for path: {location!r}: strconv.Atoi: parsing "{token}": invalid syntax')
    index = int(token)
    if index < -len(container) or index >= len(container):
        raise PatchError(f"error in test for path: {location!r}: Unable to access invalid index: {index}")
    return container[index]


_ATOI = re.compile(r"[+-]?[0-9]+")


#: The operation classes, as ``jsonpatch.JsonPatch.operations`` lists them.
OPERATIONS: Mapping[str, type[jsonpatch.PatchOperation]] = MappingProxyType(
    {
        "add": _Add,
        "remove": _Remove,
        "replace": _Replace,
        "test": _Test,
        "move": jsonpatch.MoveOperation,
        "copy": jsonpatch.CopyOperation,
    }
)


def _operation(index: int, op: Any) -> jsonpatch.PatchOperation:
    # Fast path for the common, well-formed add/remove/replace/test.
    if type(op) is dict:
        kind = op.get("op")
        cheap = _CHEAP.get(kind) if type(kind) is str else None
        path = op.get("path")
        if cheap is not None and type(path) is str and path[:1] == "/":
            try:
                return cheap(op)
            except jsonpointer.JsonPointerException as exc:
                raise PatchError(f"operation {index + 1} ({op['op']}): {exc}") from None
    if not isinstance(op, Mapping):
        raise PatchError(f"operation {index + 1}: expected an object with op and path, found {op!r}")
    kind = op.get("op")
    cls = OPERATIONS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise PatchError(f"operation {index + 1}: unknown op {kind!r}; expected one of {', '.join(OPERATIONS)}")
    for key in ("path", "from") if kind in ("move", "copy") else ("path",):
        value = op.get(key)
        if not isinstance(value, str):
            raise PatchError(f"operation {index + 1} ({kind}): {key!r} must be a string, found {value!r}")
        if not value.startswith("/"):
            suffix = "; the document root cannot be patched" if value == "" else ""
            raise PatchError(
                f"operation {index + 1} ({kind} {value!r}): expected a JSON pointer starting with '/'{suffix}"
            )
    try:
        if issubclass(cls, _Cheap):
            return cls(op if isinstance(op, dict) else dict(op))
        parsed = dict(op)
        parsed["path"] = _pointer(op["path"])
        parsed["from"] = _pointer(op["from"])
        return cls(parsed)
    except (jsonpatch.InvalidJsonPatch, jsonpointer.JsonPointerException) as exc:
        raise PatchError(f"operation {index + 1} ({kind}): {exc}") from None


_CHEAP: dict[str, type[_Cheap]] = {"add": _Add, "remove": _Remove, "replace": _Replace, "test": _Test}


@functools.lru_cache(maxsize=4096)
def _pointer(path: str) -> jsonpointer.JsonPointer:
    # Policies build the same few paths over and over; parsing them once matters.
    return jsonpointer.JsonPointer(path)


def _writable_parent(parts: list[str], location: str, doc: Any, fresh: set[int]) -> tuple[Any, str]:
    """:func:`_parent` for an operation that writes: the containers along the path
    become private copies on the way (copy-on-write; ``fresh`` as for :func:`_thaw`)."""
    cur = doc
    for k in range(len(parts) - 1):
        part = parts[k]
        if type(cur) is dict or isinstance(cur, dict):
            if part not in cur:
                raise PatchError(f"missing path: {location!r} (no member {part!r})")
            key: Any = part
        elif isinstance(cur, list):
            if not part.isdigit() or (len(part) > 1 and part[0] == "0") or int(part) >= len(cur):
                raise PatchError(f"missing path: {location!r} (no array element {part!r})")
            key = int(part)
        else:
            raise PatchError(f"missing path: {location!r} ({part!r} is inside a scalar)")
        child = cur[key]
        if id(child) not in fresh:
            if type(child) is dict or isinstance(child, dict):
                child = dict(child)
            elif isinstance(child, list):
                child = list(child)
            else:
                cur = child
                continue
            fresh.add(id(child))
            cur[key] = child
        cur = child
    return cur, parts[-1]


def _thaw(doc: Any, parents: list[str], fresh: set[int]) -> None:
    """Make the containers along ``parents`` private copies so they can be modified.

    ``fresh`` holds the ids of containers already copied for this patch.
    """
    cur = doc
    for token in parents:
        if isinstance(cur, dict) and token in cur:
            key: Any = token
        elif isinstance(cur, list) and token.isdigit() and int(token) < len(cur):
            key = int(token)
        else:
            return
        child = cur[key]
        if not isinstance(child, (dict, list)):
            return
        if id(child) not in fresh:
            child = dict(child) if isinstance(child, dict) else list(child)
            fresh.add(id(child))
            cur[key] = child
        cur = child


#: One checked add, remove or replace: (at, parsed path, path, op, value).
Step = tuple[At, list[str], str, str, Any]

#: The operations applied by a function of their parent container, without an object
#: (a plain dict, read on every patch: do not modify it).
WRITERS: dict[str, At] = {"add": _add_at, "remove": _remove_at, "replace": _replace_at}


def pointer_parts(path: str) -> list[str]:
    """The decoded tokens of the JSON pointer ``path`` (parsed once per distinct path;
    raises ``jsonpointer.JsonPointerException``). The list is shared: do not modify it."""
    parts: list[str] = _pointer(path).parts
    return parts


def apply_steps(doc: dict[str, Any], steps: list[Step]) -> dict[str, Any]:
    """Apply checked add/remove/replace steps to ``doc`` (not modified), copy-on-write.

    Raises :class:`PatchError` naming the failing operation, as :func:`apply_json_patch`.
    """
    result = dict(doc)
    fresh = {id(result)}
    for i, (at, parts, location, kind, value) in enumerate(steps, 1):
        try:
            if len(parts) == 1:
                at(result, parts[0], value, location)  # a member of the root (a fresh copy)
            else:
                container, token = _writable_parent(parts, location, result, fresh)
                at(container, token, value, location)
        except PatchError as exc:
            raise PatchError(f"operation {i} ({kind} {location}): {exc.message}") from None
    return result


def apply_json_patch(doc: dict[str, Any], operations: list[dict[str, Any]]) -> dict[str, Any]:
    """Apply ``operations`` to ``doc`` with Kubernetes' semantics; ``doc`` is not modified.

    Returns the patched document, or ``doc`` itself when a ``test`` operation fails.
    Raises :class:`PatchError` naming the failing operation.
    """
    # Every operation is checked before any is applied. Well-formed add, remove and
    # replace operations (nearly all of them) need no operation object: their parsed
    # path and the function applying them are enough.
    steps: list[Step] = []
    ops: list[jsonpatch.PatchOperation] = []  # the others, when there are any: all as objects
    for i, op in enumerate(operations):
        if type(op) is dict:
            kind = op.get("op")
            path = op.get("path")
            if type(kind) is str and type(path) is str and path[:1] == "/":
                at = WRITERS.get(kind)
                if at is not None:
                    try:
                        parts = pointer_parts(path)
                    except jsonpointer.JsonPointerException as exc:
                        raise PatchError(f"operation {i + 1} ({kind}): {exc}") from None
                    steps.append((at, parts, path, kind, op.get("value")))
                    continue
        ops.append(_operation(i, op))
    if not ops:
        return apply_steps(doc, steps)
    if steps:
        ops = [_operation(i, op) for i, op in enumerate(operations)]
    return _apply_operations(doc, ops)


def _apply_operations(doc: dict[str, Any], ops: list[jsonpatch.PatchOperation]) -> dict[str, Any]:
    result: Any = dict(doc)
    fresh: set[int] = {id(result)}
    for i, op in enumerate(ops):
        try:
            if isinstance(op, _Test):
                op.apply(result)  # reads only
                continue
            if isinstance(op, _Cheap):
                # Copy-on-write: the containers this operation modifies become private copies.
                container, token = _writable_parent(op.pointer.parts, op.location, result, fresh)
                type(op).at(container, token, op.operation.get("value"), op.location)
                continue
            # move and copy: the library's operations.
            _thaw(result, op.pointer.parts[:-1], fresh)
            if op.operation["op"] == "move":
                _thaw(result, op.operation["from"].parts[:-1], fresh)
            result = op.apply(result)
            if op.operation["op"] == "move":
                # The moved value came from the input document: give the result its own.
                container, token = _parent(op, result)
                key = token if isinstance(container, dict) else (len(container) - 1 if token == "-" else int(token))
                container[key] = copy_json(container[key])
        except TestFailed:
            return doc
        except PatchError as exc:
            raise PatchError(f"operation {i + 1} ({op.operation['op']} {op.location}): {exc.message}") from None
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
            raise PatchError(f"operation {i + 1} ({op.operation['op']} {op.location}): {exc}") from None
    return result  # type: ignore[no-any-return]
