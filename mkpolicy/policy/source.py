"""YAML documents with positions.

ruamel.yaml's round-trip loader keeps the line and column of every key and value. This
module turns a YAML stream into plain Python data (dict/list/scalars) plus a
:class:`SourceMap` per document that answers "where in the file is this path?" —
including positions *inside* a CEL expression string, whatever its YAML quoting or
block style, so that a CEL error points at the offending token in the file.

Untrusted input is bounded: alias expansion (YAML bombs), nesting depth and the
number of nodes are limited while converting.
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import mkpolicy.yamldata as yamldata
from mkpolicy.errors import InputError, Location, PolicyError
from mkpolicy.yamlhint import explain

Path = tuple[str | int, ...]


def dotted(path: Path) -> str:
    """``spec.cases[0].name``: a document path as messages write it."""
    out = ""
    for seg in path:
        out += f"[{seg}]" if isinstance(seg, int) else (f".{seg}" if out else str(seg))
    return out or "document"


#: Limits for untrusted documents.
MAX_NODES = 200_000
MAX_DEPTH = 64
MAX_FILE_BYTES = 8 * 1024 * 1024
#: Most YAML events (scalars, collection starts and ends, aliases...) a stream may hold.
#: The round-trip parser that records positions is slow (about 50 µs per event), so the
#: stream is counted first with libyaml; 50 000 events parse in about 3 s at worst, and a
#: policy or test suite needs a few thousand.
MAX_EVENTS = 50_000
#: Deepest bracket nesting a YAML stream may have before it is parsed at all. The YAML
#: parser spends time quadratic in the flow nesting depth, so very deep ``[[[[...`` input
#: is refused up front. The bound is generous: brackets inside CEL expressions count too.
MAX_FLOW_DEPTH = 4 * MAX_DEPTH

_BRACKETS = re.compile(r"[\[\]{}]|^---", re.MULTILINE)


@dataclass
class SourceMap:
    """Positions of one YAML document: file name, text and (line, column) per path."""

    file: str
    text: str
    #: path -> (line, column) of the value, 0-based as ruamel reports them.
    values: dict[Path, tuple[int, int]] = field(default_factory=dict)
    #: path -> (line, column) of the mapping key naming the path.
    keys: dict[Path, tuple[int, int]] = field(default_factory=dict)
    #: (line, column) where the document starts.
    start: tuple[int, int] = (0, 0)
    _line_offsets: list[int] | None = None

    def location(self, path: Path, *, key: bool = False, where: str | None = None) -> Location:
        """Location of ``path`` (its key with ``key=True``), or of its nearest ancestor."""
        table = self.keys if key else self.values
        probe = tuple(path)
        while probe:
            pos = table.get(probe) or self.values.get(probe) or self.keys.get(probe)
            if pos is not None:
                return Location(self.file, pos[0] + 1, pos[1] + 1, where)
            probe = probe[:-1]
        return Location(self.file, self.start[0] + 1, self.start[1] + 1, where)

    def expression_location(self, path: Path, value: str, offset: int | None, where: str | None = None) -> Location:
        """File location of character ``offset`` of the string ``value`` stored at ``path``."""
        pos = self.values.get(tuple(path))
        if pos is None or offset is None:
            return self.location(path, where=where)
        start = self._offset_of(*pos)
        raw_pos = _align(self.text, start, value, offset)
        line, col = self._line_col(raw_pos)
        return Location(self.file, line, col, where)

    def _offsets(self) -> list[int]:
        if self._line_offsets is None:
            offsets = [0]
            for i, ch in enumerate(self.text):
                if ch == "\n":
                    offsets.append(i + 1)
            self._line_offsets = offsets
        return self._line_offsets

    def _offset_of(self, line: int, col: int) -> int:
        offsets = self._offsets()
        if line >= len(offsets):
            return len(self.text)
        return offsets[line] + col

    def _line_col(self, offset: int) -> tuple[int, int]:
        offsets = self._offsets()
        lo, hi = 0, len(offsets) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if offsets[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1, offset - offsets[lo] + 1


def _align(text: str, start: int, value: str, offset: int) -> int:
    """Map ``value[offset]`` to an offset in ``text`` where the scalar starts at ``start``.

    YAML folding, indentation and quoting only change whitespace, quotes and escapes,
    so the non-whitespace characters of the value appear in order in the raw text.
    Walk both, matching those characters.
    """
    i = start
    # Skip a block scalar header (``|``, ``>-``, ``|2`` ...) up to its line end.
    if i < len(text) and text[i] in "|>":
        nl = text.find("\n", i)
        i = len(text) if nl < 0 else nl + 1
    elif i < len(text) and text[i] in "\"'":
        i += 1
    offset = max(0, min(offset, len(value)))
    # The character of interest is the next non-whitespace one at or after offset.
    target = offset
    while target < len(value) and value[target].isspace():
        target += 1
    last = i
    for j, ch in enumerate(value):
        if ch.isspace():
            continue
        k = i
        misses = 0
        while k < len(text) and text[k] != ch:
            if not text[k].isspace():
                misses += 1
                if misses > 4:  # escapes never take this many characters: give up
                    return last
            k += 1
        if k >= len(text):
            return last
        if j >= target:
            return k
        last = k
        i = k + 1
    return i if target >= len(value) else last


def _plain(node: Any, path: Path, smap: SourceMap, counter: list[int], depth: int, active: set[int]) -> Any:
    """Convert ruamel round-trip nodes to plain data, recording positions."""
    counter[0] += 1
    if counter[0] > MAX_NODES:
        raise _LimitError(f"the YAML stream has more than {MAX_NODES} nodes (after alias expansion)", path)
    if depth > MAX_DEPTH:
        raise _LimitError(f"document nests deeper than {MAX_DEPTH} levels", path)
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    if isinstance(node, CommentedMap):
        if id(node) in active:
            raise _LimitError("recursive alias: a node contains itself", path)
        active.add(id(node))
        out: dict[str, Any] = {}
        for key in node:
            if not isinstance(key, str):
                raise _LimitError(
                    f"mapping keys must be strings, found {type(key).__name__} {key!r}", path, limit=False
                )
            sub = (*path, key)
            try:
                smap.keys[sub] = tuple(node.lc.key(key))
                smap.values[sub] = tuple(node.lc.value(key))
            except (KeyError, TypeError, AttributeError):
                pass
            out[key] = _plain(node[key], sub, smap, counter, depth + 1, active)
        active.discard(id(node))
        return out
    if isinstance(node, CommentedSeq):
        if id(node) in active:
            raise _LimitError("recursive alias: a node contains itself", path)
        active.add(id(node))
        items = []
        for idx, item in enumerate(node):
            sub = (*path, idx)
            with contextlib.suppress(KeyError, TypeError, AttributeError):
                smap.values[sub] = tuple(node.lc.item(idx))
            items.append(_plain(item, sub, smap, counter, depth + 1, active))
        active.discard(id(node))
        return items
    if isinstance(node, str):
        counter[1] += len(node)
        if counter[1] > yamldata.MAX_EXPANDED_BYTES:
            limit = yamldata.MAX_EXPANDED_BYTES // (1024 * 1024)
            raise _LimitError(
                f"the YAML stream expands to more than {limit} MiB of strings (after alias expansion)", path
            )
        return str(node)
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    # Timestamps and other YAML scalars stay as their text form.
    return str(node)


class _LimitError(Exception):
    """A document exceeds a limit (``limit``: input error) or cannot become plain data."""

    def __init__(self, message: str, path: Path, limit: bool = True) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.limit = limit


@dataclass
class Document:
    """One YAML document: plain data and its positions."""

    data: Any
    source: SourceMap
    index: int


def read_text(file: str) -> str:
    """Read a policy file as UTF-8, with clear errors for binary or huge files."""
    return yamldata.read_text(file, max_bytes=MAX_FILE_BYTES, hint="policy files are small YAML documents")


def parse_documents(text: str, file: str) -> Iterator[Document]:
    """Parse a (multi-document) YAML stream, yielding each non-empty document."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    _check_flow_depth(text, file)
    _check_events(text, file)
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False
    try:
        loaded = list(yaml.load_all(io.StringIO(text)))
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        if "duplicate key" in str(exc):
            problem = f"duplicate key: {_duplicate_key(str(exc))}"
        else:
            problem = explain(problem, text.splitlines(), mark.line + 1 if mark is not None else None)
        loc = Location(file, mark.line + 1, mark.column + 1) if mark is not None else Location(file)
        raise PolicyError(f"malformed YAML: {problem}", loc) from None
    except YAMLError as exc:
        raise PolicyError(f"malformed YAML: {exc}", Location(file)) from None
    except RecursionError:
        raise InputError(f"document nests deeper than {MAX_DEPTH} levels", Location(file)) from None
    except ValueError as exc:  # ruamel converts integers as it loads: one too long to convert
        found = re.search(r"[0-9_]{4000,}", text)
        if found is None:
            raise InputError(f"malformed YAML: {exc}", Location(file)) from None
        line = text.count("\n", 0, found.start()) + 1
        column = found.start() - (text.rfind("\n", 0, found.start()) + 1) + 1
        raise InputError(
            f"an integer of {len(found.group()):,} digits; Kubernetes reads integers as int64",
            Location(file, line, column),
        ) from None
    counter = [0, 0]  # nodes and scalar bytes, shared by every document: the limits bound the whole stream
    for index, node in enumerate(loaded):
        if node is None:
            continue
        smap = SourceMap(file=file, text=text)
        lc = getattr(node, "lc", None)
        if lc is not None:
            smap.start = (lc.line, lc.col)
        try:
            data = _plain(node, (), smap, counter, 0, set())
        except _LimitError as exc:
            cls = InputError if exc.limit else PolicyError
            raise cls(f"document {index + 1}: {exc.message}", smap.location(exc.path)) from None
        except RecursionError:
            raise InputError(f"document nests deeper than {MAX_DEPTH} levels", smap.location(())) from None
        yield Document(data, smap, index)


