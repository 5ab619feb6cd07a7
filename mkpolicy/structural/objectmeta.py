"""ObjectMeta as kube-apiserver validates it on the create of a custom resource, with its messages.

Whatever a CRD's schema says, the API server validates ``metadata`` itself
(apiextensions-apiserver pkg/registry/customresource/validator.go calls
``ValidateObjectMetaAccessor`` with ``NameIsDNSSubdomain``). Followed here, from
k8s.io/apimachinery v0.36.3:

* pkg/api/validation/objectmeta.go: ``ValidateObjectMetaAccessor`` (name required, a DNS-1123
  subdomain; namespace a DNS-1123 label), ``ValidateAnnotations`` (keys are qualified names
  compared in lower case; keys and values together at most 256 KiB), finalizer names;
* pkg/apis/meta/v1/validation/validation.go: ``ValidateLabels`` (qualified-name keys, label values);
* pkg/api/validate/content/kube.go and dns.go (what pkg/util/validation/validation.go's
  ``IsQualifiedName`` and ``IsValidLabelValue`` now are): ``IsLabelKey``, ``IsLabelValue``,
  and the subdomain of a key's prefix, with content/errors.go's messages ("bytes");
* pkg/util/validation/validation.go: ``IsDNS1123Subdomain`` (names), ``IsDNS1123Label``
  (namespaces) and its own ``MaxLenError`` ("characters").

Lengths are counted as Go's ``len`` counts them (UTF-8 bytes).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from mkpolicy.structural.validation import FieldError

#: Keys and values of all annotations together (objectmeta.go ``TotalAnnotationSizeLimitB``).
TOTAL_ANNOTATION_SIZE = 256 * 1024
#: A label value, a label key's name part, a DNS-1123 label (content/kube.go, dns.go).
LABEL_MAX = 63
SUBDOMAIN_MAX = 253

_LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_KEY_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)
_LABEL_VALUE_FMT = f"({_LABEL_KEY_FMT})?"
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_DNS_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_SUBDOMAIN_FMT = _DNS_LABEL_FMT + "(\\." + _DNS_LABEL_FMT + ")*"
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)


def _full(fmt: str) -> re.Pattern[str]:
    return re.compile(f"(?:{fmt})\\Z")  # Go's ^...$ on a single-line value


_LABEL_KEY = _full(_LABEL_KEY_FMT)
_LABEL_VALUE = _full(_LABEL_VALUE_FMT)
_DNS_LABEL = _full(_DNS_LABEL_FMT)
_SUBDOMAIN = _full(_SUBDOMAIN_FMT)


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def max_len_error(n: int, unit: str = "characters") -> str:
    """``MaxLenError``: pkg/util/validation says characters, pkg/api/validate/content says bytes."""
    return f"must be no more than {n} {unit}"


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """``RegexError``, with Go's spacing (each example ends with ``', '``, then `` or ``)."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def mask_trailing_dash(value: str) -> str:
    """generic.go ``maskTrailingDash``: a generateName prefix may end with '-' (its last two characters
    become 'a', as Go does it)."""
    return value[:-2] + "a" if len(value) > 1 and value.endswith("-") else value


def _subdomain(value: str, unit: str) -> list[str]:
    errs = [max_len_error(SUBDOMAIN_MAX, unit)] if _size(value) > SUBDOMAIN_MAX else []
    if not _SUBDOMAIN.match(value):
        errs.append(regex_error(_SUBDOMAIN_MSG, _SUBDOMAIN_FMT, "example.com"))
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    """``IsDNS1123Subdomain`` of pkg/util/validation (object names): why ``value`` is not one."""
    return _subdomain(value, "characters")


def is_dns1123_label(value: str) -> list[str]:
    """``IsDNS1123Label`` of pkg/util/validation (namespaces): why ``value`` is not one."""
    errs = [max_len_error(LABEL_MAX)] if _size(value) > LABEL_MAX else []
    if not _DNS_LABEL.match(value):
        if _SUBDOMAIN.match(value):
            errs.append("must not contain dots")
        else:
            errs.append(regex_error(_DNS_LABEL_MSG, _DNS_LABEL_FMT, "my-name", "123-abc"))
    return errs


