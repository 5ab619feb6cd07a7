"""Kubernetes' semver library: ``semver``, ``isSemver``, ``major``/``minor``/``patch``
and comparisons (``compareTo``, ``isGreaterThan``, ``isLessThan``, shared with
quantities).

Parsing is strict Semantic Versioning 2.0.0, as ``blang/semver`` (which Kubernetes
uses) parses it; ``semver(s, true)`` first normalizes as Kubernetes does: a leading
``v`` is dropped, missing minor and patch numbers become 0, leading zeros go.
Comparison follows SemVer precedence (build metadata is ignored).
"""

from __future__ import annotations

import math
import re
from typing import Any

from mkpolicy.cel.errors import EvalError, no_overload
from mkpolicy.cel.library import STANDARD, function
from mkpolicy.cel.values import OpaqueValue, register_type

SEMVER_TYPE = register_type("kubernetes.Semver")

_NUMBER = r"(0|[1-9][0-9]*)"
_IDENT = r"[0-9A-Za-z-]+"
_SEMVER = re.compile(rf"{_NUMBER}\.{_NUMBER}\.{_NUMBER}(?:-({_IDENT}(?:\.{_IDENT})*))?(?:\+({_IDENT}(?:\.{_IDENT})*))?")


class Semver(OpaqueValue):
    """A ``kubernetes.Semver`` value."""

    __slots__ = ("build", "major", "minor", "patch", "pre")
    cel_type_name = "kubernetes.Semver"

    def __init__(self, major: int, minor: int, patch: int, pre: tuple[str, ...], build: tuple[str, ...]) -> None:
        self.major = major
        self.minor = minor
        self.patch = patch
        self.pre = pre
        self.build = build

    def compare(self, other: Semver) -> int:
        """SemVer precedence: -1, 0 or 1."""
        a = (self.major, self.minor, self.patch)
        b = (other.major, other.minor, other.patch)
        if a != b:
            return -1 if a < b else 1
        if self.pre == other.pre:
            return 0
        if not self.pre:
            return 1
        if not other.pre:
            return -1
        for x, y in zip(self.pre, other.pre, strict=False):
            if x == y:
                continue
            xn, yn = x.isdigit(), y.isdigit()
            if xn and yn:
                return -1 if int(x) < int(y) else 1
            if xn != yn:
                return -1 if xn else 1
            return -1 if x < y else 1
        return -1 if len(self.pre) < len(other.pre) else 1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Semver) and self.compare(other) == 0

    def __hash__(self) -> int:
        return hash(("semver", self.major, self.minor, self.patch, self.pre))

    def __repr__(self) -> str:
        return f"semver({self.cel_string()!r})"

    def cel_string(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            text += "-" + ".".join(self.pre)
        if self.build:
            text += "+" + ".".join(self.build)
        return text


def parse_semver(text: str) -> Semver:
    """Parse a strict SemVer 2.0.0 version."""
    m = _SEMVER.fullmatch(text)
    if m is None:
        raise EvalError(f"invalid semantic version {text!r}")
    pre = tuple(m.group(4).split(".")) if m.group(4) else ()
    for part in pre:
        if part.isdigit() and len(part) > 1 and part.startswith("0"):
            raise EvalError(f"invalid semantic version {text!r}: numeric pre-release part {part!r} has a leading zero")
    build = tuple(m.group(5).split(".")) if m.group(5) else ()
    return Semver(int(m.group(1)), int(m.group(2)), int(m.group(3)), pre, build)


def normalize_and_parse(text: str) -> Semver:
    """Kubernetes' normalization: drop ``v``, pad to three numbers, strip leading zeros."""
    s = text[1:] if text.startswith("v") else text
    parts = s.split(".", 2)
    for i, p in enumerate(parts):
        if len(p) > 1:
            p = p.lstrip("0")
            if not p or not p[0].isdigit():
                p = "0" + p
            parts[i] = p
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise EvalError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return parse_semver(".".join(parts))


def _cost(result: Any, value: Any, *rest: Any) -> int:
    return max(1, math.ceil(len(value) * 0.1)) if type(value) is str else 1


@function("semver", signatures=["(string) -> kubernetes.Semver", "(string, bool) -> kubernetes.Semver"], cost=_cost)
def to_semver(value: Any, normalize: Any = False) -> Semver:
    if type(value) is not str or type(normalize) is not bool:
        raise no_overload("semver", value, normalize)
    return normalize_and_parse(value) if normalize else parse_semver(value)


@function("isSemver", signatures=["(string) -> bool", "(string, bool) -> bool"], cost=_cost)
def is_semver(value: Any, normalize: Any = False) -> bool:
    if type(value) is not str or type(normalize) is not bool:
        raise no_overload("isSemver", value, normalize)
    try:
        to_semver(value, normalize)
    except EvalError:
        return False
    return True


def _semver(name: str, value: Any) -> Semver:
    if type(value) is not Semver:
        raise no_overload(name, value)
    return value


@function("major", signatures=["(kubernetes.Semver) -> int"], receiver=True)
def major(value: Any) -> int:
    return _semver("major", value).major


@function("minor", signatures=["(kubernetes.Semver) -> int"], receiver=True)
def minor(value: Any) -> int:
    return _semver("minor", value).minor


@function("patch", signatures=["(kubernetes.Semver) -> int"], receiver=True)
def patch(value: Any) -> int:
    return _semver("patch", value).patch


def semver_compare(name: str, value: Any, other: Any) -> int:
    """``value.compareTo(other)`` for semvers (used by the shared comparison functions)."""
    if type(value) is not Semver or type(other) is not Semver:
        raise no_overload(name, value, other)
    return value.compare(other)


STANDARD.extend("compareTo", True, ["(kubernetes.Semver, kubernetes.Semver) -> int"])
STANDARD.extend("isGreaterThan", True, ["(kubernetes.Semver, kubernetes.Semver) -> bool"])
STANDARD.extend("isLessThan", True, ["(kubernetes.Semver, kubernetes.Semver) -> bool"])
