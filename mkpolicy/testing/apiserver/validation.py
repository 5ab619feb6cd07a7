"""Validation of object metadata, with kube-apiserver's rules and wording.

Two kinds of problems: a body whose metadata has the wrong JSON *types* cannot be
decoded (400 BadRequest, :func:`check_metadata_types`); well-typed metadata with bad
*values* is a 422 Invalid with one cause per problem (:func:`validate_metadata`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from mkpolicy.testing.apiserver.errors import (
    ApiError,
    Cause,
    bad_request,
    forbidden_value,
    invalid_value,
    required_value,
    too_long,
)
from mkpolicy.testing.apiserver.jsonutil import type_name
from mkpolicy.testing.apiserver.resources import NameRule

DNS1123_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN = DNS1123_LABEL + r"(\." + DNS1123_LABEL + ")*"
QUALIFIED_NAME = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
LABEL_VALUE = "(" + QUALIFIED_NAME + ")?"

_LABEL_RE = re.compile(DNS1123_LABEL)
_SUBDOMAIN_RE = re.compile(DNS1123_SUBDOMAIN)
_QUALIFIED_RE = re.compile(QUALIFIED_NAME)
_LABEL_VALUE_RE = re.compile(LABEL_VALUE)

SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    f"validation is '{DNS1123_SUBDOMAIN}')"
)
LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    f"start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    f"'{DNS1123_LABEL}')"
)
QUALIFIED_MESSAGE = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    f"alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    f"'{QUALIFIED_NAME}')"
)
LABEL_VALUE_MESSAGE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    f"start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
    f"validation is '{LABEL_VALUE}')"
)

#: kube-apiserver's limit on the total size of annotations (keys and values).
ANNOTATIONS_LIMIT = 256 * 1024

#: The fields of ``ObjectMeta``; anything else under ``metadata`` is an unknown field.
OBJECT_META_FIELDS = frozenset(
    {
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    }
)


def dns_subdomain_problems(value: str) -> list[str]:
    """Why ``value`` is not a DNS-1123 subdomain (empty when it is)."""
    problems = []
    if len(value) > 253:
        problems.append("must be no more than 253 characters")
    if not _SUBDOMAIN_RE.fullmatch(value):
        problems.append(SUBDOMAIN_MESSAGE)
    return problems


def dns_label_problems(value: str) -> list[str]:
    """Why ``value`` is not a DNS-1123 label (empty when it is)."""
    problems = []
    if len(value) > 63:
        problems.append("must be no more than 63 characters")
    if not _LABEL_RE.fullmatch(value):
        problems.append(LABEL_MESSAGE)
    return problems


def name_problems(value: str, rule: NameRule) -> list[str]:
    """Why ``value`` is not a valid object name under ``rule``."""
    return dns_label_problems(value) if rule == "label" else dns_subdomain_problems(value)


def qualified_name_problems(value: str) -> list[str]:
    """Why ``value`` is not a qualified name (``[prefix/]name``, the form of label keys)."""
    prefix, slash, name = value.rpartition("/")
    problems = []
    if slash:
        if not prefix:
            problems.append("prefix part must be non-empty")
        else:
            problems.extend(f"prefix part {p}" for p in dns_subdomain_problems(prefix))
    if not name:
        problems.append("name part must be non-empty")
        return problems
    if len(name) > 63:
        problems.append("name part must be no more than 63 characters")
    if not _QUALIFIED_RE.fullmatch(name):
        problems.append(QUALIFIED_MESSAGE)
    return problems


def label_value_problems(value: str) -> list[str]:
    """Why ``value`` is not a valid label value."""
    problems = []
    if len(value) > 63:
        problems.append("must be no more than 63 characters")
    if not _LABEL_VALUE_RE.fullmatch(value):
        problems.append(LABEL_VALUE_MESSAGE)
    return problems


def _decode_error(field: str, expected: str, value: Any) -> ApiError:
    return bad_request(
        f"cannot decode the request body: {field}: expected {expected}, found {type_name(value)}"
        + (f" ({value!r})" if not isinstance(value, dict | list) else "")
    )


def check_metadata_types(obj: Mapping[str, Any]) -> None:
    """Raise 400 BadRequest when ``metadata`` does not have ``ObjectMeta``'s JSON types."""
    if "metadata" not in obj or obj["metadata"] is None:
        return
    meta = obj["metadata"]
    if not isinstance(meta, dict):
        raise _decode_error("metadata", "an object", meta)
    for key in ("name", "generateName", "namespace", "uid", "resourceVersion", "creationTimestamp", "selfLink"):
        value = meta.get(key)
        if value is not None and not isinstance(value, str):
            raise _decode_error(f"metadata.{key}", "a string", value)
    if meta.get("generation") is not None and (
        isinstance(meta["generation"], bool) or not isinstance(meta["generation"], int)
    ):
        raise _decode_error("metadata.generation", "an integer", meta["generation"])
    for key in ("labels", "annotations"):
        value = meta.get(key)
        if value is None:
            continue
        if not isinstance(value, dict):
            raise _decode_error(f"metadata.{key}", "an object of strings", value)
        for k, v in value.items():
            if not isinstance(v, str):
                raise _decode_error(f"metadata.{key}.{k}", "a string", v)
    finalizers = meta.get("finalizers")
    if finalizers is not None:
        if not isinstance(finalizers, list):
            raise _decode_error("metadata.finalizers", "an array of strings", finalizers)
        for i, f in enumerate(finalizers):
            if not isinstance(f, str):
                raise _decode_error(f"metadata.finalizers[{i}]", "a string", f)
    refs = meta.get("ownerReferences")
    if refs is not None:
        if not isinstance(refs, list):
            raise _decode_error("metadata.ownerReferences", "an array of objects", refs)
        for i, ref in enumerate(refs):
            if not isinstance(ref, dict):
                raise _decode_error(f"metadata.ownerReferences[{i}]", "an object", ref)


