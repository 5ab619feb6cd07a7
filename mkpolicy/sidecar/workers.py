"""Each worker's real kubeconfig, kept current, and the worker's state for the probes.

A worker's kubeconfig comes from a file or from a Secret in the manager cluster. Either
is followed while the sidecar runs:

* a file (and the client certificate and key files it names) is checked at every
  reload interval and taken up when its content changes (a rotated token or CA);
* a Secret is watched (a WATCH of that one Secret): a rotation or a GitOps re-apply
  is taken up within the watch's latency, and, when the sidecar wires that Secret, the
  Secret is wired again at once (:mod:`mkpolicy.sidecar.wiring` keeps the new kubeconfig
  as the real one).

A new kubeconfig is held to Kueue's rules and must not point at the sidecar itself;
when it passes, :meth:`Upstream.update_config` makes new connections use it. When it
does not, or cannot be read, the worker is *refused*: its endpoint answers every request
with a ``503`` Status naming the reason, ``/readyz?verbose`` shows it, and the other
workers keep serving. Nothing about one worker aborts the sidecar's start.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import random
import time
from collections.abc import Callable, Coroutine
from typing import Any

import aiohttp

from mkpolicy.kube.client import ApiError, Gone, KubeClient
from mkpolicy.kube.kubeconfig import (
    KUBECONFIG_SECRET_KEY,
    KubeconfigError,
    named_files,
    parse_kubeconfig,
    rest_config,
)
from mkpolicy.kube.rest import RestConfig, RestConfigError
from mkpolicy.sidecar.config import Limits, Worker
from mkpolicy.sidecar.logs import fields, plain_error
from mkpolicy.sidecar.metrics import Metrics
from mkpolicy.sidecar.upstream import Upstream
from mkpolicy.sidecar.wiring import secret_path, split_secret

log = logging.getLogger("mkpolicy.sidecar.workers")

#: Seconds the first read of a Secret may take at start (the watch keeps trying after).
READ_TIMEOUT = 10.0
#: How long a transport failure shows in /readyz after the last one (seconds).
UNREACHABLE_SHOWN = 60.0
#: Delays between attempts to watch a Secret again after an error (seconds).
BACKOFF = (0.2, 0.5, 1.0, 2.0, 5.0)
#: A server that cannot be used: the endpoint of a refused worker never connects anywhere.
_NOWHERE = RestConfig(server="https://worker-refused.invalid")

#: Called when a wired Secret should be wired again: (worker name, Secret name).
Rewire = Callable[[str, str], Coroutine[Any, Any, object]]


class WorkerLink:
    """One worker: its upstream pool, where its kubeconfig comes from, and whether it is served."""

    def __init__(
        self,
        worker: Worker,
        namespace: str,
        own: Callable[[], frozenset[str]],
        metrics: Metrics,
        limits: Limits | None = None,
    ) -> None:
        self.worker = worker
        self.name = worker.name
        self.namespace = namespace
        self.own = own
        self.metrics = metrics
        self.upstream = Upstream(worker.name, _NOWHERE, limits)
        #: Why the endpoint cannot serve (None: it serves).
        self.problem: str | None = "its kubeconfig has not been read yet"
        #: The last transport failure and when (monotonic seconds).
        self.failure: tuple[str, float] | None = None
        #: Digest of the kubeconfig in use (and of the files it names).
        self.digest = ""
        #: The Secret wiring points at the sidecar (when this sidecar wires it).
        self.wired_secret: str | None = None
        #: The resourceVersion of the source Secret as :meth:`load` read it (its watch starts there).
        self._loaded_version = ""
        self.rewire: Rewire | None = None
        #: Called when the worker becomes refused: ends the watches Kueue holds on its endpoint.
        self.on_refused: Callable[[], None] | None = None
        #: The kubeconfig last fingerprinted and the files it names (a polled file is parsed only when it changes).
        self._named: tuple[bytes, list[str]] = (b"", [])
        self._tasks: list[asyncio.Task[Any]] = []
        metrics.worker_up.labels(self.name).set_function(self.up)
        source = worker.kubeconfig
        if source.file is not None:
            self.source = source.file
        else:
            assert source.secret is not None
            self.source = f"Secret {namespace}/{source.secret.name} key {source.secret.key}"

    # -- state ---------------------------------------------------------------------------------
    def readiness(self) -> str:
        """This worker's /readyz line (``warn`` lines do not fail readiness: the others keep serving)."""
        if self.problem is not None:
            return f"warn worker {self.name}: refused: {self.problem}"
        if self.failure is not None and time.monotonic() - self.failure[1] < UNREACHABLE_SHOWN:
            ago = time.monotonic() - self.failure[1]
            return f"warn worker {self.name}: unreachable {ago:.0f}s ago: {self.failure[0]}"
        return f"ok worker {self.name}"

    def up(self) -> float:
        """``mkpolicy_sidecar_worker_up``: 1 when the kubeconfig is accepted and the worker answered
        since the last request that could not reach it, else 0."""
        if self.problem is not None:
            return 0.0
        if self.failure is not None and self.upstream.answered_at <= self.failure[1]:
            return 0.0
        return 1.0

    def failed(self, message: str) -> None:
        """A request could not reach the worker."""
        self.failure = (message, time.monotonic())

    def _refuse(self, problem: str, *, read: bool = True) -> None:
        """The worker cannot be served; ``read``: its kubeconfig could not be read (read again next time)."""
        if read:
            self.digest = ""
        first = self.problem != problem
        self.problem = problem
        if first:
            log.error("worker refused", extra=fields(cluster=self.name, source=self.source, error=problem))
            # Kueue keeps a worker Active while its watches stay open, and reconnects only when one
            # ends or its kubeconfig changes (v0.19.2 multikueuecluster.go
            # updateConfigAndRefreshWatchers): a wired Secret put back before Kueue read the refused
            # one changes nothing for Kueue, so the watches end here and its reconnect meets the 503.
            if self.on_refused is not None:
                self.on_refused()

    # -- taking up a kubeconfig -------------------------------------------------------------------
    def _named_contents(self, raw: bytes, base_dir: str | None) -> list[bytes]:
        """The contents of the files the kubeconfig ``raw`` names (their changes count too); ``raw`` is
        parsed only when it differs from the last one (a file is polled every reload interval)."""
        if raw != self._named[0]:
            try:
                paths = named_files(parse_kubeconfig(raw), base_dir)
            except KubeconfigError:
                paths = []
            self._named = (raw, paths)
        out: list[bytes] = []
        for full in self._named[1]:
            try:
                with open(full, "rb") as fh:
                    out.append(fh.read())
            except OSError:
                out.append(b"<unreadable>")
        return out

    def take(self, raw: bytes | None, base_dir: str | None) -> bool:
        """Take up the kubeconfig ``raw`` (None: there is none); True when it changed what is used."""
        if raw is None:
            self._refuse(f"{self.source} holds no kubeconfig")
            return False
        files = self._named_contents(raw, base_dir)
        fingerprint = hashlib.sha256(raw + b"".join(files)).hexdigest()
        if fingerprint == self.digest:
            return False
        first = not self.digest
        self.digest = fingerprint
        try:
            rest = rest_config(parse_kubeconfig(raw, self.source), self.source, base_dir=base_dir)
            if rest.server.rstrip("/") in self.own():
                raise KubeconfigError(f"its server {rest.server} is this sidecar's endpoint, not the worker")
            self.upstream.update_config(rest)
        except KubeconfigError as exc:
            self.metrics.kubeconfig_reloads.labels(self.name, "refused").inc()
            self._refuse(f"{self.source}: {'; '.join(exc.violations) if exc.violations else exc.message}", read=False)
            return False
        except (RestConfigError, ValueError) as exc:
            self.metrics.kubeconfig_reloads.labels(self.name, "refused").inc()
            self._refuse(f"{self.source}: {plain_error(exc)}", read=False)
            return False
        self.problem = None
        self.failure = None
        if not first:
            self.metrics.kubeconfig_reloads.labels(self.name, "ok").inc()
        log.info(
            "worker kubeconfig in use" if first else "worker kubeconfig changed; new connections use it",
            extra=fields(cluster=self.name, source=self.source, server=_server_of(rest)),
        )
        return True

    async def load(self, client: KubeClient | None) -> None:
        """Read the kubeconfig once (at start); problems make the worker refused, never raise."""
        source = self.worker.kubeconfig
        if source.file is not None:
            raw, base = _read_file(source.file, self._refuse)
            if raw is not None:  # (unreadable: refused with the reason already)
                self.take(raw, base)
            return
        assert source.secret is not None
        if client is None:
            self._refuse("no manager connection to read its Secret")
            return
        try:
            async with asyncio.timeout(READ_TIMEOUT):  # an unreachable manager must not hold up the start
                secret = await client.get(secret_path(self.namespace, source.secret.name))
        except (ApiError, aiohttp.ClientError, OSError, TimeoutError) as exc:
            self._refuse(f"cannot read {self.source}: {plain_error(exc)}")
            return
        self._loaded_version = _resource_version(secret)
        self.on_secret(secret)

    def on_secret(self, secret: dict[str, Any]) -> None:
        """A (new version of the) Secret the kubeconfig comes from, or the wired one."""
        source = self.worker.kubeconfig
        name = str((secret.get("metadata") or {}).get("name") or "")
        if source.secret is not None and name == source.secret.name:
            raw, ours = split_secret(secret, source.secret.key, self.own())
            self.take(raw, None)
            rewire = not ours
        else:
            raw = (secret.get("data") or {}).get(KUBECONFIG_SECRET_KEY)
            rewire = raw is not None and not split_secret(secret, KUBECONFIG_SECRET_KEY, self.own())[1]
        if rewire and self.rewire is not None and self.wired_secret == name:
            self._start(self.rewire(self.name, name), f"rewire-{self.name}", once=True)

    # -- following changes ---------------------------------------------------------------------------
    def follow(self, client: KubeClient | None, interval: float) -> None:
        """Follow the kubeconfig's source: poll a file, watch a Secret (and the wired one)."""
        source = self.worker.kubeconfig
        if source.file is not None:
            if interval > 0:
                self._start(self._poll(source.file, interval), f"kubeconfig-file-{self.name}")
        elif client is not None and source.secret is not None:
            watch = self._watch(client, source.secret.name, self._loaded_version)
            self._start(watch, f"kubeconfig-secret-{self.name}")

    def follow_wired(self, client: KubeClient, secret: str) -> None:
        """Also watch the Secret wiring points at the sidecar (when it is not the source)."""
        source = self.worker.kubeconfig.secret
        if source is None or source.name != secret:
            self._start(self._watch(client, secret), f"wired-secret-{self.name}")

    def _start(self, coro: Coroutine[Any, Any, object], name: str, *, once: bool = False) -> None:
        task: asyncio.Task[Any] = asyncio.create_task(coro, name=name)
        self._tasks.append(task)
        if once:
            task.add_done_callback(lambda t: self._tasks.remove(t) if t in self._tasks else None)

    async def stop(self) -> None:
        """Stop following; close the worker's connections."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.upstream.close()

    async def _poll(self, path: str, interval: float) -> None:
        base = os.path.dirname(os.path.abspath(path))
        while True:
            await asyncio.sleep(interval)
            raw, _ = _read_file(path, self._refuse)
            if raw is not None:
                self.take(raw, base)

    async def _watch(self, client: KubeClient, name: str, version: str = "") -> None:
        """WATCH one Secret (by field selector, which RBAC with resourceNames allows).

        As client-go's reflector, each watch resumes from the last resourceVersion seen
        (``version``: the one :meth:`load` read); the Secret is read (GET) only when none
        is known: at first, after 410 Gone, after an error.
        """
        failures = 0
        path = secret_path(self.namespace)
        while True:
            try:
                if not version:
                    secret = await client.get(secret_path(self.namespace, name))
                    self.on_secret(secret)
                    version = _resource_version(secret)
                    failures = 0
                params = {"fieldSelector": f"metadata.name={name}", "resourceVersion": version}
                async for event in client.watch(path, params, timeout_seconds=random.randint(300, 600)):
                    obj = event.get("object")
                    if not isinstance(obj, dict):
                        continue
                    version = _resource_version(obj) or version  # (bookmarks too)
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        self.on_secret(obj)
                    elif event.get("type") == "DELETED":
                        self._refuse(f"Secret {self.namespace}/{name} was deleted")
                failures = 0
            except asyncio.CancelledError:
                raise
            except Gone:
                version = ""
                continue
            except (ApiError, aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
                version = ""
                if isinstance(exc, ApiError) and exc.status == 404:
                    self._refuse(f"Secret {self.namespace}/{name} does not exist")
                delay = BACKOFF[min(failures, len(BACKOFF) - 1)]
                failures += 1
                log.warning(
                    "cannot watch the worker's Secret; retrying",
                    extra=fields(cluster=self.name, secret=name, error=plain_error(exc), retry_in=delay),
                )
                await asyncio.sleep(delay)


def _read_file(path: str, refuse: Callable[[str], None]) -> tuple[bytes | None, str | None]:
    try:
        with open(path, "rb") as fh:
            return fh.read(), os.path.dirname(os.path.abspath(path))
    except OSError as exc:
        refuse(f"cannot read {path}: {exc.strerror or exc}")
        return None, None


def _resource_version(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def _server_of(rest: RestConfig) -> str:
    """The server URL without user info (for logs)."""
    scheme, _, rest_ = rest.server.partition("://")
    return f"{scheme}://{rest_.rpartition('@')[2]}"


__all__ = ["WorkerLink"]
