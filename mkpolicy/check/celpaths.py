"""What a CEL expression reads and writes, from its syntax tree.

Shared by the lint rules (literal paths, variable usage) and ``mkpolicy explain``:

* :func:`accesses`: the field-access chains rooted at the policy's variables
  (``object.spec.timeouts``, ``variables.sa``, ``workerObject.status.?phase``...);
* :func:`json_patch_ops`: every ``JSONPatch{op, path, from, value}`` literal, with its
  path as a template of literal text and computed parts;
* :func:`object_writes`: the fields an ``Object{...}`` (ApplyConfiguration) literal sets.

Everything here is static and conservative: computed keys and paths are kept as
"computed", never guessed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from mkpolicy.cel.ast import Call, Comprehension, Ident, Literal, MapLit, Node, Select, StructLit
from mkpolicy.engine.expressions import POLICY_VARIABLES


def pointer(tokens: Iterable[str]) -> str:
    """``tokens`` as a JSON pointer (``~`` written ``~0``, ``/`` written ``~1``)."""
    return "".join("/" + token.replace("~", "~0").replace("/", "~1") for token in tokens)


#: One step of a field path: a field name or map key, a list index, or None when computed.
Segment = str | int | None

_INDEX = frozenset({"_[_]", "_[?_]"})


@dataclass(frozen=True)
class Access:
    """A chain of field selections and indexes starting at a variable.

    ``positions`` holds the offset of the root and of each step's token (field name or
    index); ``test`` is True for ``has(...)`` (presence only).
    """

    root: str
    path: tuple[Segment, ...]
    positions: tuple[int, ...]
    test: bool = False

    @property
    def pos(self) -> int:
        """The offset of the chain's last token."""
        return self.positions[-1]

    def render(self) -> str:
        """``object.spec.timeouts``, ``object.metadata.labels["a/b"]``, ``x.items[*]``."""
        out = self.root
        for seg in self.path:
            if seg is None:
                out += "[*]"
            elif isinstance(seg, int):
                out += f"[{seg}]"
            elif seg.isidentifier():
                out += f".{seg}"
            else:
                out += f'["{seg}"]'
        return out


@dataclass
class _Chain:
    root: str
    path: list[Segment]
    positions: list[int]
    computed: list[Node]


def _chain(node: Node, scope: frozenset[str]) -> _Chain | None:
    """The access chain ``node`` is, or None."""
    if isinstance(node, Ident):
        return None if node.name in scope else _Chain(node.name, [], [node.pos], [])
    if isinstance(node, Select):
        base = _chain(node.operand, scope)
        if base is None:
            return None
        return _Chain(base.root, [*base.path, node.field], [*base.positions, node.pos], base.computed)
    if isinstance(node, Call) and node.function in _INDEX and node.target is None and len(node.args) == 2:
        base = _chain(node.args[0], scope)
        if base is None:
            return None
        index = node.args[1]
        if isinstance(index, Literal) and type(index.value) in (str, int):
            return _Chain(base.root, [*base.path, index.value], [*base.positions, index.pos], base.computed)
        return _Chain(base.root, [*base.path, None], [*base.positions, index.pos], [*base.computed, index])
    return None


def accesses(node: Node, variables: frozenset[str] = POLICY_VARIABLES) -> list[Access]:
    """The maximal access chains rooted at ``variables`` in ``node``, in source order.

    Comprehension variables, function namespaces (``jsonpatch.escapeKey``) and type
    names are not variables and never start a chain.
    """
    out: list[Access] = []
    _visit(node, frozenset(), out)
    out = [a for a in out if a.root in variables]
    out.sort(key=lambda a: a.positions[0])
    return out


def _visit(node: Node, scope: frozenset[str], out: list[Access]) -> None:
    chain = _chain(node, scope)
    if chain is not None:
        test = isinstance(node, Select) and node.test_only
        out.append(Access(chain.root, tuple(chain.path), tuple(chain.positions), test))
        for index in chain.computed:
            _visit(index, scope, out)
        return
    if isinstance(node, Comprehension):
        _visit(node.iter_range, scope, out)
        inner = scope | {node.var} | ({node.var2} if node.var2 else set())
        for arg in node.args:
            _visit(arg, inner, out)
        return
    for child in node.children():
        _visit(child, scope, out)


# -- JSONPatch literals ------------------------------------------------------------------


@dataclass(frozen=True)
class PathTemplate:
    """A JSON pointer built from literal text and computed parts (``"/a/" + k``)."""

    parts: tuple[str | Node, ...]
    pos: int

    @property
    def literal(self) -> str | None:
        """The whole pointer when every part is literal, else None."""
        if all(isinstance(p, str) for p in self.parts):
            return "".join(p for p in self.parts if isinstance(p, str))
        return None

    @property
    def prefix(self) -> str:
        """The literal text before the first computed part."""
        out = ""
        for part in self.parts:
            if not isinstance(part, str):
                break
            out += part
        return out

    def known_tokens(self) -> list[str]:
        """The decoded pointer tokens that the literal prefix fully determines."""
        literal = self.literal
        text = literal if literal is not None else self.prefix
        if not text.startswith("/"):
            return []
        tokens = text[1:].split("/")
        if literal is None:
            tokens = tokens[:-1]  # the last piece continues in a computed part
        return [t.replace("~1", "/").replace("~0", "~") for t in tokens]

    def render(self, computed: str = "*") -> str:
        """The pointer with each computed part shown as ``computed``."""
        return "".join(p if isinstance(p, str) else computed for p in self.parts)


