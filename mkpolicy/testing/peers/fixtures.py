"""pytest fixtures on real peers (a plugin: ``pytest_plugins = ["mkpolicy.testing.peers.fixtures"]``).

- ``real_kube`` (session): one real kube-apiserver (:class:`~.controlplane.KubeCluster`,
  cluster ``kube``) on its own etcd;
- ``real_multikueue`` (session, parametrized over :data:`~.build.KUEUE_VERSIONS`): a
  :class:`~.multikueue.RealMultiKueue` with a manager and two workers, real Kueue, and the
  sidecar with the policies of ``real_multikueue_policies`` in between; worker1's
  ClusterQueue has quota, worker2's none, so Kueue's choice of worker is deterministic
  (tests that move quota put it back);
- ``real_namespace``: a fresh namespace on every cluster of ``real_multikueue``, with
  LocalQueue ``lq`` (deleted afterwards);
- ``real_multikueue_policies`` (session): the policy folder the sidecar runs (default: the
  shipped Tekton policy); override it in a conftest to try another.

With no Go toolchain the fixtures skip, saying so. With Go, nothing skips: a peer that
cannot be built or started is an error quoting go's output or the peer's log.

Missing binaries are built in the background from the moment pytest knows a test marked
``real_peers`` is selected (by the pytest-xdist controller, or by pytest itself without
xdist), while the other tests run: the real-peer tests are run last (with xdist their
groups are dispatched last) in build order, and each waits for the peers it needs before
its timeout starts (a cold build takes far longer than a test's timeout). Progress is shown
on the terminal; a failed build fails the tests that need it, quoting go, not the session.
Tests marked ``real_peers`` of one Kueue version run in one pytest-xdist worker.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Generator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from mkpolicy.testing.peers import build
from mkpolicy.testing.peers.background import BackgroundBuild
from mkpolicy.testing.peers.controlplane import ControlPlane, KubeCluster
from mkpolicy.testing.peers.multikueue import RealMultiKueue

NO_GO = "no Go toolchain ('go' is not on PATH): the real-peer tests build etcd, kube-apiserver and Kueue with it"


def require_go() -> None:
    """Skip when there is no Go toolchain (the only reason the real-peer tests ever skip)."""
    if build.go_binary() is None:
        pytest.skip(NO_GO)


GROUP_PREFIX = "real-peers"
#: How long the xdist controller waits for its build to take the cache's lock before dispatching
#: tests (so that it, not a worker, builds and shows progress); longer: another process builds.
LOCK_WAIT = 5.0

#: The running real-peer test's build error, if any (:func:`require_peers` raises it).
_BUILD_ERROR: list[build.PeerBuildError] = []
#: The sets of peers waited for in this process (by key), each with its build error if any.
_WAITED: dict[frozenset[str], build.PeerBuildError | None] = {}
_BACKGROUND = pytest.StashKey[BackgroundBuild]()
_PROGRESS = pytest.StashKey["BuildProgress"]()


def is_real_peers(item: pytest.Item) -> bool:
    """Whether ``item`` is marked ``real_peers``."""
    return item.get_closest_marker("real_peers") is not None


def is_real_peers_group(scope: str) -> bool:
    """Whether an xdist scope (a group name, or the id of a test in no group) is a real-peer group."""
    return scope.startswith(GROUP_PREFIX)


@pytest.hookimpl(trylast=True)  # after pytest orders the tests by their parametrized fixtures
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The ``real_peers`` tests run last (the build overlaps the others), by group in build order
    (:func:`real_peers_rank`), each group in its order."""
    items[:] = sorted(items, key=lambda item: real_peers_rank(real_peers_group(item)) if is_real_peers(item) else -1)


def real_peers_rank(group: str) -> int:
    """The order of real-peer groups: each Kueue version's as the build makes them, then ``real-peers``
    (it needs every peer)."""
    versions = [f"{GROUP_PREFIX}-kueue-{version}" for version in build.KUEUE_VERSIONS]
    return versions.index(group) if group in versions else len(versions)