def validate_metadata(meta: Mapping[str, Any], rule: NameRule, namespaced: bool) -> list[Cause]:
    """Every problem with the values of an object's (well-typed) metadata."""
    causes: list[Cause] = []
    name = meta.get("name") or ""
    if not name:
        causes.append(required_value("metadata.name", "name or generateName is required"))
    else:
        causes.extend(invalid_value("metadata.name", name, p) for p in name_problems(name, rule))
    if namespaced:
        ns = meta.get("namespace") or ""
        if not ns:
            causes.append(required_value("metadata.namespace"))
        else:
            causes.extend(invalid_value("metadata.namespace", ns, p) for p in dns_label_problems(ns))
    for key, value in (meta.get("labels") or {}).items():
        causes.extend(invalid_value("metadata.labels", key, p) for p in qualified_name_problems(key))
        causes.extend(invalid_value("metadata.labels", value, p) for p in label_value_problems(value))
    annotations = meta.get("annotations") or {}
    total = 0
    for key, value in annotations.items():
        causes.extend(invalid_value("metadata.annotations", key, p) for p in qualified_name_problems(key.lower()))
        total += len(key) + len(value)
    if total > ANNOTATIONS_LIMIT:
        causes.append(too_long("metadata.annotations", ANNOTATIONS_LIMIT))
    for i, fin in enumerate(meta.get("finalizers") or []):
        causes.extend(invalid_value(f"metadata.finalizers[{i}]", fin, p) for p in qualified_name_problems(fin))
    controllers = 0
    for i, ref in enumerate(meta.get("ownerReferences") or []):
        path = f"metadata.ownerReferences[{i}]"
        for key in ("apiVersion", "kind", "name", "uid"):
            if not isinstance(ref.get(key), str) or not ref.get(key):
                causes.append(required_value(f"{path}.{key}", f"{key} must not be empty"))
        if ref.get("controller") is True:
            controllers += 1
    if controllers > 1:
        causes.append(
            invalid_value("metadata.ownerReferences", controllers, "Only one reference can have Controller set to true")
        )
    return causes


def finalizers_added_while_deleting(old: Mapping[str, Any], new: Mapping[str, Any]) -> Cause | None:
    """The 422 cause for adding finalizers to an object that is being deleted, or None."""
    if not old.get("deletionTimestamp"):
        return None
    added = [f for f in new.get("finalizers") or [] if f not in (old.get("finalizers") or [])]
    if not added:
        return None
    return forbidden_value(
        "metadata.finalizers",
        f"no new finalizers can be added if the object is being deleted, found new finalizers {added}",
    )