def path_template(node: Node) -> PathTemplate:
    """The template of a path expression: string literals joined by ``+``."""
    return PathTemplate(tuple(_parts(node)), node.pos)


def _parts(node: Node) -> list[str | Node]:
    if isinstance(node, Literal) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, Call) and node.function == "_+_" and node.target is None and len(node.args) == 2:
        parts = _parts(node.args[0]) + _parts(node.args[1])
        merged: list[str | Node] = []
        for part in parts:
            if isinstance(part, str) and merged and isinstance(merged[-1], str):
                merged[-1] = merged[-1] + part
            else:
                merged.append(part)
        return merged
    return [node]


@dataclass(frozen=True)
class PatchOp:
    """One ``JSONPatch{...}`` literal: its op (None when computed), path, from and value."""

    node: StructLit
    op: str | None
    op_node: Node | None
    path: PathTemplate | None
    from_: PathTemplate | None
    value: Node | None

    def targets(self) -> list[tuple[str, PathTemplate]]:
        """(role, path) pairs this operation changes: ``path`` (and ``from`` for move)."""
        if self.op == "test":
            return []
        out: list[tuple[str, PathTemplate]] = []
        if self.path is not None:
            out.append(("path", self.path))
        if self.op == "move" and self.from_ is not None:
            out.append(("from", self.from_))
        return out


def json_patch_ops(node: Node) -> list[PatchOp]:
    """Every ``JSONPatch{...}`` literal in ``node``, in source order."""
    out = []
    for sub in node.walk():
        if isinstance(sub, StructLit) and sub.type_name.lstrip(".") == "JSONPatch":
            fields = {e.key: e.value for e in sub.entries if isinstance(e.key, str)}
            op_node = fields.get("op")
            op = op_node.value if isinstance(op_node, Literal) and isinstance(op_node.value, str) else None
            path = fields.get("path")
            source = fields.get("from")
            out.append(
                PatchOp(
                    sub,
                    op,
                    op_node,
                    path_template(path) if path is not None else None,
                    path_template(source) if source is not None else None,
                    fields.get("value"),
                )
            )
    out.sort(key=lambda p: p.node.pos)
    return out


# -- Object{...} literals ----------------------------------------------------------------


@dataclass(frozen=True)
class FieldWrite:
    """A field an ``Object{...}`` literal sets: its path, the key's position and the value."""

    path: tuple[Segment, ...]
    pos: int
    value: Node

    def pointer(self) -> str:
        """The path as a JSON pointer (computed keys shown as ``*``)."""
        return pointer("*" if seg is None else str(seg) for seg in self.path)


def object_writes(node: Node) -> list[FieldWrite]:
    """The leaf fields every ``Object{...}`` literal in ``node`` sets, in source order."""
    out: list[FieldWrite] = []
    for sub in node.walk():
        if isinstance(sub, StructLit) and sub.type_name.lstrip(".") == "Object":
            out.extend(_fields(sub, ()))
    out.sort(key=lambda w: w.pos)
    return out


def _fields(node: Node, prefix: tuple[Segment, ...]) -> Iterator[FieldWrite]:
    if isinstance(node, StructLit):
        for entry in node.entries:
            if not isinstance(entry.key, str):
                continue
            path = (*prefix, entry.key)
            if _nested(entry.value):
                yield from _fields(entry.value, path)
            else:
                yield FieldWrite(path, entry.pos, entry.value)
    elif isinstance(node, MapLit):
        for entry in node.entries:
            key = entry.key
            seg: Segment = key.value if isinstance(key, Literal) and isinstance(key.value, str) else None
            path = (*prefix, seg)
            if seg is not None and _nested(entry.value):
                yield from _fields(entry.value, path)
            else:
                yield FieldWrite(path, entry.pos, entry.value)


def _nested(value: Node) -> bool:
    if isinstance(value, StructLit):
        return value.type_name.lstrip(".").startswith("Object.") and bool(value.entries)
    return isinstance(value, MapLit) and bool(value.entries)


def literal_keys(node: Node) -> set[str] | None:
    """The keys of a map or ``Object`` literal when all are literal strings, else None."""
    if isinstance(node, StructLit):
        return {e.key for e in node.entries if isinstance(e.key, str)}
    if isinstance(node, MapLit):
        keys: set[str] = set()
        for entry in node.entries:
            if not (isinstance(entry.key, Literal) and isinstance(entry.key.value, str)) or entry.optional:
                return None
            keys.add(entry.key.value)
        return keys
    return None
