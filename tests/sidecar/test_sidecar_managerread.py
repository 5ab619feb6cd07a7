"""Live reads of manager objects on the sidecar's own connections (:mod:`mkpolicy.sidecar.managerread`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import replace
from typing import Any, TypeVar

import pytest

from mkpolicy.kube.client import ApiError, KubeClient
from mkpolicy.kube.kubeconfig import rest_config
from mkpolicy.kube.rest import RestConfig
from mkpolicy.sidecar.managerread import ManagerReader, ManagerReadError, manager_reader
from mkpolicy.testing import ApiServer

T = TypeVar("T")
PATH = "/api/v1/namespaces/a/configmaps/c"


@pytest.fixture(scope="module")
def server() -> Iterator[ApiServer]:
    api = ApiServer("manager", namespaces=["a"])
    api.start()
    api.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "a", "annotations": {"x": "ü"}},
            "data": {"n": "1", "big": "9007199254740993"},
        }
    )
    try:
        yield api
    finally:
        api.stop()


@pytest.fixture(autouse=True)
def _no_faults(server: ApiServer) -> Iterator[None]:
    yield
    server.faults.clear()
    if server.faults.down:
        server.faults.reachable()


def config_of(server: ApiServer) -> RestConfig:
    return rest_config(server.kubeconfig())


def with_reader(server: ApiServer, body: Callable[[ManagerReader], Awaitable[T]]) -> T:
    async def run() -> T:
        reader = ManagerReader(config_of(server), "mkpolicy-sidecar")
        try:
            return await body(reader)
        finally:
            await reader.close()

    return asyncio.run(run())


async def failure(read: Awaitable[Any]) -> BaseException | None:
    """The exception ``read`` raised (None when it succeeded)."""
    try:
        await read
    except Exception as exc:
        return exc
    return None


def test_an_object_reads_as_the_api_client_reads_it_on_one_kept_connection(server: ApiServer) -> None:
    async def body(reader: ManagerReader) -> tuple[Any, Any, int]:
        async with KubeClient(config_of(server)) as client:
            expected = await client.get(PATH)
        got = [await reader.get(PATH) for _ in range(3)]
        assert got[0] == got[1] == got[2]
        return got[0], expected, len(reader.upstream.connections)

    got, expected, connections = with_reader(server, body)
    assert got == expected and got["metadata"]["annotations"] == {"x": "ü"}
    assert connections == 1


def test_a_missing_object_is_none(server: ApiServer) -> None:
    assert with_reader(server, lambda r: r.get("/api/v1/namespaces/a/configmaps/absent")) is None


def test_an_error_status_is_an_api_error_with_the_servers_status(server: ApiServer) -> None:
    server.faults.fail(403, message="forbidden by test", path=PATH)
    with pytest.raises(ApiError) as caught:
        with_reader(server, lambda r: r.get(PATH))
    assert caught.value.status == 403 and "forbidden by test" in caught.value.message


def test_an_answer_cut_short_is_a_read_error_and_the_next_read_works(server: ApiServer) -> None:
    async def body(reader: ManagerReader) -> tuple[BaseException | None, Any]:
        server.faults.drop(path=PATH, after_bytes=10)
        failed = await failure(reader.get(PATH))
        return failed, await reader.get(PATH)

    failed, after = with_reader(server, body)
    assert isinstance(failed, ManagerReadError) and isinstance(failed, OSError)
    assert after is not None and after["metadata"]["name"] == "c"


def test_a_connection_the_server_closed_is_replaced_and_an_unreachable_server_is_a_read_error(
    server: ApiServer,
) -> None:
    async def body(reader: ManagerReader) -> tuple[Any, BaseException | None]:
        await reader.get(PATH)
        server.faults.unreachable("refuse")  # every connection closed, the kept one too
        down = await failure(reader.get(PATH))
        server.faults.reachable()
        return await reader.get(PATH), down

    again, down = with_reader(server, body)
    assert again is not None and again["metadata"]["name"] == "c"
    assert isinstance(down, ManagerReadError) and "connect" in str(down)


def test_a_proxy_the_pool_cannot_use_keeps_the_api_client(server: ApiServer) -> None:
    config = config_of(server)
    assert manager_reader(config, "ua") is not None
    assert manager_reader(replace(config, proxy_url="https://proxy.example:3128"), "ua") is None
    assert manager_reader(replace(config, proxy_url="http://proxy.example:3128"), "ua") is not None
