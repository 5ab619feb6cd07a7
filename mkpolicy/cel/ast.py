"""The CEL abstract syntax tree.

The parser turns lark's concrete tree into these nodes; everything downstream (the
compiler, cost estimation, type checking, lint and ``explain``) works on them and never
on lark trees. Operators are :class:`Call` nodes with CEL's canonical function names
(``_+_``, ``_&&_``, ``_?_:_``, ``!_``, ``-_``, ``@in``, ``_[_]`` ...), as in cel-go.
Macros (``has``, ``all``, ``map``, ``cel.bind``...) are expanded by the parser into
:class:`Select` with ``test_only`` and :class:`Comprehension`.

``pos`` is the 0-based offset of the node's significant token in the expression text.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False, slots=True)
class Node:
    """Base class of every AST node."""

    pos: int

    def children(self) -> Iterator[Node]:
        """The direct sub-expressions, in source order."""
        return iter(())

    def walk(self) -> Iterator[Node]:
        """This node and all its descendants, depth first, in source order."""
        stack: list[Node] = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(list(node.children())))


@dataclass(eq=False, slots=True)
class Literal(Node):
    """A constant: null, bool, int, Uint, float, str or bytes."""

    value: Any


@dataclass(eq=False, slots=True)
class Ident(Node):
    """A (possibly qualified) name; ``root`` when written with a leading dot."""

    name: str
    root: bool = False


@dataclass(eq=False, slots=True)
class Select(Node):
    """``operand.field``; ``optional`` for ``operand.?field``; ``test_only`` for ``has()``."""

    operand: Node
    field: str
    optional: bool = False
    test_only: bool = False

    def children(self) -> Iterator[Node]:
        yield self.operand


@dataclass(eq=False, slots=True)
class Call(Node):
    """A function call, receiver-style when ``target`` is set; operators too."""

    function: str
    args: list[Node]
    target: Node | None = None

    def children(self) -> Iterator[Node]:
        if self.target is not None:
            yield self.target
        yield from self.args


@dataclass(eq=False, slots=True)
class ListLit(Node):
    """``[a, ?b]``: ``optional[i]`` marks ``?`` elements."""

    elements: list[Node]
    optional: list[bool]

    def children(self) -> Iterator[Node]:
        yield from self.elements


@dataclass(eq=False, slots=True)
class Entry:
    """One ``key: value`` of a map literal or ``field: value`` of a message literal."""

    pos: int
    key: Node | str
    value: Node
    optional: bool = False


@dataclass(eq=False, slots=True)
class MapLit(Node):
    """``{k: v, ?k2: v2}``."""

    entries: list[Entry]

    def children(self) -> Iterator[Node]:
        for e in self.entries:
            assert isinstance(e.key, Node)
            yield e.key
            yield e.value


@dataclass(eq=False, slots=True)
class StructLit(Node):
    """``Name{field: v, ?field2: v2}`` (``Object{...}``, ``JSONPatch{...}``)."""

    type_name: str
    entries: list[Entry]

    def children(self) -> Iterator[Node]:
        for e in self.entries:
            yield e.value


@dataclass(eq=False, slots=True)
class Comprehension(Node):
    """An expanded macro over ``iter_range``.

    ``macro`` is one of ``all``, ``exists``, ``exists_one``, ``map`` (``args``:
    [transform] or [filter, transform]), ``filter``, ``transformList``,
    ``transformMap``, ``transformMapEntry`` (two variables; ``args`` [transform] or
    [filter, transform]), ``optMap``, ``optFlatMap``, ``sortBy`` (``args`` [key]) and
    ``bind`` (``iter_range`` is the bound value, ``args`` [body]). ``var2`` is set for
    two-variable forms.
    """

    macro: str
    iter_range: Node
    var: str
    var2: str | None
    args: list[Node] = field(default_factory=list)

    def children(self) -> Iterator[Node]:
        yield self.iter_range
        yield from self.args


def line_col(text: str, offset: int) -> tuple[int, int]:
    """1-based (line, column) of ``offset`` in ``text``; columns count code points."""
    offset = max(0, min(offset, len(text)))
    line = text.count("\n", 0, offset) + 1
    start = text.rfind("\n", 0, offset) + 1
    return line, offset - start + 1