def real_peers_group(item: pytest.Item) -> str:
    """The xdist group of a real-peer test: ``real-peers-kueue-<version>`` when it is parametrized
    by one, else ``real-peers``. Under ``--dist loadgroup`` a group runs in one worker, in order
    (the tests of a version share its MultiKueue, and the wire-contract check comes after the
    scenarios); the groups' bring-ups and waits overlap instead of queueing behind each other."""
    callspec = getattr(item, "callspec", None)
    ident = callspec.id if callspec is not None else ""
    for version in build.KUEUE_VERSIONS:
        if f"kueue-{version}" in ident:
            return f"{GROUP_PREFIX}-kueue-{version}"
    return GROUP_PREFIX


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``--dist loadgroup`` with the real-peer groups (:func:`real_peers_group`) dispatched last (:mod:`.schedule`)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from mkpolicy.testing.peers.schedule import RealPeersLastScheduling

    return RealPeersLastScheduling(config, log)


@pytest.hookimpl(tryfirst=True)  # an xdist worker: before it tells the controller it has collected
def pytest_collection_finish(session: pytest.Session) -> None:
    """Without xdist (or with ``-n0``): start building once the selected tests are known. In an
    xdist worker: tell the controller which tests are real-peer tests, in which group."""
    peers = [item for item in session.items if is_real_peers(item)]
    if hasattr(session.config, "workerinput"):
        from mkpolicy.testing.peers.schedule import publish_groups

        publish_groups(session.config, {item.nodeid: real_peers_group(item) for item in peers})
    elif peers:
        start_build(session.config, queued=True)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: Sequence[str]) -> None:
    """The xdist controller starts building once a worker has collected a real-peer test (the
    workers collect; the controller shows the progress)."""
    from mkpolicy.testing.peers.schedule import load_groups

    if load_groups(node):
        start_build(node.config, queued=False)


class BuildProgress:
    """The build's ``[peers]`` lines on pytest's terminal. Without xdist a line written while a test
    runs would land in that test's captured output (pytest captures the process's stdout), so
    lines are queued there and the main thread writes them between tests and while it waits
    for the build (:meth:`flush`); the xdist controller runs no test and writes them at once."""

    def __init__(self, config: pytest.Config, *, queued: bool) -> None:
        self._reporter = config.pluginmanager.get_plugin("terminalreporter")
        self._queued = queued
        self._lines: list[str] = []
        self._lock = threading.Lock()

    def log(self, line: str) -> None:
        """Show ``line`` (now, or at the next :meth:`flush`)."""
        if not self._queued:
            self._write(line)
            return
        with self._lock:
            self._lines.append(line)

    def flush(self) -> None:
        """Write the queued lines (from the main thread, outside any test)."""
        with self._lock:
            lines, self._lines = self._lines, []
        for line in lines:
            self._write(line)

    def _write(self, line: str) -> None:
        if self._reporter is not None:
            self._reporter.write_line(f"[peers] {line}")


def start_build(config: pytest.Config, *, queued: bool) -> None:
    """Build the missing peers in the background (once per session; nothing without Go)."""
    if build.go_binary() is None or _BACKGROUND in config.stash:
        return
    progress = config.stash[_PROGRESS] = BuildProgress(config, queued=queued)
    background = config.stash[_BACKGROUND] = BackgroundBuild(build.all_peers(), log=progress.log)
    background.start()
    if not background.wait_until_locked(LOCK_WAIT):
        progress.log(f"waiting for another process's build (it holds {build.cache_dir() / '.lock'})")
    progress.flush()


