"""Regular expressions with RE2 semantics: ``matches`` (standard CEL) and Kubernetes'
``find`` / ``findAll``.

Patterns are compiled by Google's RE2 (the ``google-re2`` package), the engine family
cel-go and Kubernetes use (Go's ``regexp`` implements RE2 syntax): matching is linear
in the input, so no pattern can backtrack catastrophically, and Perl features RE2
rejects (look-around, back-references) are errors here too. RE2's program size is
bounded (:data:`MAX_PROGRAM_MEMORY`), so huge patterns fail to compile instead of
exhausting memory.
"""

from __future__ import annotations

import math
from typing import Any

import re2

from mkpolicy.cel.errors import EvalError, no_overload
from mkpolicy.cel.library import function

#: Memory RE2 may use for one compiled pattern.
MAX_PROGRAM_MEMORY = 8 << 20

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False
_OPTIONS.max_mem = MAX_PROGRAM_MEMORY

_CACHE: dict[str, Any] = {}


def compile_regex(pattern: str) -> Any:
    """Compile ``pattern`` with RE2 (cached); invalid patterns raise EvalError."""
    found = _CACHE.get(pattern)
    if found is None:
        try:
            found = re2.compile(pattern, _OPTIONS)
        except re2.error as exc:
            detail = exc.args[0] if exc.args else exc
            if isinstance(detail, bytes):
                detail = detail.decode("utf-8", "replace")
            raise EvalError(f"invalid regular expression {pattern!r}: {detail}") from None
        if len(_CACHE) >= 1024:
            _CACHE.clear()
        _CACHE[pattern] = found
    return found


def regex_cost(result: Any, text: Any, pattern: Any, *rest: Any) -> int:
    """cel-go: (size(text) + 1) * 0.1, times size(pattern) * 0.25, both rounded up."""
    if type(text) is not str or type(pattern) is not str:
        return 1
    return max(1, math.ceil((len(text) + 1) * 0.1) * math.ceil(len(pattern) * 0.25))


def _matches(s: Any, pattern: Any) -> bool:
    if type(s) is not str or type(pattern) is not str:
        raise no_overload("matches", s, pattern)
    return compile_regex(pattern).search(s) is not None


function("matches", signatures=["(string, string) -> bool"], cost=regex_cost)(_matches)
function("matches", signatures=["(string, string) -> bool"], receiver=True, cost=regex_cost)(_matches)


@function("find", signatures=["(string, string) -> string"], receiver=True, cost=regex_cost)
def find(s: Any, pattern: Any) -> str:
    """The first match of ``pattern`` in ``s``, or ""."""
    if type(s) is not str or type(pattern) is not str:
        raise no_overload("find", s, pattern)
    m = compile_regex(pattern).search(s)
    return m.group(0) if m is not None else ""


@function(
    "findAll",
    signatures=["(string, string) -> list(string)", "(string, string, int) -> list(string)"],
    receiver=True,
    cost=regex_cost,
)
def find_all(s: Any, pattern: Any, limit: Any = -1) -> list[str]:
    """All non-overlapping matches (at most ``limit`` when it is not negative)."""
    if type(s) is not str or type(pattern) is not str or type(limit) is not int:
        raise no_overload("findAll", s, pattern, *(() if limit == -1 else (limit,)))
    if limit == 0:
        return []
    out: list[str] = []
    for m in compile_regex(pattern).finditer(s):
        out.append(m.group(0))
        if 0 < limit <= len(out):
            break
    return out