def _check_flow_depth(text: str, file: str) -> None:
    """Refuse streams whose brackets nest deeper than :data:`MAX_FLOW_DEPTH` (before parsing)."""
    depth = 0
    for match in _BRACKETS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > MAX_FLOW_DEPTH:
                line = text.count("\n", 0, match.start()) + 1
                raise InputError(
                    f"document nests deeper than {MAX_DEPTH} levels (found more than {MAX_FLOW_DEPTH} open brackets)",
                    Location(file, line),
                )
        elif token == "---":
            depth = 0
        elif depth > 0:
            depth -= 1


def _check_events(text: str, file: str) -> None:
    """Refuse streams with more than :data:`MAX_EVENTS` YAML events or nesting deeper than
    :data:`MAX_DEPTH`, counted with libyaml before the slow positional parse (which
    recurses: deep block nesting would exhaust Python's stack there).

    Syntax errors are left to the round-trip parser, which reports them with positions.
    """
    from mkpolicy import yamldata

    yamldata.check_depth(
        text,
        file,
        MAX_DEPTH,
        max_events=MAX_EVENTS,
        events_message=f"the YAML stream has more than {MAX_EVENTS} nodes; policy files and test suites are small",
        syntax_errors=False,
    )


def _duplicate_key(message: str) -> str:
    for line in message.splitlines():
        if "found duplicate key" in line:
            return line.split("found duplicate key", 1)[1].strip().split(" with value")[0]
    return "a key appears twice in one mapping"
