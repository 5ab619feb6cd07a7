"""Kueue's generic MultiKueue adapter, the behaviour every policy starts from.

``clone`` builds the worker copy exactly as Kueue's generic adapter does (docs/architecture.md, "The problem"),
and ``creation_invariants`` lists what a creation patch may never change.
"""

from __future__ import annotations

from typing import Any

from mkpolicy.jsonvalues import copy_json

#: Label Kueue puts on every worker copy: the MultiKueue origin.
ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
#: Label/annotation key recording the prebuilt workload's name.
PREBUILT_WORKLOAD_KEY = "kueue.x-k8s.io/prebuilt-workload-name"
#: Longest label value Kubernetes accepts.
MAX_LABEL_VALUE = 63

#: Metadata a worker copy must never carry (the API server owns them, or they point
#: at objects in the manager cluster).
FORBIDDEN_METADATA = (
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "ownerReferences",
    "managedFields",
)


def identifier_place(mode: str, workload_name: str) -> str | None:
    """Where the prebuilt-workload name goes: ``"annotations"``, ``"labels"`` or None.

    ``mode`` is the policy's ``creation.workloadIdentifier`` resolved against the context
    (``annotation``, ``label`` or ``none``). Label mode falls back to the annotation for
    names a label cannot hold.
    """
    if mode == "none":
        return None
    if mode == "label" and len(workload_name) <= MAX_LABEL_VALUE:
        return "labels"
    return "annotations"


def clone(manager: dict[str, Any], workload_name: str, origin: str, identifier: str) -> dict[str, Any]:
    """The worker copy of ``manager``, as Kueue's generic adapter creates it.

    ``apiVersion``, ``kind``, ``metadata.{name, namespace, labels, annotations}`` and
    ``spec`` are copied; everything else (uid, resourceVersion, ownerReferences,
    finalizers, managedFields, status...) is left behind. The origin label and the
    prebuilt-workload identifier are added.
    """
    meta = manager.get("metadata") or {}
    new_meta: dict[str, Any] = {}
    for key in ("name", "namespace"):
        if key in meta:
            new_meta[key] = meta[key]
    new_meta["labels"] = dict(meta.get("labels") or {})
    # Kueue clones ObjectMeta through Go types: an empty annotations map is dropped
    # (``omitempty``), so ``annotations: {}`` on the manager is absent on the worker.
    if isinstance(meta.get("annotations"), dict) and meta["annotations"]:
        new_meta["annotations"] = dict(meta["annotations"])
    new_meta["labels"][ORIGIN_LABEL] = origin
    place = identifier_place(identifier, workload_name)
    if place is not None:
        new_meta.setdefault(place, {})[PREBUILT_WORKLOAD_KEY] = workload_name
    worker: dict[str, Any] = {
        "apiVersion": manager.get("apiVersion"),
        "kind": manager.get("kind"),
        "metadata": new_meta,
    }
    if "spec" in manager:
        worker["spec"] = copy_json(manager["spec"])
    return worker


def get_pointer(obj: Any, tokens: list[str]) -> tuple[bool, Any]:
    """(found, value) at the decoded JSON-pointer ``tokens``."""
    cur = obj
    for token in tokens:
        if isinstance(cur, dict) and token in cur:
            cur = cur[token]
        elif isinstance(cur, list) and token.isdigit() and int(token) < len(cur):
            cur = cur[int(token)]
        else:
            return False, None
    return True, cur


def remove_pointer(obj: dict[str, Any], tokens: list[str]) -> dict[str, Any]:
    """``obj`` without the member at ``tokens`` (copy-on-write; absent: unchanged)."""
    found, _ = get_pointer(obj, tokens)
    if not found:
        return obj
    out = dict(obj)
    cur: Any = out
    for token in tokens[:-1]:
        child = cur[token] if isinstance(cur, dict) else cur[int(token)]
        child = dict(child) if isinstance(child, dict) else list(child)
        if isinstance(cur, dict):
            cur[token] = child
        else:
            cur[int(token)] = child
        cur = child
    if isinstance(cur, dict):
        del cur[tokens[-1]]
    else:
        del cur[int(tokens[-1])]
    return out
