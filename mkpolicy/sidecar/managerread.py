"""Live reads of single manager objects over the sidecar's own HTTP/1.1 connections.

Every transformed request reads the manager's object (``manager.reads: direct``, the
default, as Kueue reads it: see :mod:`mkpolicy.sidecar.config`). Through aiohttp such a
GET cost about 0.7 ms of CPU on a real kube-apiserver; through the keep-alive pool the
sidecar already uses for workers (:class:`~mkpolicy.sidecar.upstream.Upstream`, the
same request head and answer framing code) about 0.4 ms (bench/README.md, ``--real``).
The answer is decoded as :class:`~mkpolicy.kube.client.KubeClient` decodes it
(``json.loads``), so the object the policy sees is the same.

A manager kubeconfig whose ``proxy-url`` the pool cannot use (an ``https://`` proxy,
which the API client supports) keeps reading through the API client:
:func:`manager_reader` answers None.
"""

from __future__ import annotations

import json
from typing import Any

from mkpolicy.kube.client import ApiError
from mkpolicy.kube.rest import RestConfig
from mkpolicy.sidecar.http1 import HttpError
from mkpolicy.sidecar.relay import AnswerTooLarge, read_answer, send_request
from mkpolicy.sidecar.upstream import Upstream, UpstreamError

#: Seconds for the answer's head and for its whole body (the API client's default total timeout).
TIMEOUT = 30.0
#: Largest manager object read (kube-apiserver's own request limit is 3 MiB; an answer is a little larger).
MAX_OBJECT = 8 * 1024 * 1024


class ManagerReadError(ConnectionError):
    """The manager could not be reached, or broke off (an OSError, as the API client's transport errors are)."""


class ManagerReader:
    """GETs of single objects from the manager's API server on kept-alive connections."""

    def __init__(self, config: RestConfig, user_agent: str) -> None:
        self.upstream = Upstream("manager", config)
        self._extra = (("User-Agent", user_agent),)

    def reconfigure(self, config: RestConfig) -> None:
        """The manager's kubeconfig changed: new connections use ``config`` (ValueError when they cannot)."""
        self.upstream.update_config(config)

    async def get(self, path: str) -> dict[str, Any] | None:
        """The object at ``path``, None when the server answers 404.

        :class:`ApiError` for another error status, :class:`ManagerReadError` when the
        server cannot be reached or its answer is cut or not HTTP. A kept-alive connection
        the server closed before answering is replaced once (a GET is safe to resend).
        """
        head = self.upstream.head("GET", path, [], reencoded=True, extra=self._extra)
        for attempt in range(2):
            try:
                conn = await self.upstream.acquire(fresh=attempt > 0)
            except UpstreamError as exc:
                raise ManagerReadError(f"{exc.reason}: {exc}") from None
            conn.requests += 1
            try:
                await send_request(conn, head, None, None)
                resp = await conn.response_head("GET", TIMEOUT)
                raw = await read_answer(conn, resp, TIMEOUT, MAX_OBJECT, deadline=TIMEOUT)
            except UpstreamError as exc:
                self.upstream.release(conn, False)
                if attempt == 0 and conn.requests > 1 and exc.reason == "read" and not conn.buffer:
                    continue
                raise ManagerReadError(f"{exc.reason}: {exc}") from None
            except HttpError as exc:
                self.upstream.release(conn, False)
                raise ManagerReadError(f"the manager's answer is not valid HTTP: {exc.message}") from None
            except AnswerTooLarge as exc:
                self.upstream.release(conn, False)
                raise ManagerReadError(f"the manager's answer for {path} is too large: {exc}") from None
            except BaseException:
                self.upstream.release(conn, False)
                raise
            self.upstream.release(conn, not resp.close)
            if resp.status == 404:
                return None
            if resp.status >= 300:
                raise ApiError.from_response(resp.status, raw)
            try:
                obj = json.loads(raw)
            except ValueError:
                obj = None
            if not isinstance(obj, dict):
                raise ManagerReadError(f"the manager answered {path} with a body that is not a JSON object")
            return obj
        raise AssertionError("unreachable")  # pragma: no cover

    async def close(self) -> None:
        """Close every connection."""
        await self.upstream.close()


def manager_reader(config: RestConfig, user_agent: str) -> ManagerReader | None:
    """A reader for ``config``, or None when its connections cannot be made by the pool (a proxy it does not speak)."""
    try:
        return ManagerReader(config, user_agent)
    except ValueError:
        return None
