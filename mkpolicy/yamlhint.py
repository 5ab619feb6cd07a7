"""YAML syntax errors in plain words, with a hint about indentation.

YAML parsers report what their grammar expected (``expected <block end>, but found
'<block mapping start>'``); people need to know what to fix. :func:`explain` turns the
parser's problem into a sentence, keeps the parser's words in brackets (to search for),
and, when the lines are known, compares the indentation of the offending line with the
line before it — the cause of most YAML errors in hand-written files.
"""

from __future__ import annotations

#: (what the parser says, what it usually means)
_PLAIN = [
    (
        "mapping values are not allowed here",
        "a ':' where no mapping can start (a 'key: value' inside a plain value "
        "needs quotes, or this line is indented deeper than the key it belongs to)",
    ),
    ("expected <block end>, but found", "this line does not line up with the lines before it at its level"),
    ("did not find expected key", "this line does not line up with the keys before it at its level"),
    ("did not find expected '-' indicator", "this line does not line up with the list items before it"),
    ("could not find expected ':'", "a key without ':' (or a line that continues the one before it)"),
    ("found character '\\t' that cannot start any token", "a tab: YAML indents with spaces only"),
    ("expected ',' or ']'", "a '[' that is not closed by ']' (or a missing ',' between items)"),
    ("expected ',' or '}'", "a '{' that is not closed by '}' (or a missing ',' between entries)"),
    ("found unexpected end of stream", "a quote that is not closed"),
    ("found undefined alias", "an alias (*name) without an anchor (&name) before it"),
    (
        "found unknown escape character",
        "an unknown escape in a double-quoted string (write \\\\ for a backslash, or use single quotes)",
    ),
]

_INDENTATION = ("line up", "indented deeper", "continues the one before")


def explain(problem: str, lines: list[str] | None = None, line: int | None = None) -> str:
    """``problem`` (the parser's words) as a sentence; ``lines`` and the 1-based ``line``
    of the error add what the indentation looks like."""
    plain = next((meaning for words, meaning in _PLAIN if words in problem), None)
    if plain is None:
        return problem
    text = f"{plain} [YAML: {problem}]"
    if lines is None or line is None or not any(word in plain for word in _INDENTATION):
        return text
    here = _line(lines, line)
    before = next((lines[n - 1] for n in range(min(line, len(lines) + 1) - 1, 0, -1) if lines[n - 1].strip()), None)
    # A line deeper than its parent ("key:") is how YAML nests: only a sibling that does not
    # line up says something about indentation.
    if here is None or before is None or before.rstrip().endswith(":") or _indent(here) == _indent(before):
        return text
    return (
        f"{text}; check the indentation: line {line} starts at column {_indent(here) + 1}, the line before "
        f"at column {_indent(before) + 1} (indent with spaces, the same number for every key of one mapping)"
    )


def _line(lines: list[str], number: int) -> str | None:
    return lines[number - 1] if 0 < number <= len(lines) else None


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip(" "))
