"""What patches write, against the framework's schema (MKP504-MKP509).

A structural schema says which fields an object of the kind can hold (the API server
prunes the others), their types, which lists are atomic and how map lists are keyed.
These rules walk what a patch literally names — ``JSONPatch{...}`` paths and values,
``Object{...}`` fields — through the schema, so that lint shows what happens at run time:

* MKP504: a ``remove``, ``replace`` or ``test`` (or the ``from`` of ``move``/``copy``) of a
  path the schema does not declare: the field can never be there;
* MKP505: an ``add`` of a field the schema does not declare: the API server prunes it;
* MKP506: a value whose type is not the one the schema declares (the API server answers
  422, on every retry);
* MKP507: a label or annotation value that is not a string (400, on every retry), with or
  without a schema: ``metadata`` is always Kubernetes' ObjectMeta;
* MKP508: an ApplyConfiguration that sets an atomic list, map or struct (Kubernetes
  refuses the whole configuration); without a schema every list is atomic;
* MKP509: an ApplyConfiguration item of a map list that sets none of the list's keys.

Without ``spec.schema`` only ``metadata`` is known. Computed paths are checked up to
their literal prefix; values are judged by their static CEL type, never guessed.
"""

from __future__ import annotations

from collections.abc import Iterator

from mkpolicy.cel import types as t
from mkpolicy.cel.ast import Call, ListLit, Literal, MapLit, Node, StructLit
from mkpolicy.check.celpaths import PatchOp, json_patch_ops, pointer
from mkpolicy.check.checks.context import Compiled, PolicyContext
from mkpolicy.check.checks.managed_by import fields_hint
from mkpolicy.structural import Schema, is_absent

#: An object whose schema is unknown but for ``metadata`` (Kubernetes' ObjectMeta).
_UNTYPED = Schema({"type": "object", "x-kubernetes-preserve-unknown-fields": True}, root=True)

#: What a remove, replace or test of a field that can never be there does.
_NEVER_THERE = {
    "remove": "fails on every object (there is nothing to remove)",
    "replace": "fails, or adds a field the API server prunes",
    "test": "never holds: the whole patch is discarded (or fails), every time",
    "move": "fails on every object (there is nothing to move)",
    "copy": "fails on every object (there is nothing to copy)",
}

#: JSON kinds of the values a CEL type converts to (JSONPatch values, Object fields).
_JSON_KIND = {
    "bool": "boolean",
    "int": "integer",
    "uint": "integer",
    "double": "number",
    "string": "string",
    "bytes": "string",
    "timestamp": "string",
    "duration": "string",
    "list": "array",
    "map": "object",
    "message": "object",
}


def check_writes(ctx: PolicyContext) -> None:
    """MKP504-MKP509 over every creation, sync and integration patch."""
    root = ctx.schema if ctx.schema is not None else _UNTYPED
    for compiled in ctx.compiled:
        site = compiled.site
        if site.kind not in ("creation", "sync", "integration"):
            continue
        status_only = site.kind == "sync" and ctx.policy.spec.sync.subresource == "status"
        walker = _Walker(ctx, compiled, root)
        if site.patch_type == "JSONPatch":
            for op in json_patch_ops(compiled.ast):
                walker.json_patch(op, status_only)
        else:
            for node in compiled.ast.walk():
                if isinstance(node, StructLit) and node.type_name.lstrip(".") == "Object":
                    walker.apply_configuration(node, status_only)


