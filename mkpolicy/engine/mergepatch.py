"""JSON merge patches (RFC 7386) between two objects, as Kueue sends them.

Kueue computes the status write-back with controller-runtime's ``client.MergeFrom``,
i.e. evanphx/json-patch's ``CreateMergePatch``: objects are diffed key by key, removed
keys become ``null``, anything else that differs (scalars, lists, type changes) is sent
whole.
"""

from __future__ import annotations

from typing import Any

from mkpolicy.engine.jsonpatch import json_equal


def create_merge_patch(original: dict[str, Any], modified: dict[str, Any]) -> dict[str, Any]:
    """The merge patch that turns ``original`` into ``modified`` (empty when equal)."""
    patch: dict[str, Any] = {}
    for key in original:
        if key not in modified:
            patch[key] = None
    for key, new in modified.items():
        if key not in original:
            patch[key] = new
            continue
        old = original[key]
        if old is new:
            continue
        if isinstance(old, dict) and isinstance(new, dict):
            sub = create_merge_patch(old, new)
            if sub:
                patch[key] = sub
        elif not json_equal(old, new):
            patch[key] = new
    return patch
