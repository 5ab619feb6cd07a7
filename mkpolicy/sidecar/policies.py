"""The active policy set and its hot reload from a directory.

A :class:`PolicySet` is immutable: compiled adapters plus the REST resource of each
policy's kind (from the manager's discovery). Requests take the set that is active
when they start; a reload swaps in a new set only when every policy loads, compiles
and resolves — a bad reload keeps the last good set, logs and counts why.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

import aiohttp

from mkpolicy.check import CheckError, load_checked
from mkpolicy.engine import Adapter
from mkpolicy.errors import MkpolicyError
from mkpolicy.kube.client import ApiError, ResourceInfo
from mkpolicy.policy import GVK
from mkpolicy.policy.kueue import wire_gap
from mkpolicy.policy.loader import discover
from mkpolicy.sidecar.kueueconfig import KueueInfo, Stranded, stranded_kinds
from mkpolicy.sidecar.logs import fields, plain_error
from mkpolicy.sidecar.metrics import Metrics

log = logging.getLogger("mkpolicy.sidecar.policies")

#: Largest file the fingerprint reads (policy directories hold small YAML files).
MAX_FILE = 8 * 1024 * 1024


@dataclass(frozen=True)
class Entry:
    """One policy: its compiled adapter and the resource serving its kind."""

    adapter: Adapter
    info: ResourceInfo

    @property
    def name(self) -> str:
        """The policy's name."""
        return self.adapter.name

    @property
    def main_status(self) -> bool:
        """Whether the kind has no status subresource (the policy says ``sync.subresource: none``, or
        the manager's discovery lists no ``/status``): the sidecar then hands Kueue worker objects
        without ``status`` and writes the policy's sync to the manager's main resource itself
        (:mod:`mkpolicy.sidecar.mainstatus`)."""
        return self.adapter.sync_subresource == "none" or self.info.status_subresource is False


@dataclass(frozen=True)
class PolicySet:
    """Immutable snapshot of the active policies, indexed by (group, resource)."""

    entries: tuple[Entry, ...]
    fingerprint: str
    #: Policies whose kind the manager does not serve (yet): "name (GVK): why". Retried.
    pending: tuple[str, ...] = ()
    #: (policy name, kind) of the pending policies: their creations are refused until they resolve.
    pending_kinds: tuple[tuple[str, GVK], ...] = ()
    #: Valid policies stock Kueue cannot send through the wire: "name (GVK): why". Not used.
    skipped: tuple[str, ...] = ()
    #: Kinds Kueue dispatches with no active policy while a policy is meant for them (a typo, a
    #: pending or skipped policy), with the kind's resource on the manager (None: not served):
    #: their creations are refused, never forwarded untransformed.
    stranded: tuple[tuple[Stranded, ResourceInfo | None], ...] = ()
    loaded_at: float = field(default_factory=time.time)
    _index: dict[tuple[str, str], Entry] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {(e.info.group, e.info.resource): e for e in self.entries})

    def lookup(self, group: str, resource: str) -> Entry | None:
        """The policy for ``group``'s ``resource`` (any version), or None."""
        return self._index.get((group, resource))

    def pending_in(self, group: str) -> bool:
        """Whether a pending policy's kind, or a stranded kind, is in ``group``."""
        return any(gvk.group == group for _, gvk in self.pending_kinds) or any(
            s.kind.group == group for s, _ in self.stranded
        )

    def stranded_kind(self, group: str, kind: str) -> tuple[Stranded, ResourceInfo | None] | None:
        """The stranded kind ``group``'s ``kind`` (and its resource), or None."""
        for lost, info in self.stranded:
            if (lost.kind.group, lost.kind.kind) == (group, kind):
                return lost, info
        return None

    def pending_policy(self, group: str, kind: str) -> tuple[str, GVK] | None:
        """(name, kind) of the pending policy for ``group``'s ``kind``, or None."""
        for name, gvk in self.pending_kinds:
            if (gvk.group, gvk.kind) == (group, kind):
                return name, gvk
        return None


