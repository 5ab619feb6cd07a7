"""JSON logs: one object per line, extra fields, secrets masked."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from mkpolicy.sidecar.logs import fields, setup_logging
from mkpolicy.sidecar.metrics import Metrics


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    before = (list(root.handlers), root.level)
    yield
    logging.captureWarnings(False)
    root.handlers[:] = before[0]
    root.setLevel(before[1])


def test_json_lines_with_fields_and_redaction() -> None:
    stream = io.StringIO()
    setup_logging("debug", stream)
    log = logging.getLogger("mkpolicy.sidecar.test")
    log.info("hello %s", "world", extra=fields(cluster="worker1", token="s3cret", Authorization="Bearer x"))
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("failed")
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert lines[0]["msg"] == "hello world" and lines[0]["level"] == "info"
    assert lines[0]["cluster"] == "worker1"
    assert lines[0]["token"] == "<redacted>" and lines[0]["Authorization"] == "<redacted>"
    assert "s3cret" not in stream.getvalue()
    assert lines[1]["error"] == "ValueError: boom"
    assert lines[0]["ts"].endswith("Z")


def test_library_logs_and_warnings_are_json_too() -> None:
    """Nothing reaches stderr in another format: aiohttp's and asyncio's errors, Python warnings."""
    import warnings

    stream = io.StringIO()
    setup_logging("info", stream)
    logging.getLogger("asyncio").error("Task exception was never retrieved")
    logging.getLogger("aiohttp.server").info("not shown: libraries log warnings and above")
    warnings.showwarning("deprecated thing", DeprecationWarning, "lib.py", 1)  # what warnings.warn calls
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [(line["logger"], line["level"]) for line in lines] == [("asyncio", "error"), ("py.warnings", "warning")]
    assert "deprecated thing" in lines[1]["msg"]


def test_metrics_exposition_names() -> None:
    metrics = Metrics()
    metrics.requests.labels("worker1", "p", "get", "200").inc()
    metrics.transform_seconds.labels("worker1", "p", "sync").observe(0.001)
    text = metrics.exposition().decode()
    assert 'mkpolicy_sidecar_requests_total{cluster="worker1",code="200",policy="p",verb="get"} 1.0' in text
    assert "mkpolicy_sidecar_transform_duration_seconds_bucket" in text
