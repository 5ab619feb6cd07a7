"""The request log: what Kueue sent each worker endpoint, one JSON line per request (opt-in).

``logging.requestLog`` in the SidecarConfig turns it on. Each line records a request's
shape, never a secret: the worker, the method, the path and decoded query, the ``Accept``
and ``Content-Type`` headers (no other header: the bearer token is one), the body's
*shape* (its keys and the JSON types of its values, no value), the answer's status code
and when the request started. Watches are logged when they start (``code`` null: a
stream); every other request when its answer is complete. The file is opened for
appending, so a restarted sidecar continues it; after ``maxEntries`` lines (per run) it
stops, with a last line saying so.

It is what a test compares Kueue's model with real Kueue by (``tests/peers/
test_model_vs_real.py``), and what an operator reads to see exactly which requests a
Kueue version sends.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from typing import IO, Any
from urllib.parse import parse_qs

from mkpolicy.sidecar.config import ConfigError
from mkpolicy.sidecar.http1 import RequestHead
from mkpolicy.sidecar.logs import fields

log = logging.getLogger("mkpolicy.sidecar.requestlog")

#: Bodies larger than this are logged as ``"<large>"`` (their shape is not worth the memory).
MAX_SHAPED_BODY = 1024 * 1024


_SCALARS = {bool: "boolean", int: "number", float: "number", str: "string"}


def shape(value: Any) -> Any:
    """A JSON value's shape: objects keep their keys (sorted), arrays the distinct shapes of
    their items, scalars become their JSON type name (``string``, ``number``, ``boolean``, ``null``)."""
    if isinstance(value, dict):
        return {key: shape(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        out: list[Any] = []
        for item in value:
            s = shape(item)
            if s not in out:
                out.append(s)
        return out
    return _SCALARS.get(type(value), "null")


def body_shape(body: bytes, content_type: str | None) -> Any:
    """The shape of a request body: of its JSON, else ``"<media type>"`` (protobuf, CBOR, YAML) or
    ``"<large>"``; None for no body."""
    if not body:
        return None
    if len(body) > MAX_SHAPED_BODY:
        return "<large>"
    media = (content_type or "").split(";")[0].strip().lower()
    if media.endswith("json"):
        try:
            return shape(json.loads(body))
        except ValueError:
            return "<invalid json>"
    return f"<{media or 'no content type'}>"


class RequestLog:
    """An append-only JSON-lines file of request shapes, at most ``max_entries`` lines per sidecar
    run; it stops (the requests go on) when the file cannot be written."""

    def __init__(self, path: str, max_entries: int) -> None:
        self.path = path
        self.max_entries = max_entries
        self.entries = 0
        self._file: IO[str] | None = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 (closed by close())

    def write(self, cluster: str, head: RequestHead, code: int | None, body: bytes | None, started: float) -> None:
        """Log one request (``started``: its ``time.perf_counter()`` at arrival)."""
        if self._file is None:
            return
        if self.entries >= self.max_entries:
            self._file.write(json.dumps({"truncated": True, "maxEntries": self.max_entries}) + "\n")
            self.close()
            return
        self.entries += 1
        headers = head.fields
        entry = {
            "t": round(time.time() - (time.perf_counter() - started), 6),
            "cluster": cluster,
            "method": head.method,
            "path": head.path,
            "query": parse_qs(head.query, keep_blank_values=True),
            "accept": headers.get("accept"),
            "contentType": headers.get("content-type"),
            "body": body_shape(body or b"", headers.get("content-type")),
            "code": code,
        }
        try:
            self._file.write(json.dumps(entry, separators=(",", ":")) + "\n")
        except OSError as exc:  # (a full disk): the log stops, the requests go on
            log.warning("request log stopped", extra=fields(file=self.path, error=str(exc)))
            self.close()

    def close(self) -> None:
        """Close the file (nothing more is logged)."""
        file, self._file = self._file, None
        if file is not None:
            with contextlib.suppress(OSError):  # what could not be written is lost
                file.close()


def open_request_log(path: str, max_entries: int) -> RequestLog:
    """The request log at ``path``; ConfigError when the file cannot be opened for appending."""
    try:
        return RequestLog(path, max_entries)
    except OSError as exc:
        raise ConfigError(
            f"logging.requestLog.file: expected a file the sidecar can append to; found {path!r}: {exc.strerror}"
        ) from None


def read_log(path: str) -> list[dict[str, Any]]:
    """The entries of a request log, in the order their requests started."""
    with open(path, encoding="utf-8") as f:
        entries = [json.loads(line) for line in f if line.strip()]
    return sorted((e for e in entries if "method" in e), key=lambda e: e["t"])
