"""mkpolicy webhook: the admission policies as AdmissionReview webhooks (same CEL, same results)."""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import ssl
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from controller_harness import POLICY, batchrun, client, server

from mkpolicy.check import load_checked
from mkpolicy.cli.main import main
from mkpolicy.controller.webhook import AdmissionWebhook, json_patch, server_tls
from mkpolicy.engine.admission_policies import AdmissionOptions
from mkpolicy.engine.jsonpatch import apply_json_patch
from mkpolicy.kube.certs import make_ca, make_serving_cert
from mkpolicy.kube.kueueconfig import KueueConfig

MARKER = "kueue.mkpolicy.io/suspended-by-kueue"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ({"a": 1}, {"a": 1}),
        ({"a": 1}, {"a": 2, "b": {"c/d": [1]}}),
        ({"m": {"x": 1, "y": 2}}, {"m": {"x": 1}}),
        ({"l": [1, 2]}, {"l": [2]}),
        ({"v": 1}, {"v": True}),
        ({"k~": {}}, {"k~": {"z": None}}),
    ],
)
def test_json_patch_turns_old_into_new(old: dict[str, Any], new: dict[str, Any]) -> None:
    ops = json_patch(old, new)
    assert apply_json_patch(copy.deepcopy(old), ops) == new
    assert (ops == []) == (old == new and all(type(old[k]) is type(new[k]) for k in old))


def review(obj: dict[str, Any], operation: str = "CREATE", old: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "kind": {"group": "batch.example.com", "version": "v1alpha1", "kind": "BatchRun"},
            "namespace": obj["metadata"]["namespace"],
            "operation": operation,
            "object": obj,
            "oldObject": old,
        },
    }


def test_the_webhook_mutates_and_validates_as_the_admission_policies(tmp_path: Path) -> None:
    ca = make_ca()
    pair = make_serving_cert(ca, ["127.0.0.1"])
    (tmp_path / "tls.crt").write_bytes(pair.cert_pem)
    (tmp_path / "tls.key").write_bytes(pair.key_pem)
    with server() as srv:
        srv.create({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                    "metadata": {"name": "default", "namespace": "default"}, "spec": {"clusterQueue": "cq"}})  # fmt: skip

        async def scenario() -> None:
            async with client(srv) as kube:
                hook = AdmissionWebhook(load_checked([str(POLICY)]), AdmissionOptions(), kube)
                runner = web.AppRunner(hook.app())
                await runner.setup()
                site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_tls(str(tmp_path / "tls.crt"),
                                                                                    str(tmp_path / "tls.key")))  # fmt: skip
                await site.start()
                port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
                tls = ssl.create_default_context(cadata=ca.cert_pem.decode())
                try:
                    async with aiohttp.ClientSession() as http:
                        plain = batchrun(marked=False, suspend=None)
                        del plain["metadata"]["labels"]
                        async with http.post(f"https://127.0.0.1:{port}/mutate", json=review(plain), ssl=tls) as resp:
                            answer = (await resp.json())["response"]
                        assert (
                            answer["uid"] == "u-1" and answer["allowed"] is True and answer["patchType"] == "JSONPatch"
                        )
                        mutated = apply_json_patch(copy.deepcopy(plain), json.loads(base64.b64decode(answer["patch"])))
                        assert mutated["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "default"}
                        assert mutated["metadata"]["annotations"] == {MARKER: "true"}
                        assert mutated["spec"]["suspend"] is True

                        running = copy.deepcopy(mutated)
                        running["spec"]["suspend"] = False
                        moved = copy.deepcopy(running)
                        moved["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "other"
                        async with http.post(f"https://127.0.0.1:{port}/validate", ssl=tls,
                                             json=review(moved, "UPDATE", running)) as resp:  # fmt: skip
                            answer = (await resp.json())["response"]
                        assert answer["allowed"] is False
                        assert "queue-name]: Invalid value: field is immutable" in answer["status"]["message"]
                        async with http.post(f"https://127.0.0.1:{port}/validate", ssl=tls, json={"x": 1}) as resp:
                            assert resp.status == 400
                finally:
                    await runner.cleanup()

        asyncio.run(scenario())


def test_export_webhook_configurations(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    (tmp_path / "ca.crt").write_bytes(make_ca().cert_pem)
    assert main(["export", "admission", "--policies", str(POLICY), "--webhook", "kueue-system/mkpolicy-webhook",
                 "--ca-bundle", str(tmp_path / "ca.crt")]) == 0  # fmt: skip
    mutating, validating = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]
    assert mutating["kind"] == "MutatingWebhookConfiguration" and validating["kind"] == "ValidatingWebhookConfiguration"
    (hook,) = mutating["webhooks"]
    assert hook["clientConfig"]["service"] == {"namespace": "kueue-system", "name": "mkpolicy-webhook",
                                               "path": "/mutate", "port": 9443}  # fmt: skip
    assert hook["rules"][0]["resources"] == ["batchruns"] and hook["reinvocationPolicy"] == "IfNeeded"
    assert main(["export", "admission", "--policies", str(POLICY), "--webhook", "nope"]) == 2


def test_the_webhook_reads_the_namespace_for_managed_jobs_namespace_selector() -> None:
    """With manageJobsWithoutQueueName an object without a queue name is suspended only in a namespace
    managedJobsNamespaceSelector selects (``namespaceMatchesSelector``, jobframework/utils.go)."""
    with server() as srv:
        for name, labels in (("on", {"kueue": "on"}), ("off", {})):
            srv.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
        config = KueueConfig(manage_jobs_without_queue_name=True, managed_jobs_namespace_selector={
            "matchLabels": {"kueue": "on"}})  # fmt: skip

        async def scenario() -> None:
            async with client(srv) as kube:
                hook = AdmissionWebhook(load_checked([str(POLICY)]), AdmissionOptions(kueue=config), kube)
                for ns, patched in (("on", True), ("off", False)):
                    plain = batchrun(marked=False, suspend=None, namespace=ns)
                    del plain["metadata"]["labels"]
                    answer = await hook.mutate(review(plain)["request"])
                    assert ("patch" in answer) is patched
                    if patched:
                        mutated = apply_json_patch(copy.deepcopy(plain), json.loads(base64.b64decode(answer["patch"])))
                        assert mutated["spec"]["suspend"] is True
                        assert mutated["metadata"]["annotations"] == {MARKER: "true"}

        asyncio.run(scenario())
