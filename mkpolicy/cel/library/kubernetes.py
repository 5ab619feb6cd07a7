"""Kubernetes-specific functions used by MutatingAdmissionPolicy expressions."""

from __future__ import annotations

from typing import Any

from mkpolicy.cel.errors import no_overload
from mkpolicy.cel.library import function


@function("jsonpatch.escapeKey", signatures=["(string) -> string"])
def escape_key(key: Any) -> str:
    """Escape a map key for use in a JSON Pointer: ``~`` -> ``~0``, ``/`` -> ``~1``.

    One pass, so an escaped ``/`` is never escaped again.
    """
    if type(key) is not str:
        raise no_overload("jsonpatch.escapeKey", key)
    # "~" first: the "~" that escaping "/" introduces must not be escaped again.
    return key.replace("~", "~0").replace("/", "~1")
