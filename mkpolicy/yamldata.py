"""Plain JSON data from untrusted YAML, in bounded time and memory.

libyaml parses fast but trusts its input: an alias bomb ("billion laughs") expands to
gigabytes as soon as the data is copied or encoded, and deep nesting overflows the C
stack of its composer, which kills the process. So a stream is read in three steps:

1. the event stream (libyaml's parser keeps an explicit stack) bounds nesting depth;
2. the node graph is composed, aliases still shared, and the number of nodes and of
   scalar bytes it expands to are counted without expanding it (an alias of a large
   string costs its size every time it is repeated), integers too long to convert are
   refused with their position;
3. only then is the data built, as JSON has it: timestamps stay the strings they were
   written as (like ``sigs.k8s.io/yaml``), keys become strings, and every aliased subtree
   is its own copy, so changing the data in one place never shows in another.

Errors are :class:`~mkpolicy.errors.InputError` with the file, line and column.
Policy files are read with positions elsewhere (``mkpolicy.policy.source``); this module
serves Kubernetes objects, CRDs, kubeconfigs and request bodies.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
from typing import Any

from mkpolicy.errors import InputError, Location
from mkpolicy.yamlhint import explain

#: Largest file read (bytes). Kubernetes objects are at most 1.5 MiB in etcd; CRDs of
#: big frameworks (Argo Workflow) reach 3 MiB as YAML.
MAX_BYTES = 16 * 1024 * 1024
#: Deepest nesting of mappings and sequences (the largest CRDs nest 35 levels).
MAX_DEPTH = 128
#: Most nodes a stream may expand to once aliases are resolved.
MAX_NODES = 2_000_000
#: Most scalar bytes (keys and values) a stream may expand to once aliases are resolved.
MAX_EXPANDED_BYTES = 64 * 1024 * 1024
_INT_TAG = "tag:yaml.org,2002:int"


def read_text(path: str, *, max_bytes: int = MAX_BYTES, hint: str = "") -> str:
    """Read ``path`` ("-": stdin) as UTF-8 text; binary, huge or unreadable files are errors."""
    name = "<stdin>" if path == "-" else path
    try:
        if path == "-":
            raw = sys.stdin.buffer.read(max_bytes + 1)
        else:
            with open(path, "rb") as fh:
                raw = fh.read(max_bytes + 1)
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror or exc}", Location(name)) from None
    if len(raw) > max_bytes:
        limit = f"{max_bytes // (1024 * 1024)} MiB" if max_bytes >= 1024 * 1024 else f"{max_bytes} bytes"
        raise InputError(f"file is larger than {limit}" + (f"; {hint}" if hint else ""), Location(name))
    if b"\x00" in raw:
        raise InputError("expected a YAML text file, found binary data (NUL bytes)", Location(name))
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputError(
            f"expected UTF-8 text, found an invalid byte at offset {exc.start}", Location(name, line)
        ) from None


def load_all(
    text: str,
    source: str = "<input>",
    *,
    max_depth: int = MAX_DEPTH,
    max_nodes: int = MAX_NODES,
    max_bytes: int = MAX_EXPANDED_BYTES,
) -> list[Any]:
    """Every non-empty document of the YAML (or JSON) stream ``text``, as plain JSON data."""
    import yaml

    check_depth(text, source, max_depth)
    loader = _loader()(text)
    documents: list[Any] = []
    left, left_bytes = max_nodes, max_bytes
    try:
        while loader.check_node():
            node = loader.get_node()
            nodes, _, size = _measure(node, 1, max_depth, {}, set(), source)
            left -= nodes
            left_bytes -= size
            if left < 0 or left_bytes < 0:
                what = f"{max_nodes:,} nodes" if left < 0 else f"{max_bytes // (1024 * 1024)} MiB of scalars"
                raise InputError(
                    f"the YAML stream expands to more than {what}; aliases (&anchor/*alias) repeat whole subtrees",
                    _at(source, node.start_mark),
                )
            data = loader.construct_document(node)
            if data is not None:
                documents.append(data)
    except yaml.MarkedYAMLError as exc:
        raise _malformed(exc, source) from None
    except yaml.YAMLError as exc:
        raise InputError(f"malformed YAML: {exc}", Location(source)) from None
    finally:
        loader.dispose()
    # Through JSON: keys become strings, odd scalars (binary) their text, shared subtrees copies.
    result: list[Any] = json.loads(json.dumps(documents, default=str))
    return result


def load_file(path: str, *, max_bytes: int = MAX_BYTES) -> list[Any]:
    """:func:`load_all` of the file ``path`` ("-": stdin)."""
    return load_all(read_text(path, max_bytes=max_bytes), "<stdin>" if path == "-" else path)


def load_object(path: str, *, max_bytes: int = MAX_BYTES) -> dict[str, Any]:
    """The one Kubernetes object (a mapping) in the file ``path`` ("-": stdin)."""
    docs = load_file(path, max_bytes=max_bytes)
    if len(docs) != 1 or not isinstance(docs[0], dict):
        found = f"{len(docs)} documents" if len(docs) != 1 else f"a {type(docs[0]).__name__}"
        name = "<stdin>" if path == "-" else path
        raise InputError(f"expected exactly one Kubernetes object (a mapping); found {found}", Location(name))
    obj: dict[str, Any] = docs[0]
    return obj


def check_depth(
    text: str,
    source: str = "<input>",
    max_depth: int = MAX_DEPTH,
    *,
    max_events: int | None = None,
    events_message: str = "",
    syntax_errors: bool = True,
) -> None:
    """Refuse ``text`` when its collections nest deeper than ``max_depth`` (read as events, in C).

    libyaml's composer recurses in C and overflows the stack on deep nesting (the process
    dies); its event parser does not, so this is the check to make before composing. With
    ``max_events``, a stream of more events is refused too, with ``events_message``. A
    syntax error is an :class:`InputError` unless ``syntax_errors`` is false (then the
    caller's own parser reports it, with its positions).
    """
    import yaml

    try:
        _scan_events(yaml.parse(text, Loader=_loader()), source, max_depth, max_events, events_message)
    except yaml.MarkedYAMLError as exc:
        # libyaml has a nesting limit of its own (1,000 levels from PyYAML 6.0.4 on) and its
        # scanner reads ahead, so deep flow nesting fails in the scanner before the events
        # reach the depth count. The pure-Python parser has no such limit: it says whether
        # the text nests deeper than ours before libyaml's error, so the refusal is the same
        # whatever libyaml the machine has.
        # Only what libyaml read is parsed again: the pure-Python scanner is slow on deep input.
        mark = exc.problem_mark or exc.context_mark
        seen = text[: mark.index + 1] if mark is not None else text
        with contextlib.suppress(yaml.YAMLError):
            _scan_events(yaml.parse(seen, Loader=yaml.SafeLoader), source, max_depth, max_events, events_message)
        if syntax_errors:
            raise _malformed(exc, source) from None
    except yaml.YAMLError as exc:
        if syntax_errors:
            raise InputError(f"malformed YAML: {exc}", Location(source)) from None


def _scan_events(events: Any, source: str, max_depth: int, max_events: int | None, events_message: str) -> None:
    import yaml

    depth = 0
    for count, event in enumerate(events):
        if max_events is not None and count >= max_events:
            raise InputError(events_message, _at(source, event.start_mark))
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > max_depth:
                raise InputError(f"document nests deeper than {max_depth} levels", _at(source, event.start_mark))
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _measure(
    node: Any, depth: int, max_depth: int, sizes: dict[int, tuple[int, int, int]], active: set[int], source: str
) -> tuple[int, int, int]:
    """(nodes, height, scalar bytes) of ``node`` with every alias expanded, without expanding any.

    An aliased node is measured once (``sizes``), so a bomb is measured in time linear
    in its text. Aliases can nest deeper than the text does (each anchor wrapping the
    one before), so the expanded height is bounded here too.
    """
    import yaml

    key = id(node)
    known = sizes.get(key)
    if known is None:
        if key in active:
            raise InputError("recursive alias: a node contains itself", _at(source, node.start_mark))
        if depth > max_depth:
            raise InputError(
                f"document nests deeper than {max_depth} levels (through aliases)", _at(source, node.start_mark)
            )
        children: list[Any] = []
        size = 0
        if isinstance(node, yaml.ScalarNode):
            size = len(node.value)
            if node.tag == _INT_TAG and size > sys.get_int_max_str_digits() > 0:
                raise InputError(
                    f"an integer of {size:,} characters; Kubernetes reads integers as int64 "
                    f"(at most {sys.get_int_max_str_digits():,} digits are converted here)",
                    _at(source, node.start_mark),
                )
        elif isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            _check_keys(node, source)
            children = [n for pair in node.value for n in pair]
        active.add(key)
        measured = [_measure(c, depth + 1, max_depth, sizes, active, source) for c in children]
        active.discard(key)
        known = (
            1 + sum(m[0] for m in measured),
            1 + max((m[1] for m in measured), default=0),
            size + sum(m[2] for m in measured),
        )
        sizes[key] = known
    if depth + known[1] > max_depth + 1:
        raise InputError(
            f"document nests deeper than {max_depth} levels (through aliases)", _at(source, node.start_mark)
        )
    return known


def _check_keys(node: Any, source: str) -> None:
    """A key twice in one mapping is an error (libyaml keeps the last; Kubernetes refuses it)."""
    import yaml

    seen: set[str] = set()
    for key, _ in node.value:
        if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
            if key.value in seen:
                raise InputError(f"duplicate key {key.value!r} in one mapping", _at(source, key.start_mark))
            seen.add(key.value)


def _at(source: str, mark: Any) -> Location:
    return Location(source, mark.line + 1, mark.column + 1) if mark is not None else Location(source)


def _malformed(exc: Any, source: str) -> InputError:
    mark = exc.problem_mark or exc.context_mark
    problem = explain(exc.problem or exc.context or "invalid YAML")
    return InputError(f"malformed YAML: {problem}", _at(source, mark))


@functools.cache
def _loader() -> type[Any]:
    """libyaml's safe loader, keeping timestamps as the text they were written as.

    Built on first use so that ``import yaml`` stays off CLI start-up.
    """
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Loader(base):  # type: ignore[misc, valid-type]
        pass

    def scalar_text(loader: Any, node: Any) -> str:
        return str(node.value)

    Loader.add_constructor("tag:yaml.org,2002:timestamp", scalar_text)
    return Loader
