"""Connection settings for one Kubernetes API server, and the TLS context to reach it.

A :class:`RestConfig` comes from a kubeconfig (:func:`mkpolicy.kube.kubeconfig.rest_config`)
or from the pod's service account (:func:`in_cluster_config`). Secrets it holds are
never part of its ``repr``.
"""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
import time
from dataclasses import dataclass, field
from urllib.parse import quote, unquote, urlsplit

from mkpolicy.errors import Location, MkpolicyError

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


class RestConfigError(MkpolicyError):
    """Connection settings cannot be built (no in-cluster environment, bad PEM data...)."""


@dataclass(frozen=True)
class RestConfig:
    """Where an API server is and how to authenticate to it."""

    server: str
    ca_pem: bytes | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    token_file: str | None = None
    client_cert_pem: bytes | None = field(default=None, repr=False)
    client_key_pem: bytes | None = field(default=None, repr=False)
    insecure: bool = False
    tls_server_name: str | None = None
    namespace: str | None = None
    context: str | None = None
    #: The kubeconfig's ``proxy-url`` (http, https or socks5 as client-go accepts it); the sidecar's
    #: pool tunnels through ``http://`` proxies (CONNECT). May carry credentials: not in the repr.
    proxy_url: str | None = field(default=None, repr=False)

    @property
    def uses_tls(self) -> bool:
        """Whether the server URL is ``https``."""
        return self.server.lower().startswith("https://")

    def ssl_context(self) -> ssl.SSLContext | None:
        """A client TLS context trusting ``ca_pem`` (or the system roots), with the client certificate if any."""
        if not self.uses_tls:
            return None
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        if self.ca_pem:
            try:
                ctx.load_verify_locations(cadata=self.ca_pem.decode("ascii"))
            except (ssl.SSLError, UnicodeDecodeError, ValueError) as exc:
                raise RestConfigError(f"cannot use the CA certificate of {self.server}: {exc}") from None
        if self.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if self.client_cert_pem and self.client_key_pem:
            load_pem_chain(ctx, self.client_cert_pem, self.client_key_pem)
        return ctx


def load_pem_chain(ctx: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    """Load a PEM certificate and key held in memory into ``ctx``.

    ``ssl`` only reads files: the PEM goes to a private temporary directory for the
    duration of the call and is removed right after.
    """
    with tempfile.TemporaryDirectory(prefix="mkpolicy-tls-") as tmp:
        os.chmod(tmp, 0o700)
        cert, key = os.path.join(tmp, "tls.crt"), os.path.join(tmp, "tls.key")
        for path, data in ((cert, cert_pem), (key, key_pem)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        try:
            ctx.load_cert_chain(cert, key)
        except ssl.SSLError as exc:
            raise RestConfigError(f"cannot load the certificate and key: {exc}") from None


def in_cluster_config(service_account_dir: str = SERVICE_ACCOUNT_DIR) -> RestConfig:
    """The API server of the pod this process runs in, with its service-account token.

    The token is read from its file on use (the kubelet rotates it).
    """
    host = os.environ.get("KUBERNETES_SERVICE_HOST")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        raise RestConfigError(
            "not running in a Kubernetes pod (KUBERNETES_SERVICE_HOST is not set); "
            "give the manager a kubeconfig in the sidecar config (manager.kubeconfig)",
            Location(where="manager connection"),
        )
    token_file = os.path.join(service_account_dir, "token")
    ca_file = os.path.join(service_account_dir, "ca.crt")
    try:
        with open(ca_file, "rb") as fh:
            ca_pem = fh.read()
    except OSError as exc:
        raise RestConfigError(f"cannot read the service-account CA {ca_file!r}: {exc.strerror or exc}") from None
    if not os.path.exists(token_file):
        raise RestConfigError(f"the service-account token {token_file!r} does not exist")
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    namespace = None
    try:
        with open(os.path.join(service_account_dir, "namespace"), encoding="utf-8") as fh:
            namespace = fh.read().strip() or None
    except OSError:
        pass
    return RestConfig(server=f"https://{host}:{port}", ca_pem=ca_pem, token_file=token_file, namespace=namespace)


class TokenSource:
    """The bearer token of a :class:`RestConfig`: inline, or a file re-read when it changes."""

    def __init__(self, config: RestConfig, recheck_seconds: float = 10.0) -> None:
        self._config = config
        self._recheck = recheck_seconds
        self._token: str | None = config.token
        self._checked = 0.0
        self._mtime = 0.0
        # Basic auth from user info in the server URL, which Go's HTTP client sends when nothing
        # else authenticates (worked out once: it is asked for at every request to a worker).
        parts = urlsplit(config.server)
        self._basic: str | None = None
        if parts.username is not None:
            pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            self._basic = "Basic " + base64.b64encode(pair.encode()).decode("ascii")

    def token(self) -> str | None:
        """The current token (None when the config authenticates otherwise)."""
        path = self._config.token_file
        if path is None:
            return self._token
        now = time.monotonic()
        if self._token is None or now - self._checked >= self._recheck:
            self._checked = now
            try:
                mtime = os.stat(path).st_mtime
                if self._token is None or mtime != self._mtime:
                    with open(path, encoding="utf-8") as fh:
                        self._token = fh.read().strip()
                    self._mtime = mtime
            except OSError as exc:
                if self._token is None:
                    raise RestConfigError(f"cannot read token file {path!r}: {exc.strerror or exc}") from None
        return self._token

    def authorization(self) -> str | None:
        """The ``Authorization`` value: the bearer token, else basic auth from user info in the
        server URL (Go's HTTP client sends that when nothing else authenticates), else None."""
        token = self.token()
        return f"Bearer {token}" if token else self._basic

    def headers(self) -> dict[str, str]:
        """The ``Authorization`` header (empty when nothing authenticates)."""
        value = self.authorization()
        return {"Authorization": value} if value else {}


def resource_path(
    group: str,
    version: str,
    resource: str,
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
) -> str:
    """``/apis/{group}/{version}[/namespaces/{ns}]/{resource}[/{name}[/{subresource}]]``."""
    path = f"/apis/{group}/{version}" if group else f"/api/{version}"
    if namespace:
        path += f"/namespaces/{quote(namespace, safe='')}"
    path += f"/{resource}"
    if name:
        path += f"/{quote(name, safe='')}"
        if subresource:
            path += f"/{subresource}"
    return path
