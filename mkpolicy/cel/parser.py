"""Parse CEL text into the mkpolicy AST (:mod:`mkpolicy.cel.ast`).

The grammar is cel-python's ``cel.lark``, imported and extended by ``grammar.lark``
(optional syntax, trailing commas). Lark builds a concrete tree; a non-recursive
transformer turns it into AST nodes, expanding macros on the way, so deeply nested
input cannot exhaust the Python stack.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Any

import lark
from lark.visitors import Transformer_NonRecursive, v_args

from mkpolicy.cel import ast
from mkpolicy.cel.errors import CelSyntaxError
from mkpolicy.cel.values import INT64_MAX, INT64_MIN, UINT64_MAX, Uint

#: Deepest AST nesting accepted; keeps compilation and evaluation far from Python's
#: recursion limit (cel-spec requires at least 32 levels).
MAX_DEPTH = 100
#: Longest expression accepted, in characters.
MAX_EXPRESSION_LENGTH = 100_000

RESERVED = frozenset(
    {
        "as",
        "break",
        "const",
        "continue",
        "else",
        "false",
        "for",
        "function",
        "if",
        "import",
        "in",
        "let",
        "loop",
        "package",
        "namespace",
        "null",
        "return",
        "true",
        "var",
        "void",
        "while",
    }
)

_MACROS_ONE_VAR = {"all": 2, "exists": 2, "exists_one": 2, "filter": 2}
_MACROS_TWO_VAR = {"all", "exists", "existsOne", "exists_one", "transformList", "transformMap", "transformMapEntry"}


@functools.cache
def _lark() -> lark.Lark:
    import celpy

    celpy_dir = Path(celpy.__file__).parent
    grammar = (Path(__file__).parent / "grammar.lark").read_text()
    kwargs: dict[str, Any] = dict(
        parser="lalr",
        start="expr",
        import_paths=[str(celpy_dir)],
        propagate_positions=True,
        maybe_placeholders=False,
    )
    cache_file = _cache_file(grammar)
    if cache_file is None:
        return lark.Lark(grammar, **kwargs)
    return lark.Lark(grammar, cache=cache_file, **kwargs)


def _cache_file(grammar: str) -> str | None:
    """Where lark may cache the parser tables (building them costs ~150 ms), or None.

    Lark unpickles the cache file, so it must live in a directory only this user can
    write: the user's cache directory, never the shared temp directory. Lark checks the
    file against the grammar, its options, the imported celpy grammar and the Python
    version; the grammar's digest in the name keeps two mkpolicy versions from evicting
    each other.
    """
    import hashlib

    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    directory = os.path.join(base, "mkpolicy")
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        info = os.stat(directory)
    except OSError:  # no home, read-only file system: build without the cache
        return None
    if info.st_uid != os.getuid() or info.st_mode & 0o022:
        return None
    digest = hashlib.sha256(grammar.encode()).hexdigest()[:16]
    return os.path.join(directory, f"cel-grammar-{digest}.lark")


def parse(text: str, *, block: bool = False) -> ast.Node:
    """Parse ``text`` into an AST, raising :class:`CelSyntaxError` with a position.

    ``block`` enables cel-go's ``cel.block`` syntax (``cel.index(i)``,
    ``cel.iterVar(i, j)``), which the Kubernetes dialect does not have.
    """
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise CelSyntaxError(
            f"expression is {len(text)} characters long; at most {MAX_EXPRESSION_LENGTH} are accepted",
            text,
            0,
        )
    try:
        tree = _lark().parse(text)
    except lark.exceptions.UnexpectedInput as exc:
        raise _syntax_error(text, exc) from None
    try:
        node = _ToAst(text, block).transform(tree)
    except lark.exceptions.VisitError as exc:
        if isinstance(exc.orig_exc, _AstError):
            raise CelSyntaxError(exc.orig_exc.message, text, exc.orig_exc.pos) from None
        raise
    assert isinstance(node, ast.Node)
    _check_depth(text, node)
    return node


def _check_depth(text: str, root: ast.Node) -> None:
    stack: list[tuple[ast.Node, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise CelSyntaxError(f"expression nests deeper than {MAX_DEPTH} levels", text, node.pos)
        stack.extend((child, depth + 1) for child in node.children())


_TOKEN_NAMES = {
    "RPAR": "')'",
    "LPAR": "'('",
    "RSQB": "']'",
    "LSQB": "'['",
    "RBRACE": "'}'",
    "LBRACE": "'{'",
    "COMMA": "','",
    "COLON": "':'",
    "DOT": "'.'",
    "QMARK": "'?'",
    "PLUS": "'+'",
    "MINUS": "'-'",
    "STAR": "'*'",
    "SLASH": "'/'",
    "PERCENT": "'%'",
    "BANG": "'!'",
    "LESSTHAN": "'<'",
    "MORETHAN": "'>'",
    "IDENT": "an identifier",
    "ESC_IDENT": "a `quoted` field name",
    "INT_LIT": "a number",
    "UINT_LIT": "a number",
    "FLOAT_LIT": "a number",
    "STRING_LIT": "a string",
    "MLSTRING_LIT": "a string",
    "BYTES_LIT": "a bytes literal",
    "BOOL_LIT": "true/false",
    "NULL_LIT": "null",
    "IN": "'in'",
    "$END": "end of expression",
}


def _readable(name: str) -> str:
    name = name.split("__")[-1]
    if name in _TOKEN_NAMES:
        return _TOKEN_NAMES[name]
    if name.startswith('"') or name.startswith("'"):
        return name
    return name.lower()


def _syntax_error(text: str, exc: lark.exceptions.UnexpectedInput) -> CelSyntaxError:
    pos = getattr(exc, "pos_in_stream", None)
    if pos is None:
        pos = len(text)
    expected: set[str] = set(getattr(exc, "expected", None) or getattr(exc, "allowed", None) or ())
    if isinstance(exc, lark.exceptions.UnexpectedToken):
        token = exc.token
        found = "end of expression" if token.type == "$END" else repr(str(token))
        if token.type == "$END":
            pos = len(text)
    elif isinstance(exc, lark.exceptions.UnexpectedCharacters):
        found = repr(text[pos]) if pos < len(text) else "end of expression"
    else:
        found = "end of expression"
        pos = len(text)
    want = sorted({_readable(e) for e in expected})
    # Long lists help nobody; name a few of them.
    hint = ""
    if want:
        shown = ", ".join(want[:8]) + (", ..." if len(want) > 8 else "")
        hint = f"; expected {shown}"
    return CelSyntaxError(f"syntax error: unexpected {found}{hint}", text, pos)


class _AstError(Exception):
    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.message = message
        self.pos = pos


class _Op:
    """A pending binary operator: ``left <op>`` waiting for its right operand."""

    __slots__ = ("function", "left", "pos")

    def __init__(self, function: str, left: ast.Node, pos: int) -> None:
        self.function = function
        self.left = left
        self.pos = pos


class _Unary:
    __slots__ = ("function", "pos")

    def __init__(self, function: str, pos: int) -> None:
        self.function = function
        self.pos = pos


def _binop(function: str, symbol: str) -> Any:
    def method(self: _ToAst, meta: Any, children: list[Any]) -> _Op:
        return _Op(function, children[0], self._op_pos(meta, symbol))

    return method


def _chain(self: _ToAst, meta: Any, children: list[Any]) -> Any:
    if len(children) == 1:
        return children[0]
    op, right = children
    assert isinstance(op, _Op)
    return ast.Call(op.pos, op.function, [op.left, right])


@v_args(meta=True)
class _ToAst(Transformer_NonRecursive[Any, Any]):
    def __init__(self, text: str, block: bool = False) -> None:
        super().__init__()
        self.text = text
        self.block = block

    def _op_pos(self, meta: Any, symbol: str) -> int:
        # The operator is the last token of ``left <op>``; lark's meta spans it.
        end = getattr(meta, "end_pos", None)
        if end is None:
            return 0
        found = self.text.rfind(symbol, 0, end)
        return found if found >= 0 else end - len(symbol)

    # -- operators -------------------------------------------------------------------
    def expr(self, meta: Any, children: list[Any]) -> ast.Node:
        if len(children) == 1:
            return children[0]  # type: ignore[no-any-return]
        cond, then, otherwise = children
        pos = self.text.rfind("?", 0, then.pos)
        return ast.Call(pos if pos >= 0 else meta.start_pos, "_?_:_", [cond, then, otherwise])

    def conditionalor(self, meta: Any, children: list[Any]) -> ast.Node:
        if len(children) == 1:
            return children[0]  # type: ignore[no-any-return]
        left, right = children
        return ast.Call(self._between(left, right, "||"), "_||_", [left, right])

    def conditionaland(self, meta: Any, children: list[Any]) -> ast.Node:
        if len(children) == 1:
            return children[0]  # type: ignore[no-any-return]
        left, right = children
        return ast.Call(self._between(left, right, "&&"), "_&&_", [left, right])

    def _between(self, left: ast.Node, right: ast.Node, symbol: str) -> int:
        found = self.text.rfind(symbol, 0, right.pos + 1)
        return found if found >= 0 else left.pos

    relation = _chain
    addition = _chain
    multiplication = _chain
    relation_lt = _binop("_<_", "<")
    relation_le = _binop("_<=_", "<=")
    relation_gt = _binop("_>_", ">")
    relation_ge = _binop("_>=_", ">=")
    relation_eq = _binop("_==_", "==")
    relation_ne = _binop("_!=_", "!=")
    relation_in = _binop("@in", "in")
    addition_add = _binop("_+_", "+")
    addition_sub = _binop("_-_", "-")
    multiplication_mul = _binop("_*_", "*")
    multiplication_div = _binop("_/_", "/")
    multiplication_mod = _binop("_%_", "%")

    def unary_not(self, meta: Any, children: list[Any]) -> _Unary:
        return _Unary("!_", meta.start_pos)

    def unary_neg(self, meta: Any, children: list[Any]) -> _Unary:
        return _Unary("-_", meta.start_pos)

    def unary(self, meta: Any, children: list[Any]) -> ast.Node:
        if len(children) == 1:
            return children[0]  # type: ignore[no-any-return]
        op, operand = children
        assert isinstance(op, _Unary)
        return ast.Call(op.pos, op.function, [operand])

    # -- members ---------------------------------------------------------------------
    def member(self, meta: Any, children: list[Any]) -> ast.Node:
        return children[0]  # type: ignore[no-any-return]

    def primary(self, meta: Any, children: list[Any]) -> ast.Node:
        return children[0]  # type: ignore[no-any-return]

    def member_dot(self, meta: Any, children: list[Any]) -> ast.Node:
        operand, name = children
        return ast.Select(name.start_pos, operand, str(name))

    def member_dot_opt(self, meta: Any, children: list[Any]) -> ast.Node:
        operand, name = children
        return ast.Select(name.start_pos, operand, _field_name(name), optional=True)

    def member_dot_esc(self, meta: Any, children: list[Any]) -> ast.Node:
        operand, name = children
        return ast.Select(name.start_pos, operand, _field_name(name))

    def member_index(self, meta: Any, children: list[Any]) -> ast.Node:
        operand, index = children
        return ast.Call(self._bracket(index, meta), "_[_]", [operand, index])

    def member_index_opt(self, meta: Any, children: list[Any]) -> ast.Node:
        operand, index = children
        return ast.Call(self._bracket(index, meta), "_[?_]", [operand, index])

    def _bracket(self, index: ast.Node, meta: Any) -> int:
        found = self.text.rfind("[", 0, index.pos)
        return found if found >= 0 else meta.start_pos

    def member_dot_arg(self, meta: Any, children: list[Any]) -> ast.Node:
        target, name = children[0], children[1]
        args: list[ast.Node] = children[2] if len(children) > 2 else []
        return self._call(name.start_pos, str(name), args, target)

    def member_object(self, meta: Any, children: list[Any]) -> ast.Node:
        target = children[0]
        entries: list[ast.Entry] = children[1] if len(children) > 1 else []
        type_name = _qualified_name(target)
        if type_name is None:
            raise _AstError("a message literal needs a type name before '{'", target.pos)
        for e in entries:
            if isinstance(e.key, str) and e.key in RESERVED:
                raise _AstError(f"reserved identifier {e.key!r} cannot be a field name", e.pos)
        return ast.StructLit(target.pos, type_name, entries)

    def dot_ident_arg(self, meta: Any, children: list[Any]) -> ast.Node:
        name = children[0]
        args: list[ast.Node] = children[1] if len(children) > 1 else []
        return ast.Call(name.start_pos, "." + str(name), args)

    def dot_ident(self, meta: Any, children: list[Any]) -> ast.Node:
        name = children[0]
        return ast.Ident(name.start_pos, str(name), root=True)

    def ident_arg(self, meta: Any, children: list[Any]) -> ast.Node:
        name = children[0]
        args: list[ast.Node] = children[1] if len(children) > 1 else []
        self._check_ident(name)
        return self._call(name.start_pos, str(name), args, None)

    def ident(self, meta: Any, children: list[Any]) -> ast.Node:
        name = children[0]
        value = str(name)
        if value == "true":
            return ast.Literal(name.start_pos, True)
        if value == "false":
            return ast.Literal(name.start_pos, False)
        if value == "null":
            return ast.Literal(name.start_pos, None)
        self._check_ident(name)
        return ast.Ident(name.start_pos, value)

    def _check_ident(self, name: Any) -> None:
        if str(name) in RESERVED:
            raise _AstError(f"reserved identifier {str(name)!r} cannot be used as a name", name.start_pos)

    def paren_expr(self, meta: Any, children: list[Any]) -> ast.Node:
        return children[0]  # type: ignore[no-any-return]

    # -- literals --------------------------------------------------------------------
    def list_lit(self, meta: Any, children: list[Any]) -> ast.Node:
        items: list[tuple[ast.Node, bool]] = children[0] if children else []
        return ast.ListLit(meta.start_pos, [n for n, _ in items], [o for _, o in items])

    def listelems(self, meta: Any, children: list[Any]) -> list[tuple[ast.Node, bool]]:
        return [c if isinstance(c, tuple) else (c, False) for c in children]

    def opt_elem(self, meta: Any, children: list[Any]) -> tuple[ast.Node, bool]:
        return (children[0], True)

    def map_lit(self, meta: Any, children: list[Any]) -> ast.Node:
        return ast.MapLit(meta.start_pos, children[0] if children else [])

    def mapinits(self, meta: Any, children: list[Any]) -> list[ast.Entry]:
        return children

    def plain_mapinit(self, meta: Any, children: list[Any]) -> ast.Entry:
        key, value = children
        return ast.Entry(key.pos, key, value)

    def opt_mapinit(self, meta: Any, children: list[Any]) -> ast.Entry:
        key, value = children
        return ast.Entry(key.pos, key, value, optional=True)

    def fieldinits(self, meta: Any, children: list[Any]) -> list[ast.Entry]:
        return children

    def plain_fieldinit(self, meta: Any, children: list[Any]) -> ast.Entry:
        name, value = children
        return ast.Entry(name.start_pos, _field_name(name), value)

    def opt_fieldinit(self, meta: Any, children: list[Any]) -> ast.Entry:
        name, value = children
        return ast.Entry(name.start_pos, _field_name(name), value, optional=True)

    def exprlist(self, meta: Any, children: list[Any]) -> list[ast.Node]:
        return children

    def literal(self, meta: Any, children: list[Any]) -> ast.Node:
        token = children[0]
        kind = token.type.split("__")[-1]
        text = str(token)
        pos = token.start_pos
        try:
            value = _literal_value(kind, text)
        except ValueError as exc:
            raise _AstError(str(exc), pos) from None
        return ast.Literal(pos, value)

    # -- macros ----------------------------------------------------------------------
    def _call(self, pos: int, name: str, args: list[ast.Node], target: ast.Node | None) -> ast.Node:
        if target is None:
            if name == "has" and len(args) == 1:
                arg = args[0]
                if not isinstance(arg, ast.Select) or arg.optional:
                    raise _AstError("invalid argument to has() macro: expected a field selection", arg.pos)
                return ast.Select(arg.pos, arg.operand, arg.field, test_only=True)
            return ast.Call(pos, name, args)
        if name == "bind" and isinstance(target, ast.Ident) and target.name == "cel" and len(args) == 3:
            var = self._macro_var(args[0], "cel.bind")
            return ast.Comprehension(pos, "bind", args[1], var, None, [args[2]])
        if self.block and isinstance(target, ast.Ident) and target.name == "cel":
            expanded = self._block(pos, name, args)
            if expanded is not None:
                return expanded
        n = len(args)
        if name in _MACROS_ONE_VAR and n == _MACROS_ONE_VAR[name] and isinstance(args[0], ast.Ident):
            var = self._macro_var(args[0], name)
            return ast.Comprehension(pos, name, target, var, None, [args[1]])
        if name == "map" and n in (2, 3) and isinstance(args[0], ast.Ident):
            var = self._macro_var(args[0], name)
            return ast.Comprehension(pos, "map", target, var, None, list(args[1:]))
        if name in ("optMap", "optFlatMap", "sortBy") and n == 2 and isinstance(args[0], ast.Ident):
            var = self._macro_var(args[0], name)
            return ast.Comprehension(pos, name, target, var, None, [args[1]])
        if n >= 2 and not isinstance(args[0], ast.Ident) and self._is_macro_shape(name, n):
            raise _AstError(f"{name}(): the variable must be a simple name", args[0].pos)
        if name in _MACROS_TWO_VAR and isinstance(args[0], ast.Ident) and n >= 3 and isinstance(args[1], ast.Ident):
            macro = "exists_one" if name == "existsOne" else name
            arity_ok = n == 3 if macro in ("all", "exists", "exists_one") else n in (3, 4)
            if arity_ok:
                var = self._macro_var(args[0], name)
                var2 = self._macro_var(args[1], name)
                if var == var2:
                    raise _AstError(f"{name}(): the two variables must have different names", args[1].pos)
                return ast.Comprehension(pos, macro, target, var, var2, list(args[2:]))
        return ast.Call(pos, name, args, target)

    def _block(self, pos: int, name: str, args: list[ast.Node]) -> ast.Node | None:
        """cel-go's ``cel.block([e0, e1...], body)``: slots bound in order, as nested binds."""
        if name == "block" and len(args) == 2 and isinstance(args[0], ast.ListLit):
            body = args[1]
            for i in range(len(args[0].elements) - 1, -1, -1):
                body = ast.Comprehension(pos, "bind", args[0].elements[i], f"@index{i}", None, [body])
            return body
        ints = [a.value for a in args if isinstance(a, ast.Literal) and type(a.value) is int]
        if len(ints) != len(args):
            return None
        if name == "index" and len(ints) == 1:
            return ast.Ident(pos, f"@index{ints[0]}")
        if name in ("iterVar", "accuVar") and len(ints) == 2:
            return ast.Ident(pos, f"@{name}:{ints[0]}:{ints[1]}")
        return None

    @staticmethod
    def _is_macro_shape(name: str, n: int) -> bool:
        """A call that can only be meant as a macro (``l.map(x.y, ...)`` is a mistake)."""
        if name in _MACROS_ONE_VAR and n == _MACROS_ONE_VAR[name]:
            return True
        if name == "map" and n in (2, 3):
            return True
        return name in ("transformList", "transformMap", "transformMapEntry") and n in (3, 4)

    def _macro_var(self, node: ast.Node, macro: str) -> str:
        if isinstance(node, ast.Ident) and node.name.startswith("@"):
            return node.name
        if not isinstance(node, ast.Ident) or node.root:
            raise _AstError(f"{macro}(): the variable must be a simple name", node.pos)
        return node.name