def is_label_key(value: str) -> list[str]:
    """``IsLabelKey`` of pkg/api/validate/content (``IsQualifiedName``): an optional DNS subdomain
    prefix and ``/``, then a name."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in _subdomain(prefix, "bytes"))
    else:
        return [
            "a valid label key "
            + regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif _size(name) > LABEL_MAX:
        errs.append("name part " + max_len_error(LABEL_MAX, "bytes"))
    if not _LABEL_KEY.match(name):
        errs.append("name part " + regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc"))
    return errs


def is_label_value(value: str) -> list[str]:
    """``IsLabelValue`` of pkg/api/validate/content: at most 63 bytes, alphanumeric at both ends."""
    errs = [max_len_error(LABEL_MAX, "bytes")] if _size(value) > LABEL_MAX else []
    if not _LABEL_VALUE.match(value):
        errs.append(regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def _quoted(value: str) -> str:
    """Go's ``%q`` of a string (field.Error's rendering of a bad value)."""
    return json.dumps(value, ensure_ascii=False)


def _invalid(path: str, value: str, message: str) -> FieldError:
    return FieldError(path, "Invalid value", f"{_quoted(value)}: {message}")


def object_meta_errors(obj: Any, *, namespaced: bool | None = None) -> list[FieldError]:
    """What ``ValidateObjectMetaAccessor`` reports for ``obj``'s ``metadata`` on create.

    ``namespaced`` None: the scope is not known, a namespace is checked only when present.
    Values of the wrong JSON type are left to the schema and decoding errors.
    """
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping):
        return [FieldError("metadata.name", "Required value", "name or generateName is required")]
    out: list[FieldError] = []
    generate = meta.get("generateName")
    if isinstance(generate, str) and generate:
        masked = mask_trailing_dash(generate)
        out.extend(_invalid("metadata.generateName", generate, m) for m in is_dns1123_subdomain(masked))
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        out.append(FieldError("metadata.name", "Required value", "name or generateName is required"))
    else:
        out.extend(_invalid("metadata.name", name, m) for m in is_dns1123_subdomain(name))
    namespace = meta.get("namespace")
    if namespaced is True and not namespace:
        out.append(FieldError("metadata.namespace", "Required value"))
    elif namespaced is False and namespace:
        out.append(FieldError("metadata.namespace", "Forbidden", "not allowed on this type"))
    elif isinstance(namespace, str) and namespace:
        out.extend(_invalid("metadata.namespace", namespace, m) for m in is_dns1123_label(namespace))
    labels = meta.get("labels")
    if isinstance(labels, Mapping):
        for key, value in labels.items():
            out.extend(_invalid("metadata.labels", str(key), m) for m in is_label_key(str(key)))
            if isinstance(value, str):
                out.extend(_invalid("metadata.labels", value, m) for m in is_label_value(value))
    annotations = meta.get("annotations")
    if isinstance(annotations, Mapping):
        for key in annotations:
            out.extend(_invalid("metadata.annotations", str(key), m) for m in is_label_key(str(key).lower()))
        total = sum(_size(str(k)) + _size(v if isinstance(v, str) else "") for k, v in annotations.items())
        if total > TOTAL_ANNOTATION_SIZE:
            out.append(
                FieldError("metadata.annotations", "Too long", f"may not be more than {TOTAL_ANNOTATION_SIZE} bytes")
            )
    finalizers = meta.get("finalizers")
    if isinstance(finalizers, list):
        for finalizer in finalizers:
            if isinstance(finalizer, str):
                out.extend(_invalid("metadata.finalizers", finalizer, m) for m in is_label_key(finalizer))
    return out


__all__ = [
    "TOTAL_ANNOTATION_SIZE",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_label_key",
    "is_label_value",
    "mask_trailing_dash",
    "max_len_error",
    "object_meta_errors",
    "regex_error",
]