class _Walker:
    """The checks of one compiled patch expression."""

    def __init__(self, ctx: PolicyContext, compiled: Compiled, root: Schema) -> None:
        self.ctx = ctx
        self.compiled = compiled
        self.root = root
        self.framework = ctx.policy.spec.framework
        self.where = compiled.site.where

    def report(self, rule_id: str, message: str, node_or_pos: Node | int) -> None:
        pos = node_or_pos if isinstance(node_or_pos, int) else node_or_pos.pos
        self.ctx.report(rule_id, f"{self.where}: {message}", self.compiled.site.locate(pos))

    def type_of(self, node: Node) -> t.Type:
        return self.ctx.types(self.compiled).type_of(node)

    # -- JSONPatch -------------------------------------------------------------------------
    def json_patch(self, op: PatchOp, status_only: bool) -> None:
        if op.op is None or op.path is None:
            return
        targets = [("path", op.path)]
        if op.op in ("move", "copy") and op.from_ is not None:
            targets.append(("from", op.from_))
        for role, template in targets:
            tokens = template.known_tokens()
            if not tokens or (status_only and tokens[0] != "status"):
                continue  # the root, or outside /status (MKP502 says so)
            reads = role == "from" or op.op in ("remove", "replace", "test")
            verb = (
                f"{op.op} from {template.render('{...}')}" if role == "from" else f"{op.op} {template.render('{...}')}"
            )
            found = self._walk_path(tokens)
            if isinstance(found, str):
                if reads:
                    consequence = _NEVER_THERE[op.op]
                    self.report(
                        "MKP504", f"{verb}: {found}; the field can never be there, so this {consequence}", template.pos
                    )
                else:
                    self.report(
                        "MKP505",
                        f"{verb}: {found}; the API server prunes it from the object, so this add has no effect",
                        template.pos,
                    )
                continue
            literal = template.literal is not None
            if role == "path" and op.op in ("add", "replace", "test") and op.value is not None and found and literal:
                self._value(op.value, found, tuple(tokens))

    def _walk_path(self, tokens: list[str]) -> Schema | str | None:
        """The schema at ``tokens`` (None where unknown), or why the path is not declared."""
        schema = self.root
        walked = ""
        for token in tokens:
            if not schema.known:
                return None
            if schema.type == "array":
                if not (token == "-" or token.lstrip("-").isdigit()):
                    return f"{walked or '/'} is a list in the schema; expected an index, found {token!r}"
                schema = schema.items()
            elif schema.type in ("object", None):
                child = schema.field(token)
                if is_absent(child):
                    return (
                        f"the schema of {self.framework} declares no field {token!r} under {walked or '/'}"
                        f"{fields_hint(schema)}"
                    )
                schema = child
            else:
                return f"{walked or '/'} is a {schema.type} in the schema, it has no field {token!r}"
            walked += pointer([token])
        return schema if schema.known else None

    # -- values ----------------------------------------------------------------------------
    def _value(self, node: Node, schema: Schema, tokens: tuple[str, ...]) -> None:
        """Check a written value against the schema at ``tokens``: map and list literals
        field by field, anything else by its static type (through ``dyn()``, which hides the
        type from the CEL checker but not from the API server)."""
        node = _undyn(node)
        if not schema.known:
            return
        if isinstance(node, MapLit) and schema.type == "object" and not schema.int_or_string:
            for entry in node.entries:
                key = entry.key
                if not (isinstance(key, Literal) and isinstance(key.value, str)):
                    continue
                child = schema.field(key.value)
                if is_absent(child):
                    shown = pointer(tokens)
                    self.report(
                        "MKP505",
                        f"{shown}: the schema of {self.framework} declares no field {key.value!r} there"
                        f"{fields_hint(schema)}; the API server prunes it from the object",
                        entry.pos,
                    )
                    continue
                self._value(entry.value, child, (*tokens, key.value))
            return
        if isinstance(node, ListLit) and schema.type == "array":
            for element in node.elements:
                self._value(element, schema.items(), (*tokens, "*"))
            return
        self._type(node, schema, tokens)

    def _type(self, node: Node, schema: Schema, tokens: tuple[str, ...]) -> None:
        actual = self.type_of(node)
        if actual.is_optional:
            actual = actual.elem
        found = _JSON_KIND.get(actual.kind)
        expected = schema.type
        if found is None or expected is None:
            return  # dyn, null, a type parameter: nothing is known
        if expected == found or (expected == "number" and found == "integer"):
            return
        if schema.int_or_string and found in ("integer", "string"):
            return
        shown = pointer(tokens)
        if _label_or_annotation(tokens):
            self.report(
                "MKP507",
                f"{shown}: {_article(tokens[1][:-1])} value must be a string; found {actual} (the API server "
                "answers 400 Bad Request, on every retry); convert it with string()",
                node,
            )
            return
        wanted = "integer or string" if schema.int_or_string else expected
        self.report(
            "MKP506",
            f"{shown}: the schema of {self.framework} says {wanted}; the value is {_article(str(actual))}, which the "
            "API server refuses (422 Unprocessable Entity), on every retry",
            node,
        )

    # -- ApplyConfiguration ------------------------------------------------------------------
    def apply_configuration(self, node: StructLit, status_only: bool) -> None:
        self._object(node, self.root, (), status_only)

    def _object(self, node: StructLit | MapLit, schema: Schema, tokens: tuple[str, ...], status_only: bool) -> None:
        for key, entry_pos, value in _entries(node):
            if status_only and not tokens and key != "status":
                continue  # MKP502 reports it
            path = (*tokens, key)
            child = schema.field(key)
            if is_absent(child):
                if isinstance(node, MapLit) and schema.known:
                    self.report(
                        "MKP504",
                        f"Object{{...}} sets {pointer(path)}, which the schema of {self.framework} does not "
                        f"declare{fields_hint(schema)}; Kubernetes refuses the whole configuration",
                        entry_pos,
                    )
                continue  # fields of Object.<path>{...} literals: MKP204 reports them
            self._field(value, child, path, status_only)

    def _field(self, value: Node, schema: Schema, tokens: tuple[str, ...], status_only: bool) -> None:
        value = _undyn(value)
        shown = pointer(tokens)
        kind = _JSON_KIND.get(self.type_of(value).kind)
        is_list = isinstance(value, ListLit) or kind == "array"
        is_map = isinstance(value, (StructLit, MapLit)) or kind == "object"
        if is_list and (not schema.known or schema.type == "array"):
            if schema.list_type == "atomic":
                why = (
                    "it is an atomic list" if schema.known else "the schema does not say how it merges (no spec.schema)"
                )
                self.report(
                    "MKP508",
                    f"Object{{...}} sets {shown}: {why}, and Kubernetes refuses an ApplyConfiguration that sets "
                    'an atomic list ("may not mutate atomic arrays"); use a JSONPatch to replace it'
                    + ("" if schema.known else ", or set spec.schema"),
                    value,
                )
                return
            if isinstance(value, ListLit):
                for element in value.elements:
                    if schema.list_type == "map" and isinstance(element, (StructLit, MapLit)):
                        self._map_list_item(element, schema, shown)
                    if isinstance(element, (StructLit, MapLit)):
                        self._object(element, schema.items(), (*tokens, "*"), status_only)
            return
        if is_map and schema.known and schema.atomic_map:
            self.report(
                "MKP508",
                f"Object{{...}} sets {shown}: it is an atomic map or struct (x-kubernetes-map-type: atomic), and "
                "Kubernetes refuses an ApplyConfiguration that sets one; use a JSONPatch to replace it",
                value,
            )
            return
        if isinstance(value, (StructLit, MapLit)):
            self._object(value, schema, tokens, status_only)
            return
        if schema.known and _label_or_annotation(tokens):
            self._type(value, schema, tokens)  # other scalar types: the type check (MKP204) covers Object{...}

    def _map_list_item(self, item: StructLit | MapLit, schema: Schema, shown: str) -> None:
        keys = schema.list_map_keys
        if not keys:
            return
        written = {key for key, _, _ in _entries(item)}
        if any(not isinstance(e.key, str) and not isinstance(e.key, Literal) for e in item.entries):
            return  # a computed key may be one of them
        props = (schema.items().node or {}).get("properties") or {}
        defaulted = {k for k in keys if isinstance(props.get(k), dict) and props[k].get("default") is not None}
        if not (written & set(keys)) and not defaulted:
            self.report(
                "MKP509",
                f"Object{{...}} sets an item of {shown} without any of its keys ({', '.join(keys)}); structured "
                'merge cannot tell which item it is and Kubernetes refuses the configuration ("associative list '
                'with keys has an element that omits all key fields")',
                item,
            )


def _entries(node: StructLit | MapLit) -> Iterator[tuple[str, int, Node]]:
    """The literal ``(key, position, value)`` entries of an Object or map literal."""
    for entry in node.entries:
        key = entry.key
        if isinstance(key, str):
            yield key, entry.pos, entry.value
        elif isinstance(key, Literal) and isinstance(key.value, str):
            yield key.value, entry.pos, entry.value


def _article(noun: str) -> str:
    return f"an {noun}" if noun[:1] in "aeiou" else f"a {noun}"


def _undyn(node: Node) -> Node:
    """The value inside ``dyn(...)`` (the checker's type of it is still known)."""
    while isinstance(node, Call) and node.function == "dyn" and node.target is None and len(node.args) == 1:
        node = node.args[0]
    return node


def _label_or_annotation(tokens: tuple[str, ...]) -> bool:
    return len(tokens) == 3 and tokens[0] == "metadata" and tokens[1] in ("labels", "annotations")
