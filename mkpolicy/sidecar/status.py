"""Kubernetes ``Status`` error bodies, as the API server sends them and clients parse them."""

from __future__ import annotations

from typing import Any

#: HTTP code -> the Status ``reason`` the API server uses for it (apimachinery pkg/apis/meta/v1/types.go).
REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    502: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class StatusError(Exception):
    """An error answered to the client as a Kubernetes ``Status`` (Kueue retries on these)."""

    def __init__(self, code: int, message: str, reason: str | None = None, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or REASONS.get(code, "InternalError")
        self.details = details

    def body(self) -> dict[str, Any]:
        """The ``Status`` object."""
        return status_body(self.code, self.message, self.reason, self.details)


def status_body(
    code: int, message: str, reason: str | None = None, details: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A ``v1 Status`` failure object."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason or REASONS.get(code, "InternalError"),
        "code": code,
    }
    if details:
        body["details"] = details
    return body
