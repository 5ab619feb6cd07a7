"""Validating objects against a structural schema, as kube-apiserver validates custom resources.

A CRD's ``openAPIV3Schema`` is OpenAPI 3.0's dialect of JSON Schema draft 4 plus
Kubernetes extensions. The draft-4 keywords are checked by the ``jsonschema`` library;
this module adds what Kubernetes means on top:

* ``nullable: true`` lets ``null`` through ``type`` and ``enum``;
* ``x-kubernetes-int-or-string`` accepts an integer or a string;
* ``x-kubernetes-list-type: set`` items are unique, ``map`` items unique by their
  ``x-kubernetes-list-map-keys``;
* ``format`` is checked for the string formats CRDs use (``date-time``, ``date``,
  ``byte``, ``uuid``, ``ipv4``, ``ipv6``, ``cidr``); other formats (``int32``...) pass;
* errors are Kubernetes' field errors (``spec.tasks[1].name: Required value``).

Not checked here: ``metadata``, which the API server validates as ObjectMeta whatever
the schema says, and ``x-kubernetes-validations``: CEL rules need the CEL layer above
this one (:mod:`mkpolicy.engine.crdrules`).
"""

from __future__ import annotations

import base64
import binascii
import datetime
import functools
import ipaddress
import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

#: Kubernetes' names of JSON types, for messages.
_TYPE_NAMES = {bool: "boolean", int: "integer", float: "number", str: "string", dict: "object", list: "array"}


@dataclass(frozen=True)
class FieldError:
    """One violation, as Kubernetes' ``field.Error``: a path, a type and a detail."""

    #: ``spec.tasks[1].name``
    path: str
    #: ``Required value``, ``Invalid value``, ``Unsupported value``, ``Duplicate value``,
    #: ``Too long``, ``Too many``, ``Forbidden``.
    kind: str
    detail: str = ""
    #: The cause type when it is not the kind's: ``FieldValueTypeInvalid`` for kube-openapi's
    #: ``InvalidTypeCode`` errors (``must be of type``), which apiextensions-apiserver
    #: reports with ``field.TypeInvalid`` (pkg/apiserver/validation/validation.go).
    cause: str = ""

    @property
    def cause_type(self) -> str:
        """The ``reason`` of this error in a 422 ``Status``'s ``details.causes``."""
        return self.cause or _CAUSE_TYPES[self.kind]

    @property
    def message(self) -> str:
        """The error without its path: ``Required value``, ``Invalid value: ...``."""
        return self.kind + (f": {self.detail}" if self.detail else "")

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


TYPE_INVALID = "FieldValueTypeInvalid"
_CAUSE_TYPES = {
    "Required value": "FieldValueRequired",
    "Invalid value": "FieldValueInvalid",
    "Unsupported value": "FieldValueNotSupported",
    "Duplicate value": "FieldValueDuplicate",
    "Too long": "FieldValueTooLong",
    "Too many": "FieldValueTooMany",
    "Forbidden": "FieldValueForbidden",
}


def validate(obj: Any, schema: Mapping[str, Any]) -> list[FieldError]:
    """Every violation of ``schema`` (an ``openAPIV3Schema``) by ``obj``, in path order.

    ``metadata`` at the root is left out (Kubernetes validates it as ObjectMeta).
    """
    validator = _validator_class()(_without_metadata(schema))
    errors = [e for error in validator.iter_errors(obj) for e in _field_errors(error)]
    return sorted(set(errors), key=lambda e: (e.path, e.kind, e.detail))


def _without_metadata(schema: Mapping[str, Any]) -> dict[str, Any]:
    props = schema.get("properties")
    if isinstance(props, dict) and "metadata" in props:
        return {**schema, "properties": {k: v for k, v in props.items() if k != "metadata"}}
    return dict(schema)


