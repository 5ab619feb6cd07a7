"""The bench's baseline: a Go reverse proxy (``peers/goproxy``) in front of one API server.

What a user would otherwise write instead of the sidecar: ``httputil.ReverseProxy``, TLS on
both legs, the client's bearer token checked and swapped for the upstream's credentials,
nothing transformed. Built through :mod:`.build`'s cache like the other peers (seconds: the
standard library only). Its own CA, serving pair and token are made at start.

::

    with GoProxy(folder, kube.url, ca_pem, client_cert=(cert_pem, key_pem)) as proxy:
        GET proxy.url + "/version" with "Authorization: Bearer " + proxy.token
"""

from __future__ import annotations

import secrets
import socket
import ssl
from pathlib import Path
from types import TracebackType

from mkpolicy.kube.certs import make_ca, make_serving_cert
from mkpolicy.testing.peers import build
from mkpolicy.testing.peers.pki import write_private
from mkpolicy.testing.peers.processes import Process, free_port, wait_until

#: Generous: the binary starts in milliseconds.
READY_TIMEOUT = 30.0


class GoProxy:
    """The Go proxy for ``upstream`` (its CA ``upstream_ca``), authenticating upstream with
    ``client_cert`` (PEM certificate and key, as the peers' admin kubeconfigs do); files and log in
    ``folder``."""

    def __init__(
        self,
        folder: Path,
        upstream: str,
        upstream_ca: bytes,
        *,
        client_cert: tuple[bytes, bytes],
    ) -> None:
        self.folder = folder
        self.port = free_port()
        self.token = secrets.token_urlsafe(32)
        self.ca = make_ca("goproxy-ca")
        pair = make_serving_cert(self.ca, ["127.0.0.1"], "goproxy")
        files = {
            "tls.crt": pair.cert_pem, "tls.key": pair.key_pem, "token": self.token.encode(),
            "upstream-ca.crt": upstream_ca, "upstream.crt": client_cert[0], "upstream.key": client_cert[1],
        }  # fmt: skip
        paths = {name: write_private(folder / name, data) for name, data in files.items()}
        argv = [
            str(build.binary_path(build.goproxy())), f"-listen=127.0.0.1:{self.port}",
            f"-cert={paths['tls.crt']}", f"-key={paths['tls.key']}", f"-token-file={paths['token']}",
            f"-upstream={upstream}", f"-upstream-ca={paths['upstream-ca.crt']}",
            f"-upstream-cert={paths['upstream.crt']}", f"-upstream-key={paths['upstream.key']}",
        ]  # fmt: skip
        self.process = Process("goproxy", argv, folder / "goproxy.log")

    @property
    def url(self) -> str:
        """``https://127.0.0.1:<port>``."""
        return f"https://127.0.0.1:{self.port}"

    def client_tls(self) -> ssl.SSLContext:
        """A client TLS context trusting the proxy's CA."""
        return ssl.create_default_context(cadata=self.ca.cert_pem.decode())

    def _listening(self) -> bool:
        with socket.create_connection(("127.0.0.1", self.port), timeout=2):
            return True

    def start(self) -> GoProxy:
        """Build the binary when the cache lacks it, start it, wait until it accepts connections."""
        build.ensure([build.goproxy()])
        self.process.start()
        wait_until(self.process, self._listening, f"goproxy listening on {self.url}", READY_TIMEOUT)
        return self

    def stop(self) -> None:
        """Stop it."""
        self.process.stop()

    def __enter__(self) -> GoProxy:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
