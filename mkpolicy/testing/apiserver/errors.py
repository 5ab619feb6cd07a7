"""API errors as Kubernetes ``Status`` bodies.

Every failure the loopback server reports is an :class:`ApiError`: an HTTP code, the
``reason`` Kubernetes uses for it, a message in the wording kube-apiserver uses, and the
``details`` clients look at (``name``, ``group``, ``kind``, ``causes``,
``retryAfterSeconds``). :meth:`ApiError.status` renders the body with the same key order
as kube-apiserver, so snapshots of error bodies read like the real thing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mkpolicy.errors import Location, MkpolicyError

#: The largest request body kube-apiserver accepts (``MaxRequestBodyBytes``: 3 MiB).
MAX_BODY_BYTES = 3 * 1024 * 1024

#: The ``reason`` Kubernetes uses for each status code (``metav1.StatusReason*``).
REASONS: dict[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}

#: Default messages, used when an error is made from a bare code (fault injection).
DEFAULT_MESSAGES: dict[int, str] = {
    400: "the server rejected our request for an unknown reason",
    401: "Unauthorized",
    403: "forbidden",
    404: "the server could not find the requested resource",
    405: "the server does not allow this method on the requested resource",
    406: "the server was unable to respond with a content type that the client supports",
    409: "the server reported a conflict",
    410: "the resource version requested is too old",
    413: f"Request entity too large: limit is {MAX_BODY_BYTES}",
    415: "the body of the request was in an unknown format",
    422: "the server rejected our request due to an error in our request",
    429: "Too many requests, please try again later.",
    500: "an error on the server prevented the request from succeeding",
    503: "the server is currently unable to handle the request",
    504: "the server was unable to return a response in the time allotted, but may still be processing the request",
}


@dataclass(frozen=True)
class Cause:
    """One field problem of a 422 ``Invalid`` error (``details.causes[]``).

    ``reason`` is a Kubernetes cause type such as ``FieldValueInvalid``;
    ``message`` is what was expected and what was found.
    """

    reason: str
    field: str
    message: str

    def line(self) -> str:
        """``field: message``, the form kube-apiserver joins into the error message."""
        return f"{self.field}: {self.message}" if self.field else self.message


def invalid_value(field: str, value: Any, detail: str) -> Cause:
    """``field: Invalid value: <value>: detail``."""
    return Cause("FieldValueInvalid", field, f"Invalid value: {_quote(value)}: {detail}")


def required_value(field: str, detail: str = "") -> Cause:
    """``field: Required value[: detail]``."""
    return Cause("FieldValueRequired", field, "Required value" + (f": {detail}" if detail else ""))


def forbidden_value(field: str, detail: str) -> Cause:
    """``field: Forbidden: detail``."""
    return Cause("FieldValueForbidden", field, f"Forbidden: {detail}")


def unsupported_value(field: str, value: Any, supported: Sequence[str]) -> Cause:
    """``field: Unsupported value: <value>: supported values: "a", "b"``."""
    allowed = ", ".join(json.dumps(s) for s in supported)
    return Cause("FieldValueNotSupported", field, f"Unsupported value: {_quote(value)}: supported values: {allowed}")


def too_long(field: str, limit: int) -> Cause:
    """``field: Too long: may not be more than N bytes``."""
    return Cause("FieldValueTooLong", field, f"Too long: may not be more than {limit} bytes")


def _quote(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    text = json.dumps(value, separators=(",", ":"), default=str)
    return text if len(text) <= 200 else text[:197] + "..."


class ApiError(MkpolicyError):
    """A request failed; :meth:`status` is the Kubernetes ``Status`` body to answer with."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str | None = None,
        details: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        location: Location | None = None,
    ) -> None:
        super().__init__(message, location)
        self.code = code
        self.reason = reason if reason is not None else REASONS.get(code, "")
        self.details: dict[str, Any] = dict(details or {})
        self.headers: dict[str, str] = dict(headers or {})

    def status(self) -> dict[str, Any]:
        """The ``Status`` body (key order as kube-apiserver writes it)."""
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:
            body["reason"] = self.reason
        if self.details:
            body["details"] = self.details
        body["code"] = self.code
        return body

    def __repr__(self) -> str:
        return f"ApiError({self.code}, {self.reason!r}, {self.message!r})"


def _details(name: str, group: str, kind: str, **extra: Any) -> dict[str, Any]:
    # kube-apiserver leaves out empty strings (omitempty), so the core group has no "group".
    out: dict[str, Any] = {}
    if name:
        out["name"] = name
    if group:
        out["group"] = group
    if kind:
        out["kind"] = kind
    out.update(extra)
    return out