class ReloadError(MkpolicyError):
    """A policy set was rejected; ``reason`` is load, compile or discovery."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def fingerprint(directory: str) -> str:
    """A digest of every file under ``directory`` (names and contents; hidden directories skipped).

    ConfigMap volumes swap a hidden ``..data`` directory behind top-level symlinks;
    the symlinks are followed, so an update changes the digest.
    """
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(directory, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.startswith("."):
                continue
            path = os.path.join(root, name)
            digest.update(os.path.relpath(path, directory).encode() + b"\0")
            try:
                with open(path, "rb") as fh:
                    digest.update(fh.read(MAX_FILE))
            except OSError as exc:
                digest.update(f"<unreadable: {exc.errno}>".encode())
            digest.update(b"\0")
    return digest.hexdigest()


def compile_directory(directory: str) -> list[Adapter]:
    """Load, check and compile every policy under ``directory`` with the checker ``mkpolicy
    lint`` and ``validate`` use (:mod:`mkpolicy.check`); ReloadError lists every error."""
    try:
        return load_checked([directory])
    except CheckError as exc:
        raise ReloadError(exc.stage, exc.report()) from None


def holds_yaml(directory: str) -> bool:
    """Whether ``directory`` holds any YAML file (an absent optional ConfigMap mounts an empty one)."""
    return os.path.isdir(directory) and bool(discover(directory))


def split_wire(
    adapters: Iterable[Adapter], kueue: KueueInfo | None = None
) -> tuple[list[Adapter], list[tuple[Adapter, str]]]:
    """The adapters the wire carries, and (adapter, why) for each one stock Kueue cannot carry.

    A kind Kueue adapts natively is skipped when that integration is enabled in Kueue's
    Configuration (``kueue``; unknown: every integration counts as enabled), since Kueue's
    own adapter then sends it. The sidecar skips the others too (valid policies, just not
    for the wire); ``--check`` lists them.
    """
    info = kueue if kueue is not None else KueueInfo()
    carried: list[Adapter] = []
    skipped: list[tuple[Adapter, str]] = []
    for adapter in adapters:
        native = info.native_integration(adapter.gvk)
        reason = wire_gap(adapter.policy)
        if reason is None and native is not None:
            known = "is enabled" if info.integrations is not None else "may be enabled (Kueue's configuration unread)"
            reason = f"Kueue's integration {native} {known}: its own adapter sends {adapter.gvk.kind}"
        if reason is None:
            carried.append(adapter)
        else:
            skipped.append((adapter, reason))
    return carried, skipped


#: Why a pending policy is not active (see :func:`stranded_kinds`).
PENDING = "which the manager cluster does not serve"

Resolver = Callable[[GVK], Awaitable[ResourceInfo]]
OnChange = Callable[[PolicySet], Awaitable[None]]


class PolicyStore:
    """Loads the directory, keeps the active set, reloads on change."""

    def __init__(self, directory: str, resolve: Resolver, metrics: Metrics, on_change: OnChange | None = None) -> None:
        self.directory = directory
        self.resolve = resolve
        self.metrics = metrics
        self.on_change = on_change
        self.active: PolicySet | None = None
        self.last_error: str | None = None
        #: What Kueue is configured with (its integrations decide which native kinds are skipped).
        self.kueue: KueueInfo | None = None
        self._resolved: dict[GVK, ResourceInfo] = {}
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._seen = ""
        #: (digest, adapters) of the last directory compiled: a retry of pending kinds or of a
        #: failed discovery redoes the look-ups only, not the (CPU-heavy) compilation.
        self._compiled: tuple[str, list[Adapter]] | None = None

    async def reload(self, *, force: bool = False) -> bool:
        """Load the directory if it changed; True when a new set became active.

        Raises :class:`ReloadError` when the new set is rejected (the old one stays).
        """
        async with self._lock:
            loop = asyncio.get_running_loop()
            digest = await loop.run_in_executor(None, fingerprint, self.directory)
            retry_pending = self.active is not None and bool(self.active.pending)
            if not force and digest == self._seen and not retry_pending:
                return False
            self._seen = digest
            try:
                if self._compiled is not None and self._compiled[0] == digest:
                    adapters = self._compiled[1]
                else:
                    adapters = await loop.run_in_executor(None, compile_directory, self.directory)
                    self._compiled = (digest, adapters)
                carried, gaps = split_wire(adapters, self.kueue)
                skipped = [f"{adapter.name} ({adapter.gvk}): {reason}" for adapter, reason in gaps]
                entries, pending, pending_kinds = [], [], []
                for adapter in carried:
                    info = await self._info(adapter)
                    if info is None:
                        pending.append(f"{adapter.name} ({adapter.gvk}): the manager cluster does not serve this kind")
                        pending_kinds.append((adapter.name, adapter.gvk))
                    else:
                        entries.append(Entry(adapter, info))
                stranded = await self._stranded(entries, pending_kinds, gaps)
            except ReloadError as exc:
                if exc.reason == "discovery":
                    self._seen = ""  # the manager may come back: try again at the next check
                self.last_error = f"{exc.reason}: {exc.message}"
                self.metrics.reloads.labels("error").inc()
                self.metrics.reload_errors.labels(exc.reason).inc()
                log.error(
                    "policy set rejected; keeping the last good set",
                    extra=fields(reason=exc.reason, error=exc.message, active=self._names()),
                )
                raise
            current = self.active
            if (
                not force
                and current is not None
                and current.fingerprint == digest
                and current.pending == tuple(pending)
            ):
                return False  # only the pending kinds were looked up again, still absent
            new = PolicySet(
                tuple(entries), digest, tuple(pending), tuple(pending_kinds), tuple(skipped), tuple(stranded)
            )
            if self.on_change is not None:
                await self.on_change(new)
            self.active = new
            self.last_error = None
            self.metrics.reloads.labels("ok").inc()
            self.metrics.policies.set(len(entries))
            self.metrics.policies_pending.set(len(pending))
            self.metrics.policies_skipped.set(len(skipped))
            self.metrics.last_reload.set(new.loaded_at)
            log.info(
                "policy set active",
                extra=fields(
                    policies=self._names(), pending=list(pending), skipped=list(skipped), fingerprint=digest[:12]
                ),
            )
            return True

    def _names(self) -> list[str]:
        return [e.name for e in self.active.entries] if self.active is not None else []

    async def _stranded(
        self, entries: list[Entry], pending: list[tuple[str, GVK]], gaps: list[tuple[Adapter, str]]
    ) -> list[tuple[Stranded, ResourceInfo | None]]:
        """:func:`stranded_kinds` for this set, each with its kind's resource on the manager (None: unknown)."""
        if self.kueue is None:
            return []
        inactive = [(name, gvk, PENDING) for name, gvk in pending]
        inactive += [(a.name, a.gvk, f"which the sidecar skips ({why})") for a, why in gaps]
        out: list[tuple[Stranded, ResourceInfo | None]] = []
        for lost in stranded_kinds(self.kueue, [(e.name, e.adapter.gvk) for e in entries], inactive):
            info: ResourceInfo | None = self._resolved.get(lost.kind)
            if info is None:
                try:
                    info = self._resolved[lost.kind] = await self.resolve(lost.kind)
                except (ApiError, TimeoutError, OSError, aiohttp.ClientError):
                    info = None  # refused all the same; the Event goes on the Workload
            out.append((lost, info))
        return out

    async def _info(self, adapter: Adapter) -> ResourceInfo | None:
        """The resource of the policy's kind; None when the manager does not serve it (404)."""
        gvk = adapter.gvk
        if gvk not in self._resolved:
            try:
                self._resolved[gvk] = await self.resolve(gvk)
            except ApiError as exc:
                if exc.status == 404:
                    return None
                raise ReloadError(
                    "discovery", f"policy {adapter.name}: discovery of {gvk} failed: {plain_error(exc)}"
                ) from None
            except (TimeoutError, OSError, aiohttp.ClientError) as exc:
                raise ReloadError(
                    "discovery",
                    f"policy {adapter.name}: cannot reach the manager cluster to find {gvk}: {plain_error(exc)}",
                ) from None
        return self._resolved[gvk]

    def start(self, interval: float) -> None:
        """Check the directory every ``interval`` seconds (0: never)."""
        if interval > 0 and self._task is None:
            self._task = asyncio.create_task(self._run(interval), name="policy-reload")

    async def stop(self) -> None:
        """Stop watching the directory."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await self.reload()
            except ReloadError:
                pass  # logged and counted; the last good set stays active
            except Exception as exc:  # never let the reload loop die
                log.exception("policy reload failed", extra=fields(error=plain_error(exc)))
