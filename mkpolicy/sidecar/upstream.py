"""The connection from the sidecar to one real worker API server.

Responses are never decompressed or re-encoded here (``auto_decompress=False``) and
no header is added that the client did not send, so pass-through is byte-for-byte.
"""

from __future__ import annotations

import aiohttp
from multidict import CIMultiDict

from mkpolicy.kube.rest import RestConfig, TokenSource

#: Headers that belong to one hop only (RFC 9110 §7.6.1), plus those the proxy sets itself.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)

#: aiohttp would otherwise add these when the client did not send them.
SKIP_AUTO = ("Accept", "Accept-Encoding", "User-Agent", "Content-Type")


class Upstream:
    """A pooled HTTPS client for one worker, authenticating as the worker kubeconfig says."""

    def __init__(self, name: str, config: RestConfig) -> None:
        self.name = name
        self.config = config
        self._tokens = TokenSource(config)
        self._ssl = config.ssl_context()
        self._session: aiohttp.ClientSession | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        """The connection pool (created on first use, in the running loop)."""
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(ssl=self._ssl if self._ssl is not None else False, limit=256)
            self._session = aiohttp.ClientSession(
                connector=connector,
                auto_decompress=False,
                skip_auto_headers=SKIP_AUTO,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
            )
        return self._session

    def url(self, path_qs: str) -> str:
        """The worker URL of a request path (with its query string)."""
        return self.config.server + path_qs

    def headers(self, incoming: CIMultiDict[str], *, force_json: bool = False) -> CIMultiDict[str]:
        """Request headers for the worker: the client's, minus hop-by-hop and its credentials, plus ours.

        ``force_json`` asks for uncompressed JSON (policy kinds are decoded and re-encoded).
        """
        out: CIMultiDict[str] = CIMultiDict()
        connection_tokens = {t.strip().lower() for t in incoming.get("Connection", "").split(",") if t.strip()}
        for key, value in incoming.items():
            low = key.lower()
            if low in HOP_BY_HOP or low in connection_tokens or low == "authorization":
                continue
            if force_json and low in ("accept", "accept-encoding"):
                continue
            out.add(key, value)
        if force_json:
            out["Accept"] = "application/json"
        out.update(self._tokens.headers())
        return out

    async def close(self) -> None:
        """Close the connection pool."""
        if self._session is not None:
            await self._session.close()
            self._session = None
