"""kubectl (client-go) through the sidecar, with the kubeconfig the sidecar generates for Kueue.

The same transport as Kueue's: TLS to the sidecar with its CA as data, a bearer token,
HTTP/1.1. Aggregated discovery and watches pass through; a creation is the policy's; a
full read carries the policy's status; a metadata-only read (PartialObjectMetadata, sent
through ``kubectl proxy``) and ``get --raw`` are the worker's own bytes; DELETE passes.
Skipped when kubectl is absent.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from sidecar_harness import (
    POLICIES,
    adapter_for,
    clusters,
    kueue,
    pipelinerun,
    policy_dir,
    probes,
    running,
    strip_server_fields,
)

import mkpolicy
from mkpolicy.jsonvalues import apply_merge_patch
from mkpolicy.kube.kubeconfig import write_kubeconfig
from mkpolicy.testing.kubectl import Kubectl, kubectl_path, requests_logged
from mkpolicy.testing.kueue import METADATA_ACCEPT

pytestmark = [
    pytest.mark.skipif(kubectl_path() is None, reason="kubectl is not installed"),
    pytest.mark.loopback_only("compares with the loopback worker's own answers"),
    pytest.mark.timeout(120),
]

TEKTON = POLICIES / "tekton-pipelinerun.yaml"
PR = ("tekton.dev/v1", "PipelineRun")


def fetch(url: str, accept: str) -> bytes:
    with urllib.request.urlopen(urllib.request.Request(url, headers={"Accept": accept}), timeout=10) as resp:
        data: bytes = resp.read()
        return data


def test_kubectl_through_the_sidecar(tmp_path: Path) -> None:
    adapter = adapter_for(TEKTON)
    with clusters(tmp_path) as env:
        w1 = env.worker("worker1")

        async def scenario() -> None:
            # kubectl is not Kueue: its requests (tables, LIST, parameters) pass by an explicit widening
            config = env.config(wire=probes("tekton.dev", verbs=("get", "list", "watch", "create", "delete")))
            async with running(config, policy_dir(tmp_path, TEKTON)) as sidecar, kueue(env, sidecar) as steps:
                path = tmp_path / "via-sidecar.kubeconfig"
                write_kubeconfig(str(path), sidecar.kubeconfig("worker1"))
                via = Kubectl.for_kubeconfig(path, tmp_path / "via")
                direct = Kubectl.for_kubeconfig(env.kubeconfigs["worker1"], tmp_path / "direct")
                assert via is not None and direct is not None

                def run(*args: str, **kw: Any) -> Any:
                    return asyncio.to_thread(via.run, *args, **kw)

                # aggregated discovery, passed through
                proc = await run("api-resources", "-o", "name", verbose=True)
                assert "pipelineruns.tekton.dev" in proc.stdout.split()
                apis = next(r for r in requests_logged(proc.stderr) if r.url.split("?")[0].endswith("/apis"))
                assert apis.response_headers["Content-Type"].endswith("as=APIGroupDiscoveryList")

                # a creation (Kueue's body, as kubectl sends it) is the policy's
                local = env.manager.create(pipelinerun("run-1", env.ns))
                body = steps.clone(local, "wl-1")
                await run("create", "--validate=false", "-f", "-", input=yaml.safe_dump(body))
                ctx = mkpolicy.Context("wl-1", "multikueue", "worker1", None, "annotation")
                assert strip_server_fields(w1.get(*PR, "run-1", env.ns)) == adapter.create(local, ctx)

                # a watch (kubectl's decoder) through the sidecar: the worker's events
                # (the sidecar serves from this event loop: kubectl's output is awaited in threads)
                with via.watch(
                    "get", "pipelineruns", "-n", env.ns, "-w", "--output-watch-events", "-o", "json"
                ) as events:
                    assert (await asyncio.to_thread(next, events))["type"] == "ADDED"
                    status = {"conditions": [{"type": "Succeeded", "status": "True", "reason": "Succeeded"}],
                              "pipelineSpec": {"tasks": []}}  # fmt: skip
                    w1.patch(*PR, "run-1", {"status": status}, namespace=env.ns, subresource="status")
                    modified = await asyncio.to_thread(next, events)
                    assert modified["type"] == "MODIFIED" and modified["object"]["status"] == status  # untouched

                # a full read carries the policy's status
                read = json.loads((await run("get", "pipelinerun", "run-1", "-n", env.ns, "-o", "json")).stdout)
                manager_obj = env.manager.get(*PR, "run-1", env.ns)
                patch = adapter.sync(manager_obj, w1.get(*PR, "run-1", env.ns), ctx)
                assert read["status"] == apply_merge_patch(manager_obj, patch)["status"]

                # get --raw of a LIST, and a metadata-only read through kubectl proxy: the worker's bytes
                raw = f"/apis/tekton.dev/v1/namespaces/{env.ns}/pipelineruns"
                assert (await run("get", "--raw", raw)).stdout == (
                    await asyncio.to_thread(direct.run, "get", "--raw", raw)
                ).stdout
                with via.proxy() as base_via, direct.proxy() as base_direct:
                    one = f"{raw}/run-1"
                    metadata = await asyncio.to_thread(fetch, base_via + one, METADATA_ACCEPT)
                    assert metadata == await asyncio.to_thread(fetch, base_direct + one, METADATA_ACCEPT)
                    assert json.loads(metadata)["kind"] == "PartialObjectMetadata"

                # DELETE passes (kubectl's body: propagationPolicy Background)
                deleted = await run("delete", "pipelinerun", "run-1", "-n", env.ns, verbose=True)
                request = next(r for r in requests_logged(deleted.stderr) if r.method == "DELETE")
                assert json.loads(request.body) == {"propagationPolicy": "Background"}
                assert w1.list(*PR, namespace=env.ns) == []

        asyncio.run(scenario())
