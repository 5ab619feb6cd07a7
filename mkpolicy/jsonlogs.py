"""Structured JSON logs, one object per line, without secrets (the sidecar and the controller).

Extra fields passed as ``logger.info(msg, extra={"fields": {...}})`` are added to the
line. Field names that could carry credentials are masked whatever their value.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, TextIO

#: Field names never logged in clear.
SECRET_FIELDS = frozenset({"authorization", "token", "password", "kubeconfig", "client-key-data", "key", "ca_key"})


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON object: ts, level, logger, msg, then the extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            for key, value in fields.items():
                line[key] = "<redacted>" if key.lower() in SECRET_FIELDS else value
        if record.exc_info and record.exc_info[0] is not None:
            line["error"] = f"{record.exc_info[0].__name__}: {record.exc_info[1]}"
        return json.dumps(line, default=str, separators=(",", ":"))


def setup_logging(level: str = "info", stream: TextIO | None = None) -> None:
    """Send every log line of the process to ``stream`` (stderr) as JSON.

    ``mkpolicy`` loggers log at ``level``; the libraries' (aiohttp, asyncio) and Python's
    warnings at warning and above, as JSON too: nothing reaches stderr in another format.
    """
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    ours = logging.getLogger("mkpolicy")
    for logger in (root, ours):
        for old in list(logger.handlers):
            if isinstance(old.formatter, JsonFormatter):
                logger.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    ours.setLevel(level.upper())
    ours.propagate = True
    # Re-armed: captureWarnings(True) does nothing when an earlier call is still recorded,
    # even if warnings.showwarning was replaced since (by warnings.catch_warnings, pytest).
    logging.captureWarnings(False)
    logging.captureWarnings(True)
    # aiohttp's access log duplicates ours.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


def plain_error(exc: BaseException) -> str:
    """What went wrong, in words: no Python reprs (``OSError``'s address tuples, exception classes).

    ``MkpolicyError`` and ``ApiError``: their message; connection failures: the host and the
    system's reason; timeouts: "timed out".
    """
    message = getattr(exc, "message", None)
    if isinstance(message, str) and message:
        return message
    if isinstance(exc, TimeoutError):
        return "timed out"
    host = getattr(exc, "host", None)
    cause = getattr(exc, "os_error", None)
    if host is not None and isinstance(cause, OSError):  # aiohttp's ClientConnectorError
        return f"cannot connect to {host}:{getattr(exc, 'port', '')}: {cause.strerror or type(cause).__name__}"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror if not exc.filename else f"{exc.filename}: {exc.strerror}"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def fields(**values: Any) -> dict[str, Any]:
    """``extra=`` for a log call carrying ``values`` as JSON fields."""
    return {"fields": values}
