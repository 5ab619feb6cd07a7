"""Kubernetes' named formats: ``format.named(name)``, ``format.<name>()`` and
``<Format>.validate(s)``.

``validate`` returns ``optional.none()`` for a valid string and otherwise an optional
list of error messages, worded as ``k8s.io/apimachinery``'s validation functions word
them (``format.dns1123Label().validate('My_Name')``).
"""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
import math
import re
from collections.abc import Callable
from typing import Any

from mkpolicy.cel.errors import no_overload
from mkpolicy.cel.library import function
from mkpolicy.cel.library.urls import parse_url
from mkpolicy.cel.values import OPTIONAL_NONE, OpaqueValue, OptionalValue, register_type
from mkpolicy.structural.objectmeta import is_dns1123_label as dns1123_label
from mkpolicy.structural.objectmeta import is_dns1123_subdomain as dns1123_subdomain
from mkpolicy.structural.objectmeta import is_label_key as qualified_name
from mkpolicy.structural.objectmeta import is_label_value as label_value
from mkpolicy.structural.objectmeta import mask_trailing_dash as _mask_trailing_dash
from mkpolicy.structural.objectmeta import max_len_error as _max_len
from mkpolicy.structural.objectmeta import regex_error as _regex_error

FORMAT_TYPE = register_type("kubernetes.NamedFormat")

_DNS1035_LABEL = "[a-z]([-a-z0-9]*[a-z0-9])?"
_UUID = re.compile(r"(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}")
_DATETIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?([Zz]|[+-]\d{2}:?\d{2})?")


def dns1035_label(value: str) -> list[str]:
    errs = []
    if len(value) > 63:
        errs.append(_max_len(63))
    if not re.fullmatch(_DNS1035_LABEL, value):
        errs.append(
            _regex_error(
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
                "start with an alphabetic character, and end with an alphanumeric character",
                _DNS1035_LABEL,
                "my-name",
                "abc-123",
            )
        )
    return errs


def port_name(value: str) -> list[str]:
    """``validation.IsValidPortName`` (k8s.io/apimachinery/pkg/util/validation/validation.go)."""
    errs = []
    if len(value) > 15:
        errs.append(_max_len(15))
    if not re.fullmatch(r"[-a-z0-9]+", value):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not re.search(r"[a-z]", value):
        errs.append("must contain at least one letter (a-z)")
    if "--" in value:
        errs.append("must not contain consecutive hyphens")
    if value and (value[0] == "-" or value[-1] == "-"):
        errs.append("must not begin or end with a hyphen")
    return errs


def _uri(value: str) -> list[str]:
    try:
        parse_url(value)
    except ValueError as exc:
        return [f"parse {value!r}: {exc}"]
    return []


def _uuid(value: str) -> list[str]:
    return [] if _UUID.fullmatch(value) else ["does not match the UUID format"]


def _byte(value: str) -> list[str]:
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return ["invalid base64"]
    return []


def _date(value: str) -> list[str]:
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        try:
            _dt.date.fromisoformat(value)
            return []
        except ValueError:
            pass
    return ["invalid date"]


def _datetime(value: str) -> list[str]:
    m = _DATETIME.fullmatch(value)
    if m is not None:
        year, month, day, hour, minute = (int(m.group(i)) for i in range(1, 6))
        second = int(m.group(6) or 0)
        try:
            _dt.datetime(year, month, day, hour, minute, second)
            return []
        except ValueError:
            pass
    return ["invalid datetime"]


class NamedFormat(OpaqueValue):
    """A ``kubernetes.NamedFormat``: a name and its validation function."""

    __slots__ = ("name", "validate")
    cel_type_name = "kubernetes.NamedFormat"

    def __init__(self, name: str, validate: Callable[[str], list[str]]) -> None:
        self.name = name
        self.validate = validate

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NamedFormat) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("format", self.name))

    def __repr__(self) -> str:
        return f"format.{self.name}()"


FORMATS: dict[str, NamedFormat] = {
    f.name: f
    for f in (
        NamedFormat("dns1123Label", dns1123_label),
        NamedFormat("dns1123Subdomain", dns1123_subdomain),
        NamedFormat("dns1035Label", dns1035_label),
        NamedFormat("qualifiedName", qualified_name),
        # k8s.io/apiserver/pkg/cel/library/format.go (ConstantFormats) has portName too.
        NamedFormat("portName", port_name),
        NamedFormat("dns1123LabelPrefix", lambda s: dns1123_label(_mask_trailing_dash(s))),
        NamedFormat("dns1123SubdomainPrefix", lambda s: dns1123_subdomain(_mask_trailing_dash(s))),
        NamedFormat("dns1035LabelPrefix", lambda s: dns1035_label(_mask_trailing_dash(s))),
        NamedFormat("labelValue", label_value),
        NamedFormat("uri", _uri),
        NamedFormat("uuid", _uuid),
        NamedFormat("byte", _byte),
        NamedFormat("date", _date),
        NamedFormat("datetime", _datetime),
    )
}


@function("format.named", signatures=["(string) -> optional_type(kubernetes.NamedFormat)"])
def named(name: Any) -> OptionalValue:
    if type(name) is not str:
        raise no_overload("format.named", name)
    found = FORMATS.get(name)
    return OPTIONAL_NONE if found is None else OptionalValue(found)


def _constant(fmt: NamedFormat) -> Callable[[], NamedFormat]:
    def constant() -> NamedFormat:
        return fmt

    return constant


for _name, _fmt in FORMATS.items():
    function(f"format.{_name}", signatures=["() -> kubernetes.NamedFormat"])(_constant(_fmt))


def _validate_cost(result: Any, fmt: Any, value: Any) -> int:
    return max(1, math.ceil(len(value) * 0.1)) if type(value) is str else 1


@function(
    "validate",
    signatures=["(kubernetes.NamedFormat, string) -> optional_type(list(string))"],
    receiver=True,
    cost=_validate_cost,
)
def validate(fmt: Any, value: Any) -> OptionalValue:
    if type(fmt) is not NamedFormat or type(value) is not str:
        raise no_overload("validate", fmt, value)
    errors = fmt.validate(value)
    return OptionalValue(errors) if errors else OPTIONAL_NONE
