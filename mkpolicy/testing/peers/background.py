"""The peers' build in a background thread: started once, early, and waited for by what needs the binaries.

A cold build takes tens of minutes (docs/testing.md): pytest starts it as soon as it knows a
real-peer test is selected and runs the other tests meanwhile. The build is :func:`.build.ensure`,
so the cache's file lock still makes a second pytest or ``mkpolicy dev build-peers`` wait for it
instead of building again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from mkpolicy.testing.peers import build


class BackgroundBuild:
    """:func:`.build.ensure` of ``peers`` in a daemon thread."""

    def __init__(self, peers: Sequence[build.Peer], *, log: Callable[[str], None]) -> None:
        self._peers = list(peers)
        self._log = log
        self._locked = threading.Event()
        self._stop = threading.Event()
        self._paths: dict[str, Path] = {}
        self._error: build.PeerBuildError | None = None
        self._thread = threading.Thread(target=self._run, name="mkpolicy-peers-build", daemon=True)

    def start(self) -> None:
        """Start building (what the cache lacks)."""
        self._thread.start()

    def _run(self) -> None:
        try:
            self._paths = build.ensure(self._peers, log=self._log, locked=self._locked, stop=self._stop)
        except build.PeerBuildError as exc:
            self._error = exc
        finally:
            self._locked.set()

    def wait_until_locked(self, timeout: float) -> bool:
        """Whether, within ``timeout`` seconds, the build holds the cache's lock (or is done, or had
        nothing to build). False: another process holds the lock (its build is the one awaited)."""
        return self._locked.wait(timeout)

    def wait(self, timeout: float) -> bool:
        """Whether the build is done, waiting at most ``timeout`` seconds for it."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def running(self) -> bool:
        """Whether the build is still going."""
        return self._thread.is_alive()

    def result(self) -> dict[str, Path]:
        """The binaries' paths once the build is done (waiting for it); :class:`.build.PeerBuildError` if it failed."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._paths

    def stop(self) -> None:
        """Stop the build (go is killed; what it compiled stays in the Go build cache) and wait for the thread."""
        self._stop.set()
        self._thread.join()
