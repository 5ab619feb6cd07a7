"""Structured JSON logs, one object per line, without secrets.

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
    """Send the ``mkpolicy`` loggers to ``stream`` (stderr) as JSON at ``level``."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger("mkpolicy")
    for old in list(root.handlers):
        if isinstance(old.formatter, JsonFormatter):
            root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    root.propagate = False
    # aiohttp's access log duplicates ours; its errors still go through the root logger.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


def fields(**values: Any) -> dict[str, Any]:
    """``extra=`` for a log call carrying ``values`` as JSON fields."""
    return {"fields": values}
