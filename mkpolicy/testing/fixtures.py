"""pytest fixtures for end-to-end tests: loopback Kubernetes API servers, or real clusters.

Enable them in a ``conftest.py``::

    pytest_plugins = ["mkpolicy.testing.fixtures"]

Fixtures (all function-scoped: every test gets fresh, empty clusters; a server starts
in a few milliseconds once the bundled CRDs are parsed, which happens once per process):

``apiserver``
    one started :class:`~mkpolicy.testing.apiserver.ApiServer` serving the built-in
    kinds and the bundled Kueue and Tekton CRDs.
``apiserver_factory``
    ``make(name="loopback", **options) -> ApiServer``: start servers with any
    :class:`ApiServer` options (``bundled=True`` unless given); all are stopped at teardown.
``multikueue_clusters``
    :class:`MultiKueueClusters`: a ``manager`` and two workers (``worker1``,
    ``worker2``), each its own server with its own CA and token, all with the bundled CRDs.
``namespace``
    the namespace a test works in on the ``apiserver`` fixture: ``default`` on the
    loopback server, the namespace created for the test on a real cluster.

Real clusters (docs/testing.md, :mod:`mkpolicy.testing.targets`): when
``MKPOLICY_E2E_MANAGER_KUBECONFIG`` (and optionally both ``MKPOLICY_E2E_WORKER1_KUBECONFIG``
and ``MKPOLICY_E2E_WORKER2_KUBECONFIG``) are set, ``apiserver`` is the manager cluster
and ``multikueue_clusters`` the three clusters, as
:class:`~mkpolicy.testing.targets.RealCluster` views bound to a namespace created for
the test and deleted after it. Then:

- tests marked ``@pytest.mark.loopback_only("why")`` are skipped, with the reason;
- tests using ``apiserver_factory`` are skipped (it starts loopback servers);
- tests using ``multikueue_clusters`` are skipped when no workers are given;
- a configuration that cannot be used (variables, kubeconfig, context not allowed by
  ``MKPOLICY_E2E_ALLOWED_CONTEXTS``) is a usage error, and a cluster that cannot be used
  (unreachable, credentials refused, the same cluster twice, CRDs missing) stops the run
  before the first test: a run never passes by skipping what it was asked to test.

Example::

    def test_dispatch(multikueue_clusters):
        manager = kubernetes.client.CustomObjectsApi(multikueue_clusters.manager.api_client())

    @pytest.mark.loopback_only("injects faults")
    def test_outage(multikueue_clusters):
        multikueue_clusters.worker1.faults.fail(503, verb="create")
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from mkpolicy.testing.targets import (
    ENV_PREFIX,
    ROLES,
    ClusterTarget,
    TargetConfig,
    TargetError,
    is_real,
    kubeconfig_var,
)

if TYPE_CHECKING:
    from mkpolicy.testing.apiserver import ApiServer
    from mkpolicy.testing.targets import RealCluster

ServerFactory = Callable[..., "ApiServer"]

LOOPBACK_ONLY = "loopback_only"
_MARKER_HELP = (
    "loopback_only(reason): the test needs what only the loopback API server can do (fault injection, "
    "compaction, direct storage access, its own credentials); skipped when MKPOLICY_E2E_* selects real clusters"
)

_CACHE: dict[tuple[tuple[str, str], ...], TargetConfig | None] = {}


def target_config() -> TargetConfig | None:
    """The real clusters ``MKPOLICY_E2E_*`` selects, or None for the loopback server (parsed once per environment).

    Raises :class:`~mkpolicy.testing.targets.TargetError` when the variables cannot be used.
    """
    key = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith(ENV_PREFIX)))
    if key not in _CACHE:
        _CACHE[key] = TargetConfig.from_env()
    return _CACHE[key]


def _stop(message: str) -> NoReturn:
    pytest.exit(f"mkpolicy end-to-end target: {message}", returncode=pytest.ExitCode.USAGE_ERROR)


@contextlib.contextmanager
def real_cluster_targets(roles: Sequence[str], config: TargetConfig | None = None) -> Iterator[dict[str, RealCluster]]:
    """Real clusters of ``roles`` for one test, bound to a namespace created for it (deleted after).

    Skips the test when a role is not configured (e.g. no workers given); stops the run
    when a configured cluster cannot be used. For harnesses that are not fixtures.
    """
    from mkpolicy.testing.targets import real_clusters

    config = config or target_config()
    if config is None:
        raise RuntimeError(
            "real_cluster_targets() needs MKPOLICY_E2E_MANAGER_KUBECONFIG: no real cluster is configured"
        )
    absent = [r for r in roles if r not in config.roles]
    if absent:
        pytest.skip(
            f"needs {len(roles)} clusters ({', '.join(roles)}); set {' and '.join(kubeconfig_var(r) for r in absent)}"
        )
    test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]
    stack = contextlib.ExitStack()
    try:
        targets = stack.enter_context(real_clusters(config, roles, test=test))
    except TargetError as exc:
        stack.close()
        _stop(str(exc))
    with stack:
        yield targets


# -- pytest hooks -----------------------------------------------------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", _MARKER_HELP)
    try:
        target_config()
    except TargetError as exc:
        raise pytest.UsageError(f"mkpolicy end-to-end target: {exc}") from None


def pytest_sessionstart(session: pytest.Session) -> None:
    """Contact and validate the configured clusters before the first test (not for --collect-only)."""
    from mkpolicy.testing.targets import connections

    config = target_config()
    if config is None or session.config.option.collectonly:
        return
    try:
        connections(config)
    except TargetError as exc:
        _stop(str(exc))


def pytest_report_header(config: pytest.Config) -> list[str]:
    target = target_config()
    if target is None:
        return []
    return [
        f"mkpolicy end-to-end target: real clusters: {target.describe()}",
        f"  tests marked {LOOPBACK_ONLY} are skipped; test namespaces: {target.namespace_prefix}-<random>",
    ]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    target = target_config()
    if target is None:
        return
    reasons = [str(getattr(r, "longrepr", ("", "", ""))[2]) for r in terminalreporter.stats.get("skipped", [])
               if isinstance(getattr(r, "longrepr", None), tuple)]  # fmt: skip
    loopback = sum(1 for reason in reasons if "loopback only:" in reason)
    terminalreporter.write_sep("-", "mkpolicy end-to-end target: real clusters")
    terminalreporter.write_line(target.describe())
    terminalreporter.write_line(f"{loopback} test(s) skipped as loopback only (-rs lists them with the reasons)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if target_config() is None:
        return
    for item in items:
        marker = item.get_closest_marker(LOOPBACK_ONLY)
        if marker is not None:
            why = str(marker.args[0]) if marker.args else "needs the loopback API server"
            item.add_marker(pytest.mark.skip(reason=f"loopback only: {why}"))
        elif "apiserver_factory" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.skip(reason="loopback only: starts loopback servers (apiserver_factory)"))


# -- fixtures ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MultiKueueClusters:
    """A MultiKueue setup: the manager cluster and two worker clusters."""

    manager: ClusterTarget
    worker1: ClusterTarget
    worker2: ClusterTarget

    @property
    def workers(self) -> dict[str, ClusterTarget]:
        """``{"worker1": ..., "worker2": ...}``."""
        return {"worker1": self.worker1, "worker2": self.worker2}

    @property
    def all(self) -> dict[str, ClusterTarget]:
        """Every cluster by name, the manager first."""
        return {"manager": self.manager, **self.workers}

    def write_kubeconfigs(self, directory: str | os.PathLike[str]) -> dict[str, Path]:
        """Write ``<name>.kubeconfig`` for every cluster into ``directory``; returns the paths."""
        out = {}
        for name, server in self.all.items():
            out[name] = server.write_kubeconfig(Path(directory, f"{name}.kubeconfig"))
        return out


@pytest.fixture
def apiserver_factory() -> Iterator[ServerFactory]:
    """A factory of started loopback servers, stopped when the test ends."""
    from mkpolicy.testing.apiserver import ApiServer

    if target_config() is not None:  # collection marks these tests skipped; this is for direct requests
        pytest.skip("loopback only: starts loopback servers (apiserver_factory)")
    started: list[ApiServer] = []

    def make(name: str = "loopback", **options: Any) -> ApiServer:
        options.setdefault("bundled", True)
        server = ApiServer(name, **options).start()
        started.append(server)
        return server

    yield make
    for server in reversed(started):
        server.stop()


@pytest.fixture
def apiserver(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A started loopback API server with the bundled Kueue and Tekton CRDs; on real clusters, the manager."""
    config = target_config()
    if config is None:
        factory: ServerFactory = request.getfixturevalue("apiserver_factory")
        yield factory("loopback")
        return
    with real_cluster_targets(("manager",), config) as targets:
        yield targets["manager"]


@pytest.fixture
def namespace(apiserver: Any) -> str:
    """The namespace to work in on ``apiserver``: ``default`` (loopback) or the test's own (real cluster)."""
    return apiserver.namespace if is_real(apiserver) else "default"


@pytest.fixture
def multikueue_clusters(request: pytest.FixtureRequest) -> Iterator[MultiKueueClusters]:
    """A manager and two worker API servers, each with the bundled CRDs (or the three real clusters)."""
    config = target_config()
    if config is None:
        factory: ServerFactory = request.getfixturevalue("apiserver_factory")
        yield MultiKueueClusters(manager=factory("manager"), worker1=factory("worker1"), worker2=factory("worker2"))
        return
    with real_cluster_targets(ROLES, config) as targets:
        yield MultiKueueClusters(**targets)