def _group_resource(group: str, resource: str) -> str:
    return f"{resource}.{group}" if group else resource


def not_found(group: str, resource: str, name: str) -> ApiError:
    """404: ``configmaps "x" not found`` / ``workloads.kueue.x-k8s.io "x" not found``."""
    return ApiError(
        404,
        f'{_group_resource(group, resource)} "{name}" not found',
        details=_details(name, group, resource),
    )


def resource_not_found(path: str = "") -> ApiError:
    """404 for a URL that names no known resource (unknown group, version or resource)."""
    message = DEFAULT_MESSAGES[404]
    return ApiError(404, message, details={"causes": [{"message": f"no resource is served at {path}"}]} if path else {})


def already_exists(group: str, resource: str, name: str) -> ApiError:
    """409 AlreadyExists: ``configmaps "x" already exists``."""
    return ApiError(
        409,
        f'{_group_resource(group, resource)} "{name}" already exists',
        reason="AlreadyExists",
        details=_details(name, group, resource),
    )


def conflict(group: str, resource: str, name: str, why: str) -> ApiError:
    """409 Conflict: ``Operation cannot be fulfilled on configmaps "x": <why>``."""
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {_group_resource(group, resource)} "{name}": {why}',
        details=_details(name, group, resource),
    )


#: The text kube-apiserver gives for a stale ``resourceVersion``.
MODIFIED_WHY = "the object has been modified; please apply your changes to the latest version and try again"


def invalid(group: str, kind: str, name: str, causes: Sequence[Cause]) -> ApiError:
    """422 Invalid: ``Kind.group "name" is invalid: field: problem`` with every cause."""
    lines = [c.line() for c in causes]
    joined = lines[0] if len(lines) == 1 else "[" + ", ".join(lines) + "]"
    qualified = f"{kind}.{group}" if group else kind
    return ApiError(
        422,
        f'{qualified} "{name}" is invalid: {joined}',
        details=_details(
            name,
            group,
            kind,
            causes=[{"reason": c.reason, "message": c.message, "field": c.field} for c in causes],
        ),
    )


def bad_request(message: str) -> ApiError:
    """400 BadRequest with ``message``."""
    return ApiError(400, message)


def unauthorized() -> ApiError:
    """401: what kube-apiserver answers to a missing or wrong bearer token."""
    return ApiError(401, "Unauthorized")


def forbidden(message: str) -> ApiError:
    """403 Forbidden with ``message``."""
    return ApiError(403, message)


def method_not_allowed(method: str, path: str) -> ApiError:
    """405: the method is not served on that URL."""
    return ApiError(405, f"{DEFAULT_MESSAGES[405]} ({method} {path})")


def not_acceptable(accept: str) -> ApiError:
    """406: none of the media types in ``Accept`` is served (only JSON is)."""
    return ApiError(
        406,
        f"only the following media types are accepted: application/json; the request asked for {accept!r}",
    )


def unsupported_media_type(found: str, accepted: Sequence[str]) -> ApiError:
    """415: the body's ``Content-Type`` is not one the verb accepts."""
    return ApiError(
        415,
        f"the body of the request was in an unknown format - accepted media types include: "
        f"{', '.join(accepted)}; found {found or 'no Content-Type'}",
    )


def too_large(limit: int = MAX_BODY_BYTES) -> ApiError:
    """413: the request body is larger than ``limit`` bytes."""
    return ApiError(413, f"Request entity too large: limit is {limit}")


def expired(message: str) -> ApiError:
    """410 Expired: a resource version or continue token older than the kept history."""
    return ApiError(410, message)


def too_many_requests(retry_after: int = 1, message: str | None = None) -> ApiError:
    """429 with ``Retry-After``, as priority-and-fairness answers under load."""
    return ApiError(
        429,
        message or DEFAULT_MESSAGES[429],
        details={"retryAfterSeconds": retry_after},
        headers={"Retry-After": str(retry_after)},
    )


def internal(message: str) -> ApiError:
    """500 InternalError: ``Internal error occurred: <message>``."""
    return ApiError(500, f"Internal error occurred: {message}", details={"causes": [{"message": message}]})


def from_code(code: int, message: str | None = None, reason: str | None = None) -> ApiError:
    """An error for an arbitrary code with the usual reason and message (fault injection)."""
    if code == 429:
        err = too_many_requests(1, message)
        if reason:
            err.reason = reason
        return err
    if code == 500 and message is None:
        return internal("injected fault")
    return ApiError(code, message or DEFAULT_MESSAGES.get(code, f"injected fault ({code})"), reason=reason)
