"""Structural schemas: the CRD schemas kube-apiserver accepts (apiextensions.k8s.io/v1).

A v1 CRD's ``openAPIV3Schema`` must be *structural*: every field has a type, value
validations (``allOf``, ``anyOf``, ``oneOf``, ``not``) only restrict fields that are
specified outside them, ``metadata`` at most restricts ``name`` and ``generateName``, and
some OpenAPI keywords are not supported at all. This module applies the same checks,
with kube-apiserver's field paths and wording:

- the OpenAPI checks of ``validateCustomResourceDefinitionOpenAPISchema`` and
  ``specStandardValidatorV3.validate``
  (``k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation/validation.go``);
- ``NewStructural``'s refusals (``pkg/apiserver/schema/convert.go``), shown only when
  nothing else is wrong, as ``requirestructuralSchema`` does;
- ``ValidateStructural``: the invariants and the completeness of value validations
  (``pkg/apiserver/schema/validation.go``, ``complete.go``), sorted by message.

Not checked: defaults against their schema (``ValidateDefaults``), CEL rule compilation
and cost (the server compiles and evaluates ``x-kubernetes-validations`` when objects are
written), ``x-kubernetes-list-map-keys`` nullability.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Literal

import re2

from mkpolicy.testing.apiserver.errors import Cause, forbidden_value, invalid_value, required_value, unsupported_value

Level = Literal["root", "item", "field"]

_TYPES = ("array", "boolean", "integer", "number", "object", "string")
_UNSUPPORTED = ("id", "additionalItems", "patternProperties", "definitions", "dependencies", "$ref")
#: Keywords allowed at the root of a schema whose version has the status subresource (validation.go).
_ROOT_WITH_STATUS = frozenset({
    "description", "type", "format", "title", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
    "maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems", "multipleOf", "required", "items",
    "properties", "externalDocs", "example", "x-kubernetes-preserve-unknown-fields", "x-kubernetes-validations",
})  # fmt: skip
_JUNCTORS = ("allOf", "anyOf", "oneOf")
#: Generic keywords a value validation (inside allOf/anyOf/oneOf/not) must not set.
_NESTED_FORBIDDEN = (
    ("type", "must be empty to be structural"),
    ("additionalProperties", "must be undefined to be structural"),
    ("default", "must be undefined to be structural"),
    ("title", "must be empty to be structural"),
    ("description", "must be empty to be structural"),
    ("nullable", "must be false to be structural"),
    ("externalDocs", "must be undefined to be structural"),
    ("x-kubernetes-preserve-unknown-fields", "must be false to be structural"),
    ("x-kubernetes-embedded-resource", "must be false to be structural"),
    ("x-kubernetes-int-or-string", "must be false to be structural"),
    ("x-kubernetes-list-map-keys", "must be empty to be structural"),
    ("x-kubernetes-list-type", "must be undefined to be structural"),
    ("x-kubernetes-map-type", "must be undefined to be structural"),
    ("x-kubernetes-validations", "must be empty to be structural"),
)
_INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _props(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    return _map(schema.get("properties"))


def _set(value: Any) -> bool:
    """Whether a keyword carries a value Go would not see as its zero value."""
    return value not in (None, False, "", [], {}, 0)


def schema_problems(schema: Mapping[str, Any], path: str, *, status: bool) -> list[Cause]:
    """Every reason kube-apiserver refuses ``schema`` (a version's ``openAPIV3Schema``).

    ``path`` is where the schema is (``spec.versions[0].schema``); ``status``: the version
    has the status subresource.
    """
    root = f"{path}.openAPIV3Schema"
    causes: list[Cause] = []
    if status:
        if "type" in schema and schema.get("type") != "object":
            causes.append(
                invalid_value(
                    f"{root}.type",
                    schema.get("type"),
                    'only "object" is allowed as the type at the root of the schema if the status subresource '
                    "is enabled",
                )
            )
        elif any(_set(v) and k not in _ROOT_WITH_STATUS for k, v in schema.items()):
            causes.append(
                invalid_value(
                    root,
                    dict(schema),
                    "only description, type, format, title, maximum, exclusiveMaximum, minimum, exclusiveMinimum, "
                    "maxLength, minLength, pattern, maxItems, minItems, uniqueItems, multipleOf, required, items, "
                    "properties, externalDocs, example, x-kubernetes-preserve-unknown-fields, "
                    "x-kubernetes-validations fields are allowed at the root of the schema if the status "
                    "subresource is enabled",
                )
            )
    if schema.get("nullable") is True:
        causes.append(forbidden_value(f"{root}.nullable", "nullable cannot be true at the root"))
    refusal = _not_convertible(schema)
    if not refusal:
        causes.extend(sorted(_invariants(schema, "root", root) + _completeness(schema, root), key=lambda c: c.line()))
    causes.extend(_openapi(schema, root, top=True, meta=""))
    if refusal and not causes:
        # NewStructural's refusals overlap the OpenAPI checks: shown only when those found nothing.
        causes.append(invalid_value(root, "", refusal))
    return causes


# -- validateCustomResourceDefinitionOpenAPISchema ------------------------------------------


def _openapi(s: Mapping[str, Any], path: str, *, top: bool, meta: str) -> Iterator[Cause]:
    """The OpenAPI checks of one schema node and everything under it.

    ``meta``: the top-level property (metadata, apiVersion, kind) this node is in, where
    defaults are not allowed.
    """
    kind = s.get("type")
    if kind == "null":
        yield forbidden_value(f"{path}.type", "type cannot be set to null, use nullable as an alternative")
    elif _set(kind) and kind not in _TYPES:
        yield unsupported_value(f"{path}.type", kind, list(_TYPES))
    if "default" in s and meta:
        yield forbidden_value(f"{path}.default", f"must not be set in top-level {meta}")
    for keyword in _UNSUPPORTED:
        if _set(s.get(keyword)) or (keyword == "$ref" and "$ref" in s):
            yield forbidden_value(f"{path}.{keyword}", f"{keyword} is not supported")
    if isinstance(s.get("items"), list):
        yield forbidden_value(f"{path}.items", "items must be a schema object and not an array")
    if s.get("uniqueItems") is True:
        yield forbidden_value(
            f"{path}.uniqueItems", "uniqueItems cannot be set to true since the runtime complexity becomes quadratic"
        )
    extra = s.get("additionalProperties")
    if extra is not None and _props(s) and (extra is False or isinstance(extra, Mapping)):
        yield forbidden_value(
            f"{path}.additionalProperties", "additionalProperties and properties are mutual exclusive"
        )
    if s.get("x-kubernetes-preserve-unknown-fields") is False:
        yield invalid_value(f"{path}.x-kubernetes-preserve-unknown-fields", False, "must be true or undefined")
    yield from _list_and_map_types(s, path)
    if isinstance(extra, Mapping):
        yield from _openapi(extra, f"{path}.additionalProperties", top=False, meta=meta)
    for name, prop in _props(s).items():
        inner = name if top and name in ("metadata", "apiVersion", "kind") else meta
        yield from _openapi(_map(prop), f"{path}.properties[{name}]", top=False, meta=inner)
    if isinstance(s.get("not"), Mapping):
        yield from _openapi(s["not"], f"{path}.not", top=False, meta=meta)
    for junctor in _JUNCTORS:
        for i, sub in enumerate(s.get(junctor) or []):
            yield from _openapi(_map(sub), f"{path}.{junctor}[{i}]", top=False, meta=meta)
    items = s.get("items")
    if isinstance(items, Mapping):
        yield from _openapi(items, f"{path}.items", top=False, meta=meta)


def _list_and_map_types(s: Mapping[str, Any], path: str) -> Iterator[Cause]:
    list_type = s.get("x-kubernetes-list-type")
    if list_type is not None:
        if s.get("type") != "array":
            detail = "must be array if x-kubernetes-list-type is specified"
            yield (
                invalid_value(f"{path}.type", s["type"], detail)
                if s.get("type")
                else required_value(f"{path}.type", detail)
            )
        if list_type not in ("atomic", "set", "map"):
            yield unsupported_value(f"{path}.x-kubernetes-list-type", list_type, ["atomic", "set", "map"])
        if list_type == "map" and not s.get("x-kubernetes-list-map-keys"):
            yield required_value(
                f"{path}.x-kubernetes-list-map-keys", "must not be empty if x-kubernetes-list-type is map"
            )
    if s.get("x-kubernetes-list-map-keys"):
        if list_type is None:
            yield required_value(
                f"{path}.x-kubernetes-list-type", "must be map if x-kubernetes-list-map-keys is non-empty"
            )
        elif list_type != "map":
            yield invalid_value(
                f"{path}.x-kubernetes-list-type", list_type, "must be map if x-kubernetes-list-map-keys is non-empty"
            )
    map_type = s.get("x-kubernetes-map-type")
    if map_type is not None:
        if s.get("type") != "object":
            detail = "must be object if x-kubernetes-map-type is specified"
            yield (
                invalid_value(f"{path}.type", s["type"], detail)
                if s.get("type")
                else required_value(f"{path}.type", detail)
            )
        if map_type not in ("atomic", "granular"):
            yield unsupported_value(f"{path}.x-kubernetes-map-type", map_type, ["atomic", "granular"])


# -- NewStructural ---------------------------------------------------------------------------


def _not_convertible(s: Mapping[str, Any]) -> str:
    """Why ``NewStructural`` cannot convert ``s`` ("" when it can)."""
    for keyword in ("id", "$schema", "$ref", "patternProperties", "dependencies", "additionalItems", "definitions"):
        if _set(s.get(keyword)) or (keyword == "additionalItems" and keyword in s):
            return f"OpenAPIV3Schema '{keyword.lstrip('$') if keyword == '$schema' else keyword}' is not supported"
    if isinstance(s.get("items"), list):
        return "OpenAPIV3Schema 'items' must be a schema, but is an array"
    if s.get("x-kubernetes-preserve-unknown-fields") is False:
        return "internal error: 'x-kubernetes-preserve-unknown-fields' must be true or undefined"
    children: list[Any] = [*_props(s).values(), s.get("items"), s.get("not"), *(s.get("allOf") or []),
                           *(s.get("anyOf") or []), *(s.get("oneOf") or [])]  # fmt: skip
    extra = s.get("additionalProperties")
    if isinstance(extra, Mapping):
        children.append(extra)
    for child in children:
        if isinstance(child, Mapping):
            found = _not_convertible(child)
            if found:
                return found
    return ""


# -- ValidateStructural: invariants ----------------------------------------------------------


def _invariants(s: Mapping[str, Any], level: Level, path: str) -> list[Cause]:
    causes: list[Cause] = []
    kind = s.get("type") or ""
    items = s.get("items")
    if kind == "array" and items is None:
        causes.append(required_value(f"{path}.items", "must be specified"))
    if isinstance(items, Mapping):
        causes.extend(_invariants(items, "item", f"{path}.items"))
    for name, prop in _props(s).items():
        causes.extend(_invariants(_map(prop), "field", f"{path}.properties[{name}]"))
    extra = s.get("additionalProperties")
    if extra is not None:
        if level == "root":
            causes.append(forbidden_value(f"{path}.additionalProperties", "must not be used at the root"))
        if isinstance(extra, Mapping):
            causes.extend(_invariants(extra, "field", f"{path}.additionalProperties"))
    int_or_string = s.get("x-kubernetes-int-or-string") is True
    preserve = s.get("x-kubernetes-preserve-unknown-fields") is True
    embedded = s.get("x-kubernetes-embedded-resource") is True
    if int_or_string and preserve:
        causes.append(
            invalid_value(
                f"{path}.x-kubernetes-preserve-unknown-fields",
                True,
                "must be false if x-kubernetes-int-or-string is true",
            )
        )
    if int_or_string and embedded:
        causes.append(
            invalid_value(
                f"{path}.x-kubernetes-embedded-resource", True, "must be false if x-kubernetes-int-or-string is true"
            )
        )
    causes.extend(
        _value_validation(s, path, skip_any_of=_any_of_int_or_string(s), skip_first_all_of=_all_of_int_or_string(s))
    )
    if embedded and kind != "object":
        detail = "must be object if x-kubernetes-embedded-resource is true"
        causes.append(invalid_value(f"{path}.type", kind, detail) if kind else required_value(f"{path}.type", detail))
    elif not kind and not int_or_string and not preserve:
        where = {"root": "at the root", "item": "for specified array items", "field": "for specified object fields"}
        causes.append(required_value(f"{path}.type", f"must not be empty {where[level]}"))
    if embedded and extra is not None:
        causes.append(
            forbidden_value(f"{path}.additionalProperties", "must not be used if x-kubernetes-embedded-resource is set")
        )
    if level == "root" and kind and kind != "object":
        causes.append(invalid_value(f"{path}.type", kind, "must be object at the root"))
    check_meta = level == "root" or embedded
    for name in ("kind", "apiVersion"):
        prop = _props(s).get(name)
        if check_meta and isinstance(prop, Mapping) and prop.get("type") != "string":
            causes.append(invalid_value(f"{path}.properties[{name}].type", prop.get("type") or "", "must be string"))
    meta = _props(s).get("metadata")
    if isinstance(meta, Mapping):
        causes.extend(_metadata_invariants(meta, check_meta, level, f"{path}.properties[metadata]"))
    if embedded and not preserve and not _props(s):
        causes.append(
            required_value(
                f"{path}.properties",
                "must not be empty if x-kubernetes-embedded-resource is true without "
                "x-kubernetes-preserve-unknown-fields",
            )
        )
    return causes


def _metadata_invariants(s: Mapping[str, Any], check_meta: bool, level: Level, path: str) -> list[Cause]:
    causes: list[Cause] = []
    if check_meta and s.get("type") != "object":
        causes.append(invalid_value(f"{path}.type", s.get("type") or "", "must be object"))
    if level == "root":
        # Only {type, default, properties: name and/or generateName} may be said about metadata.
        props = set(_props(s))
        rest = {k: v for k, v in s.items() if k not in ("type", "default") and _set(v)}
        if props and props <= {"name", "generateName"}:
            rest.pop("properties", None)
        if rest:
            causes.append(
                forbidden_value(
                    path,
                    "must not specify anything other than name and generateName, but metadata is implicitly specified",
                )
            )
    return causes


def _any_of_int_or_string(s: Mapping[str, Any]) -> bool:
    return s.get("anyOf") == _INT_OR_STRING


def _all_of_int_or_string(s: Mapping[str, Any]) -> bool:
    all_of = s.get("allOf") or []
    return bool(all_of) and isinstance(all_of[0], Mapping) and all_of[0].get("anyOf") == _INT_OR_STRING


def _value_validation(s: Mapping[str, Any], path: str, *, skip_any_of: bool, skip_first_all_of: bool) -> list[Cause]:
    """The value validations of ``s`` (its junctors, recursively) hold no structure."""
    causes: list[Cause] = []
    if not skip_any_of:
        for i, sub in enumerate(s.get("anyOf") or []):
            causes.extend(_nested(_map(sub), f"{path}.anyOf[{i}]", skip_any_of=False))
    for i, sub in enumerate(s.get("allOf") or []):
        causes.extend(_nested(_map(sub), f"{path}.allOf[{i}]", skip_any_of=skip_first_all_of and i == 0))
    for i, sub in enumerate(s.get("oneOf") or []):
        causes.extend(_nested(_map(sub), f"{path}.oneOf[{i}]", skip_any_of=False))
    if isinstance(s.get("not"), Mapping):
        causes.extend(_nested(s["not"], f"{path}.not", skip_any_of=False))
    pattern = s.get("pattern")
    if isinstance(pattern, str) and pattern:
        # Go's regexp is RE2's syntax.
        options = re2.Options()
        options.log_errors = False
        try:
            re2.compile(pattern, options)
        except re2.error as exc:
            detail = exc.args[0] if exc.args else exc
            if isinstance(detail, bytes):
                detail = detail.decode("utf-8", "replace")
            causes.append(
                invalid_value(f"{path}.pattern", pattern, f"must be a valid regular expression, but isn't: {detail}")
            )
    return causes


def _nested(v: Mapping[str, Any], path: str, *, skip_any_of: bool) -> list[Cause]:
    causes = _value_validation(v, path, skip_any_of=skip_any_of, skip_first_all_of=False)
    if isinstance(v.get("items"), Mapping):
        causes.extend(_nested(v["items"], f"{path}.items", skip_any_of=False))
    for name, prop in _props(v).items():
        causes.extend(_nested(_map(prop), f"{path}.properties[{name}]", skip_any_of=False))
    for keyword, detail in _NESTED_FORBIDDEN:
        if _set(v.get(keyword)) or (keyword in ("additionalProperties", "default") and keyword in v):
            causes.append(forbidden_value(f"{path}.{keyword}", detail))
    if "metadata" in _props(v):
        causes.append(forbidden_value(f"{path}.properties[metadata]", "must not be specified in a nested context"))
    return causes


# -- ValidateStructural: completeness --------------------------------------------------------


def _completeness(s: Mapping[str, Any], path: str) -> list[Cause]:
    """Every field a value validation mentions is specified outside of value validations."""
    return _validation_complete(s, s, path, path)


def _validation_complete(v: Mapping[str, Any], s: Mapping[str, Any] | None, s_path: str, v_path: str) -> list[Cause]:
    causes: list[Cause] = []
    clauses: list[tuple[Any, str]] = [(v.get("not"), f"{v_path}.not")] if isinstance(v.get("not"), Mapping) else []
    for junctor in _JUNCTORS:
        clauses.extend((sub, f"{v_path}.{junctor}[{i}]") for i, sub in enumerate(v.get(junctor) or []))
    for sub, sub_path in clauses:
        causes.extend(_nested_complete(_map(sub), s, s_path, sub_path))
    return causes


def _nested_complete(v: Mapping[str, Any], s: Mapping[str, Any] | None, s_path: str, v_path: str) -> list[Cause]:
    if s is None:
        return [required_value(s_path, f"because it is defined in {v_path}")]
    causes = _validation_complete(v, s, s_path, v_path)
    if isinstance(v.get("items"), Mapping):
        items = s.get("items")
        causes.extend(
            _nested_complete(
                v["items"], items if isinstance(items, Mapping) else None, f"{s_path}.items", f"{v_path}.items"
            )
        )
    for name, prop in _props(v).items():
        known = _props(s).get(name)
        if not isinstance(known, Mapping):
            causes.append(
                required_value(f"{s_path}.properties[{name}]", f"because it is defined in {v_path}.properties[{name}]")
            )
        else:
            causes.extend(
                _nested_complete(_map(prop), known, f"{s_path}.properties[{name}]", f"{v_path}.properties[{name}]")
            )
    return causes
