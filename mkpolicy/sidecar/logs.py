"""The sidecar's JSON logs: :mod:`mkpolicy.jsonlogs`, shared with ``mkpolicy controller``."""

from __future__ import annotations

from mkpolicy.jsonlogs import SECRET_FIELDS, JsonFormatter, fields, plain_error, setup_logging

__all__ = ["SECRET_FIELDS", "JsonFormatter", "fields", "plain_error", "setup_logging"]
