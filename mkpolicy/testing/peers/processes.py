"""Child processes of a local control plane: started with a log file, stopped for sure.

Every :class:`Process` started and not yet stopped is killed at interpreter exit
(``atexit``), so an interrupted run leaves nothing behind; an orderly stop is SIGTERM,
then SIGKILL after a grace period. Where the parent is killed outright (SIGKILL runs no
``atexit``), its guardian (:mod:`mkpolicy.testing.peers.guardian`, one small process
started with the first peer) stops them instead.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from mkpolicy.errors import MkpolicyError

_LIVE: set[Process] = set()
PopenT = TypeVar("PopenT", bound="subprocess.Popen[Any]")
_GUARDIAN_LOCK = threading.Lock()
_guardian: subprocess.Popen[bytes] | None = None
#: Set when the guardian could not be started or has gone: peers are then stopped by ``atexit`` alone.
_guardian_failed = False


def _tell_guardian(line: str) -> None:
    """Send the guardian one line (``+PID`` or ``-PID``), starting it first when needed; best effort:
    without it a SIGKILLed parent leaves its peers running, as before, and nothing else changes."""
    global _guardian, _guardian_failed
    with _GUARDIAN_LOCK:
        if _guardian_failed:
            return
        try:
            if _guardian is None:
                script = str(Path(__file__).with_name("guardian.py"))
                _guardian = subprocess.Popen([sys.executable, "-I", script], stdin=subprocess.PIPE,
                                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                             start_new_session=True)  # fmt: skip
            assert _guardian.stdin is not None
            _guardian.stdin.write(line.encode() + b"\n")
            _guardian.stdin.flush()
        except OSError:
            _guardian_failed = True


class PeerStartError(MkpolicyError):
    """A peer did not start (or stopped): its name, what was awaited, and its log's last lines."""


#: The lowest port :func:`free_port` picks (above the registered services most machines run).
_LOWEST_PORT = 10000
#: The kernel's ephemeral range (outgoing connections' local ports), where the kernel says it is.
_EPHEMERAL_RANGE = "/proc/sys/net/ipv4/ip_local_port_range"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now, for a peer that binds it later.

    Picked below the kernel's ephemeral range: a port of that range (what binding port 0
    gives) can become some outgoing connection's local port before the peer binds it, and
    the peer then fails with "address already in use" (seen: Kueue's webhook port, with
    two real MultiKueues starting at once). Where the range is unknown, port 0's."""
    try:
        with open(_EPHEMERAL_RANGE) as fh:
            ephemeral_low = int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 0
    rng = random.SystemRandom()
    for _ in range(100 if ephemeral_low > _LOWEST_PORT + 1000 else 0):
        port = rng.randrange(_LOWEST_PORT, ephemeral_low)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        bound: int = sock.getsockname()[1]
        return bound


def guarded(popen: PopenT) -> PopenT:
    """``popen``, listed with the guardian: if it still runs when this process ends, however it ends
    (killed outright included), it is stopped. For children started without :class:`Process` (the
    benches' own servers and load)."""
    _tell_guardian(f"+{popen.pid}")
    return popen


class Process:
    """One child process; stdout and stderr go to ``log`` (appended across restarts)."""

    def __init__(self, name: str, argv: Sequence[str], log: Path, *, env: dict[str, str] | None = None,
                 cwd: Path | None = None) -> None:  # fmt: skip
        self.name = name
        self.argv = list(argv)
        self.log = log
        self.env = env
        self.cwd = cwd
        self.popen: subprocess.Popen[bytes] | None = None

    def __repr__(self) -> str:
        return f"Process({self.name!r}, pid={self.pid})"

    @property
    def pid(self) -> int | None:
        """The process id while running."""
        return self.popen.pid if self.popen is not None else None

    def start(self) -> Process:
        """Start it (its own session: a Ctrl-C in the terminal reaches the parent only, which stops it in order)."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            self.popen = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          env=self.env, cwd=self.cwd, start_new_session=True)  # fmt: skip
        _LIVE.add(self)
        _tell_guardian(f"+{self.popen.pid}")
        return self

    @property
    def alive(self) -> bool:
        """Started and not exited."""
        return self.popen is not None and self.popen.poll() is None

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after ``grace`` seconds; idempotent."""
        popen, self.popen = self.popen, None
        _LIVE.discard(self)
        if popen is None:
            return
        _tell_guardian(f"-{popen.pid}")
        if popen.poll() is None:
            popen.send_signal(signal.SIGTERM)
            try:
                popen.wait(grace)
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait()

    def kill(self) -> None:
        """SIGKILL at once (the harness's last resort)."""
        if self.popen is not None:
            _tell_guardian(f"-{self.popen.pid}")
            if self.popen.poll() is None:
                self.popen.kill()
                self.popen.wait()
        self.popen = None
        _LIVE.discard(self)

    def tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the log."""
        try:
            with open(self.log, "rb") as handle:
                handle.seek(0, os.SEEK_END)
                size = handle.tell()
                handle.seek(max(0, size - 16384))
                data = handle.read().decode("utf-8", "replace")
        except OSError:
            return "(no log)"
        return "\n".join(data.splitlines()[-lines:])

    def failure(self, what: str) -> PeerStartError:
        """An error saying ``what`` went wrong, with the exit code and the log's tail quoted."""
        code = self.popen.poll() if self.popen is not None else None
        state = f"exited with code {code}" if code is not None else "still running"
        quoted = "\n".join(f"  | {line}" for line in self.tail().splitlines())
        return PeerStartError(f"{self.name}: {what} ({state}); log {self.log}, last lines:\n{quoted}")


def wait_until(process: Process, check: Callable[[], Any], what: str, timeout: float, interval: float = 0.2) -> Any:
    """Poll ``check()`` until it is truthy (its value returned); :class:`PeerStartError` quoting the
    process's log when it exits first or ``timeout`` passes. Exceptions of ``check`` count as not yet."""
    deadline = time.monotonic() + timeout
    last = ""
    while True:
        if not process.alive:
            raise process.failure(f"exited while waiting for {what}")
        try:
            value = check()
        except Exception as exc:  # not ready yet: connection refused, 5xx...
            value, last = None, f"{type(exc).__name__}: {exc}"
        if value:
            return value
        if time.monotonic() > deadline:
            detail = f"; last error: {last}" if last else ""
            raise process.failure(f"not ready after {timeout:.0f}s waiting for {what}{detail}")
        time.sleep(interval)


@atexit.register
def _kill_leftovers() -> None:
    for process in list(_LIVE):
        process.kill()
    with _GUARDIAN_LOCK:
        if _guardian is not None and _guardian.stdin is not None:
            with contextlib.suppress(OSError):
                _guardian.stdin.close()  # it stops what is still listed (guarded children), then exits