@functools.cache
def _validator_class() -> Any:
    from jsonschema import Draft4Validator, validators

    def nullable(keyword: Any) -> Any:
        def check(validator: Any, value: Any, instance: Any, schema: Mapping[str, Any]) -> Iterator[Any]:
            if instance is None and schema.get("nullable") is True:
                return
            yield from keyword(validator, value, instance, schema)

        return check

    def int_or_string(validator: Any, value: Any, instance: Any, schema: Mapping[str, Any]) -> Iterator[Any]:
        from jsonschema import ValidationError

        if value is True and type(instance) not in (int, str) and not (instance is None and schema.get("nullable")):
            yield ValidationError("must be of type integer or string")

    def list_type(validator: Any, value: Any, instance: Any, schema: Mapping[str, Any]) -> Iterator[Any]:
        from jsonschema import ValidationError

        if not isinstance(instance, list) or value not in ("set", "map"):
            return
        keys = [str(k) for k in schema.get("x-kubernetes-list-map-keys") or []] if value == "map" else None
        seen: set[str] = set()
        for index, item in enumerate(instance):
            if keys is not None and not isinstance(item, dict):
                continue  # the item's own type error says why
            identity = {k: item.get(k) for k in keys} if keys is not None else item
            key = json.dumps(identity, sort_keys=True)  # as list_item_key for map items
            if key in seen:
                error = ValidationError(json.dumps(identity, separators=(",", ":")), validator="duplicate")
                error.relative_path.append(index)
                yield error
            seen.add(key)

    def string_format(validator: Any, value: Any, instance: Any, schema: Mapping[str, Any]) -> Iterator[Any]:
        from jsonschema import ValidationError

        check = _FORMATS.get(value)
        if check is not None and isinstance(instance, str) and not check(instance):
            yield ValidationError(f"must be of type {value}")

    def go_pattern(validator: Any, value: Any, instance: Any, schema: Mapping[str, Any]) -> Iterator[Any]:
        # Kubernetes validates patterns with Go's regexp (RE2 syntax): Python's re refuses
        # e.g. "^(?i)[a-z]+$", which Kueue's AdmissionCheck CRD uses.
        from jsonschema import ValidationError

        if isinstance(instance, str) and isinstance(value, str):
            import re2

            options = re2.Options()
            options.log_errors = False
            try:
                found = re2.compile(value, options).search(instance)
            except re2.error:
                return  # an invalid pattern is the CRD's problem, refused when it is registered
            if found is None:
                yield ValidationError(f"{instance!r} does not match {value!r}")

    checks = dict(Draft4Validator.VALIDATORS)
    checks["pattern"] = go_pattern
    checks["type"] = nullable(checks["type"])
    checks["enum"] = nullable(checks["enum"])
    checks["x-kubernetes-int-or-string"] = int_or_string
    checks["x-kubernetes-list-type"] = list_type
    checks["format"] = string_format
    return validators.create(
        meta_schema=Draft4Validator.META_SCHEMA,
        validators=checks,
        type_checker=Draft4Validator.TYPE_CHECKER,
    )