def _field_name(token: Any) -> str:
    text = str(token)
    return text[1:-1] if text.startswith("`") else text


def _qualified_name(node: ast.Node) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Select) and not node.optional and not node.test_only:
        parts.append(node.field)
        node = node.operand
    if not isinstance(node, ast.Ident):
        return None
    parts.append(("." if node.root else "") + node.name)
    return ".".join(reversed(parts))


def _literal_value(kind: str, text: str) -> Any:
    if kind == "INT_LIT":
        # cel-python's INT_LIT carries the sign, so -9223372036854775808 is one token.
        value = _parse_int(text)
        if not INT64_MIN <= value <= INT64_MAX:
            raise ValueError("integer literal is out of range")
        return value
    if kind == "UINT_LIT":
        value = _parse_int(text[:-1])
        if not 0 <= value <= UINT64_MAX:
            raise ValueError("unsigned integer literal is out of range")
        return Uint(value)
    if kind == "FLOAT_LIT":
        return float(text)
    if kind in ("STRING_LIT", "MLSTRING_LIT"):
        return unquote(text, as_bytes=False)
    if kind == "BYTES_LIT":
        return unquote(text[1:], as_bytes=True)
    if kind == "BOOL_LIT":
        return text == "true"
    if kind == "NULL_LIT":
        return None
    raise ValueError(f"unknown literal {text!r}")


