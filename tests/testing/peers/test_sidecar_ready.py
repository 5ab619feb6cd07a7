"""``http_ok``: a readiness endpoint's failing checks become the error a giving-up wait quotes."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from mkpolicy.testing.peers.processes import PeerStartError, Process, wait_until
from mkpolicy.testing.peers.sidecar import NotReady, http_ok

BODY = {
    "/ready": (200, "ok policies\n"),
    "/mkpolicy": (
        503,
        "ok policies\nfail pending batchrun (BatchRun.v1alpha1.batch.example.com): the manager cluster "
        "does not serve this kind\nok worker worker1\n",
    ),
    "/kubernetes": (500, "[+]ping ok\n[-]webhook failed: reason withheld\nreadyz check failed\n"),
    "/other": (503, "  service unavailable  \n"),
}


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            code, text = BODY[self.path]
            self.send_response(code)
            self.end_headers()
            self.wfile.write(text.encode())

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


@pytest.mark.parametrize(("path", "message"), [
    ("/mkpolicy", "503: fail pending batchrun (BatchRun.v1alpha1.batch.example.com): the manager cluster does not "
                  "serve this kind"),
    ("/kubernetes", "500: [-]webhook failed: reason withheld"),
    ("/other", "503: service unavailable"),
])  # fmt: skip
def test_a_failing_answer_says_what_fails(url: str, path: str, message: str) -> None:
    with pytest.raises(NotReady) as info:
        http_ok(url + path)
    assert str(info.value) == message


def test_ready(url: str) -> None:
    assert http_ok(url + "/ready") is True


def test_a_wait_that_gives_up_quotes_the_failing_checks(url: str, tmp_path: Path) -> None:
    sleeper = Process("sleeper", ["sleep", "30"], tmp_path / "sleeper.log").start()
    try:
        with pytest.raises(PeerStartError) as info:
            wait_until(sleeper, lambda: http_ok(url + "/mkpolicy"), "the sidecar's /readyz", 0.5)
        assert "last error: NotReady: 503: fail pending batchrun" in str(info.value)
    finally:
        sleeper.stop()