def _field_errors(error: Any) -> Iterator[FieldError]:
    path = _path(error.absolute_path)
    where = f"{path} in body" if path else "body"
    keyword = error.validator
    instance = error.instance
    if keyword == "required":
        present = instance if isinstance(instance, dict) else {}
        for name in error.validator_value:
            if name not in present:
                yield FieldError(join_path(path, name), "Required value")
        return
    if keyword == "enum":
        supported = ", ".join(json.dumps(v) for v in error.validator_value)
        yield FieldError(path, "Unsupported value", f"{json.dumps(instance)}: supported values: {supported}")
        return
    if keyword == "duplicate":
        yield FieldError(path, "Duplicate value", error.message)
        return
    if keyword == "maxLength":
        yield FieldError(path, "Too long", f"may not be more than {error.validator_value} bytes")
        return
    if keyword in ("maxItems", "maxProperties"):
        what = "items" if keyword == "maxItems" else "properties"
        yield FieldError(path, "Too many", f"{len(instance)}: must have at most {error.validator_value} {what}")
        return
    if keyword == "format":
        yield FieldError(
            path,
            "Invalid value",
            f"{_brief(instance)}: {where} must be of type {error.validator_value}: {_brief(instance)}",
            TYPE_INVALID,
        )
        return
    if keyword in ("type", "x-kubernetes-int-or-string"):
        expected = error.validator_value if keyword == "type" else ["integer", "string"]
        found = json.dumps(type_name(instance))
        reason = f"must be of type {expected if isinstance(expected, str) else ' or '.join(expected)}"
        yield FieldError(path, "Invalid value", f"{found}: {where} {reason}: {found}", TYPE_INVALID)
        return
    if keyword in ("anyOf", "oneOf", "allOf", "not"):
        reason = {
            "anyOf": "must match at least one schema",
            "oneOf": "must match exactly one schema",
            "allOf": "must match all schemas",
            "not": "must not match the schema",
        }[keyword]
        yield FieldError(path, "Invalid value", f"{_brief(instance)}: {where} {reason}")
        return
    v = error.validator_value
    exclusive = error.schema.get("exclusiveMinimum" if keyword == "minimum" else "exclusiveMaximum") is True
    reason = {
        "minimum": f"should be greater than {'' if exclusive else 'or equal to '}{v}",
        "maximum": f"should be less than {'' if exclusive else 'or equal to '}{v}",
        "multipleOf": f"should be a multiple of {v}",
        "minLength": f"should be at least {v} chars long",
        "pattern": f"should match '{v}'",
        "minItems": f"should have at least {v} items",
        "minProperties": f"should have at least {v} properties",
        "uniqueItems": "shouldn't contain duplicates",
    }.get(keyword, error.message)
    yield FieldError(path, "Invalid value", f"{_brief(instance)}: {where} {reason}")


def type_name(value: Any) -> str:
    """The JSON type of ``value`` as Kubernetes names it in messages (``integer``, ``object``...)."""
    return "null" if value is None else _TYPE_NAMES.get(type(value), type(value).__name__)


def _brief(value: Any) -> str:
    text = json.dumps(value, separators=(",", ":"))
    return text if len(text) <= 60 else text[:57] + "..."


def _path(parts: Any) -> str:
    path = ""
    for part in parts:
        path = f"{path}[{part}]" if isinstance(part, int) else join_path(path, str(part))
    return path


def list_item_key(item: Mapping[str, Any], keys: list[str]) -> str:
    """The identity of an ``x-kubernetes-list-type: map`` item: its key fields' values."""
    return json.dumps({k: item.get(k) for k in keys}, sort_keys=True)


def join_path(path: str, name: str) -> str:
    """``spec`` + ``tasks`` -> ``spec.tasks`` (a field path as Kubernetes writes it)."""
    return f"{path}.{name}" if path else name


def _date_time(text: str) -> bool:
    # RFC 3339, as Kubernetes' strfmt reads it: "T" or a space, optional fraction and zone.
    match = _DATE_TIME.fullmatch(text)
    if match is None:
        return False
    try:
        datetime.datetime.fromisoformat(f"{match['date']}T{match['time']}")
    except ValueError:
        return False
    return True


def _date(text: str) -> bool:
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return len(text) == 10


def _base64(text: str) -> bool:
    try:
        base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _uuid(text: str) -> bool:
    return _UUID.fullmatch(text) is not None


def _ip(version: int) -> Callable[[str], bool]:
    def check(text: str) -> bool:
        try:
            return ipaddress.ip_address(text).version == version
        except ValueError:
            return False

    return check


def _cidr(text: str) -> bool:
    try:
        ipaddress.ip_network(text, strict=False)
    except ValueError:
        return False
    return "/" in text


_DATE_TIME = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})[Tt ](?P<time>\d{2}:\d{2}:\d{2})(?:\.\d+)?(?P<zone>[Zz]|[+-]\d{2}:?\d{2})?"
)
_UUID = re.compile(r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}")
#: The string formats kube-apiserver checks that CRDs use (others, like int32, pass).
_FORMATS: dict[str, Callable[[str], bool]] = {
    "date-time": _date_time,
    "datetime": _date_time,
    "date": _date,
    "byte": _base64,
    "uuid": _uuid,
    "ipv4": _ip(4),
    "ipv6": _ip(6),
    "cidr": _cidr,
}