def _parse_int(text: str) -> int:
    negative = text.startswith("-")
    body = text[1:] if negative else text
    value = int(body, 16) if body[:2].lower() == "0x" else int(body, 10)
    return -value if negative else value


_SIMPLE_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "`": "`",
    "?": "?",
}
_ESCAPE_RE = re.compile(
    r"\\(?:(?P<simple>[abfnrtv\\'\"`?])|[xX](?P<hex>[0-9a-fA-F]{2})|u(?P<u4>[0-9a-fA-F]{4})"
    r"|U(?P<u8>[0-9a-fA-F]{8})|(?P<oct>[0-3][0-7]{2})|(?P<bad>.?))",
    re.DOTALL,
)


def unquote(text: str, as_bytes: bool) -> Any:
    """Decode a CEL string or bytes literal (quotes, raw prefix and escapes)."""
    raw = text[0] in "rR"
    if raw:
        text = text[1:]
    quote = text[:3] if text[:3] in ('"""', "'''") else text[0]
    body = text[len(quote) : len(text) - len(quote)]
    if raw:
        return body.encode("utf-8") if as_bytes else body
    if not as_bytes:

        def repl(m: re.Match[str]) -> str:
            if m.group("simple") is not None:
                return _SIMPLE_ESCAPES[m.group("simple")]
            code = m.group("hex") or m.group("u4") or m.group("u8")
            if code is not None:
                cp = int(code, 16)
            elif m.group("oct") is not None:
                cp = int(m.group("oct"), 8)
            else:
                raise ValueError(f"invalid escape sequence {m.group(0)!r} in string literal")
            if 0xD800 <= cp <= 0xDFFF or cp > 0x10FFFF:
                raise ValueError(f"invalid code point {code!r} in string literal")
            return chr(cp)

        return _ESCAPE_RE.sub(repl, body)
    out = bytearray()
    i = 0
    for m in _ESCAPE_RE.finditer(body):
        out += body[i : m.start()].encode("utf-8")
        i = m.end()
        if m.group("simple") is not None:
            out += _SIMPLE_ESCAPES[m.group("simple")].encode("utf-8")
        elif m.group("hex") is not None:
            out.append(int(m.group("hex"), 16))
        elif m.group("oct") is not None:
            out.append(int(m.group("oct"), 8))
        elif m.group("u4") is not None or m.group("u8") is not None:
            raise ValueError("\\u and \\U escapes are not allowed in bytes literals")
        else:
            raise ValueError(f"invalid escape sequence {m.group(0)!r} in bytes literal")
    out += body[i:].encode("utf-8")
    return bytes(out)