@pytest.hookimpl(tryfirst=True, wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    """A real-peer test first waits for the peers, outside its timeout (pytest-timeout's timer
    starts inside this wrapper); after each test, the build's queued progress lines are shown."""
    if is_real_peers(item):
        await_peers(item.config, needed_peers(item))
    try:
        return (yield)
    finally:
        if _PROGRESS in item.config.stash:
            item.config.stash[_PROGRESS].flush()


def needed_peers(item: pytest.Item) -> list[build.Peer]:
    """The peers a real-peer test waits for: etcd, kube-apiserver and its group's Kueue, or all of
    them for a test of no Kueue version (the build makes them in this order, so a version's tests
    can start while the next Kueue builds)."""
    for version in build.KUEUE_VERSIONS:
        if real_peers_group(item) == f"{GROUP_PREFIX}-kueue-{version}":
            return [build.etcd(), build.kube_apiserver(), build.kueue(version)]
    return build.all_peers()


def await_peers(config: pytest.Config, peers: Sequence[build.Peer]) -> None:
    """Wait for ``peers`` (once per process and set of peers): from this process's background build,
    or (an xdist worker, whose controller builds) :func:`.build.await_built`. The outcome is kept
    for :func:`require_peers`."""
    _BUILD_ERROR.clear()
    if build.go_binary() is None:
        return
    keys = frozenset(peer.key for peer in peers)
    if keys not in _WAITED:
        try:
            if _BACKGROUND in config.stash:
                background, progress = config.stash[_BACKGROUND], config.stash[_PROGRESS]
                while not all(build.binary_path(peer).is_file() for peer in peers) and not background.wait(1.0):
                    progress.flush()
                progress.flush()
                if not all(build.binary_path(peer).is_file() for peer in peers):
                    background.result()  # done without them: its error
            else:
                build.await_built(peers, log=_log)
            _WAITED[keys] = None
        except build.PeerBuildError as exc:
            _WAITED[keys] = exc
    error = _WAITED[keys]
    if error is not None:
        _BUILD_ERROR.append(error)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A build no test waited for (e.g. ``-x`` stopped the run, or Ctrl-C) is stopped, not orphaned."""
    background = session.config.stash.get(_BACKGROUND, None)
    if background is None:
        return
    progress = session.config.stash[_PROGRESS]
    if background.running:
        background.stop()
        progress.log("build stopped: no test waited for it (the Go build cache keeps its work)")
    progress.flush()


def require_peers() -> None:
    """Skip without Go; fail (the build's error) when the peers could not be built."""
    require_go()
    if _BUILD_ERROR:
        raise _BUILD_ERROR[0]


def _log(line: str) -> None:
    # Shown with -s, and in the captured output of a failing test (builds take minutes).
    print(f"[peers] {line}", flush=True)


@pytest.fixture(scope="session")
def real_kube() -> Iterator[KubeCluster]:
    """A real kube-apiserver (and its etcd) for the whole session."""
    require_peers()
    with ControlPlane(log=_log) as plane:
        yield plane.add_cluster("kube")


@pytest.fixture(scope="session")
def real_multikueue_policies(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A policy folder with the shipped Tekton policy (its schemas beside it, as in the repository)."""
    root = build.modules_dir().parent
    tmp = tmp_path_factory.mktemp("real-peers")
    policies = tmp / "policies"
    policies.mkdir()
    shutil.copy(root / "policies" / "tekton-pipelinerun.yaml", policies)
    shutil.copytree(root / "schemas", tmp / "schemas")
    return policies


@pytest.fixture(scope="session", params=build.KUEUE_VERSIONS, ids=[f"kueue-{v}" for v in build.KUEUE_VERSIONS])
def real_multikueue(request: pytest.FixtureRequest, real_multikueue_policies: Path) -> Iterator[RealMultiKueue]:
    """A manager and two workers with real Kueue at the version of the parameter, the sidecar in between."""
    require_peers()
    mk = RealMultiKueue(2, kueue_version=request.param, quota={"worker1": "8", "worker2": "0"},
                        policies=real_multikueue_policies, log=_log)  # fmt: skip
    with mk:
        yield mk


@pytest.fixture
def real_namespace(real_multikueue: RealMultiKueue) -> Iterator[str]:
    """A new namespace on every cluster, LocalQueue ``lq`` in it."""
    ns = real_multikueue.new_namespace()
    yield ns
    real_multikueue.delete_namespace(ns)
