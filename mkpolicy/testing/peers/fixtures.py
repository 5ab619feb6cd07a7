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

Missing binaries are built once collection is done, before any test runs, when a test
marked ``real_peers`` is selected (a cold build takes far longer than a test's timeout):
progress is shown on the terminal (under pytest-xdist a worker builds, silently: run
``mkpolicy dev build-peers`` first to watch it); a failed build fails those tests, not the
session. Tests marked ``real_peers`` run in one pytest-xdist worker.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from mkpolicy.testing.peers import build
from mkpolicy.testing.peers.controlplane import ControlPlane, KubeCluster
from mkpolicy.testing.peers.multikueue import RealMultiKueue

NO_GO = "no Go toolchain ('go' is not on PATH): the real-peer tests build etcd, kube-apiserver and Kueue with it"


def require_go() -> None:
    """Skip when there is no Go toolchain (the only reason the real-peer tests ever skip)."""
    if build.go_binary() is None:
        pytest.skip(NO_GO)


_BUILD_ERROR: list[build.PeerBuildError] = []


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``--dist loadgroup``) the ``real_peers`` tests of one Kueue version run
    in one worker, in order (they share that version's MultiKueue, and the wire-contract check
    comes after the scenarios), and those of no version in another group: the groups' bring-ups
    and waits overlap instead of queueing behind each other."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        if item.get_closest_marker("real_peers") is not None:
            item.add_marker(pytest.mark.xdist_group(real_peers_group(item)))


def real_peers_group(item: pytest.Item) -> str:
    """The xdist group of a real-peer test: ``real-peers-<Kueue version>`` when it is parametrized
    by one, else ``real-peers``."""
    callspec = getattr(item, "callspec", None)
    ident = callspec.id if callspec is not None else ""
    for version in build.KUEUE_VERSIONS:
        if f"kueue-{version}" in ident:
            return f"real-peers-kueue-{version}"
    return "real-peers"


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build the peers the selected ``real_peers`` tests need, outside any test's timeout."""
    if build.go_binary() is None or not any(i.get_closest_marker("real_peers") for i in session.items):
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")

    def show(line: str) -> None:
        if reporter is not None:
            reporter.write_line(f"[peers] {line}")

    try:
        build.ensure(build.all_peers(), log=show)
    except build.PeerBuildError as exc:
        show(exc.message)
        _BUILD_ERROR.append(exc)


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
