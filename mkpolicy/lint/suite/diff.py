"""Readable differences between expected and actual objects (unified diffs of YAML)."""

from __future__ import annotations

import difflib
from typing import Any


def to_yaml(value: Any) -> str:
    """``value`` as block-style YAML with sorted keys (stable, diff-friendly)."""
    import yaml

    if value is None:
        return "null\n"
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    text: str = yaml.dump(value, Dumper=dumper, sort_keys=True, default_flow_style=False, allow_unicode=True, width=100)
    return text


def object_diff(expected: Any, actual: Any, *, missing: bool = False) -> str:
    """A unified diff from ``expected`` to ``actual`` (``missing``: nothing was expected yet)."""
    old = [] if missing else to_yaml(expected).splitlines(keepends=True)
    new = to_yaml(actual).splitlines(keepends=True)
    lines = difflib.unified_diff(old, new, fromfile="expected", tofile="actual", n=3)
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)
