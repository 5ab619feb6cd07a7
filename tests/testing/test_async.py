"""The server inside the caller's event loop (async code, e.g. the sidecar's tests)."""

from __future__ import annotations

import asyncio
import json
import ssl

import aiohttp

from mkpolicy.testing.apiserver import ApiServer


async def _scenario() -> None:
    async with ApiServer("async", bundled=["pipelineruns.tekton.dev"]) as srv:
        ctx = ssl.create_default_context(cadata=srv.ca_pem.decode())
        headers = {"Authorization": f"Bearer {srv.token}"}
        base = f"{srv.url}/apis/tekton.dev/v1/namespaces/default/pipelineruns"
        async with aiohttp.ClientSession(headers=headers) as http:
            watch = await http.get(base + "?watch=1&timeoutSeconds=5", ssl=ctx)
            assert watch.status == 200
            # The direct API runs inline on the loop thread.
            srv.create({"apiVersion": "tekton.dev/v1", "kind": "PipelineRun",
                        "metadata": {"name": "a", "namespace": "default"}, "spec": {}})  # fmt: skip
            line = await asyncio.wait_for(watch.content.readline(), 5)
            event = json.loads(line)
            assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "a")
            got = await http.get(base + "/a", ssl=ctx)
            assert (await got.json())["metadata"]["name"] == "a"
            srv.faults.unreachable()  # schedules the shutdown of the listener on this loop
            await asyncio.sleep(0.05)
            assert srv.faults.down == "refuse"
            srv.faults.reachable()
            await asyncio.sleep(0.05)
            again = await http.get(base, ssl=ctx)
            assert again.status == 200
            watch.close()
    assert not srv.running


def test_async_server_in_the_callers_loop() -> None:
    asyncio.run(asyncio.wait_for(_scenario(), 20))
