"""pytest fixtures that start loopback Kubernetes API servers.

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

Example::

    def test_dispatch(multikueue_clusters):
        manager = kubernetes.client.CustomObjectsApi(multikueue_clusters.manager.api_client())
        multikueue_clusters.worker1.faults.fail(503, verb="create")
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from mkpolicy.testing.apiserver import ApiServer

ServerFactory = Callable[..., "ApiServer"]


@dataclass(frozen=True)
class MultiKueueClusters:
    """A MultiKueue setup: the manager cluster and two worker clusters."""

    manager: ApiServer
    worker1: ApiServer
    worker2: ApiServer

    @property
    def workers(self) -> dict[str, ApiServer]:
        """``{"worker1": ..., "worker2": ...}``."""
        return {"worker1": self.worker1, "worker2": self.worker2}

    @property
    def all(self) -> dict[str, ApiServer]:
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
    """A factory of started servers, stopped when the test ends."""
    from mkpolicy.testing.apiserver import ApiServer

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
def apiserver(apiserver_factory: ServerFactory) -> ApiServer:
    """A started loopback API server with the bundled Kueue and Tekton CRDs."""
    return apiserver_factory("loopback")


@pytest.fixture
def multikueue_clusters(apiserver_factory: ServerFactory) -> MultiKueueClusters:
    """A manager and two worker API servers, each with the bundled CRDs."""
    return MultiKueueClusters(
        manager=apiserver_factory("manager"),
        worker1=apiserver_factory("worker1"),
        worker2=apiserver_factory("worker2"),
    )
