"""On a real kube-apiserver (v1.36, built by the real-peer harness, ``mkpolicy.testing.peers``):
the exported admission policies as kube-apiserver runs them, and the controller's lifecycle
with the test playing Kueue's scheduler. Skipped where the harness or Go is missing."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("mkpolicy.testing.peers.controlplane", reason="the real-peer harness (mkpolicy.testing.peers)")
from controller_harness import CRD, MARKER, POLICY, WL, Kueue, batchrun, client, condition, controller, eventually

import mkpolicy.testing
from mkpolicy.engine.admission_policies import AdmissionOptions, admission_manifests
from mkpolicy.policy import load
from mkpolicy.testing.apiserver import ApiError

# (after the skip: the marks are registered where the harness is, with pytest-timeout)
pytestmark = [pytest.mark.real_peers, pytest.mark.timeout(600)]

KUEUE_CRDS = ("workloads", "resourceflavors", "localqueues", "clusterqueues")
_names = itertools.count()


@pytest.fixture
def kube(real_kube: Any) -> Iterator[tuple[Any, str]]:
    """The real cluster with Kueue's and BatchRun's CRDs, a fresh namespace, the spot flavor."""
    crd_dir = Path(mkpolicy.testing.__file__).parent / "crds"
    crds = [yaml.safe_load((crd_dir / f"kueue.x-k8s.io_{name}.yaml").read_text()) for name in KUEUE_CRDS]
    real_kube.install_crds([*crds, yaml.safe_load(CRD.read_text())])
    admin = real_kube.admin
    namespace = f"integration-{next(_names)}"
    admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    for ns in ("kueue-system",):
        with contextlib.suppress(ApiError):
            admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    real_kube.apply({"apiVersion": WL, "kind": "ResourceFlavor", "metadata": {"name": "spot"},
                     "spec": {"nodeLabels": {"cloud.example.com/pool": "spot"},
                              "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]}})  # fmt: skip
    yield real_kube, namespace
    admin.delete("v1", "Namespace", namespace)


def test_the_exported_admission_policies_on_kube_apiserver(kube: tuple[Any, str]) -> None:
    cluster, namespace = kube
    admin = cluster.admin
    policy = load(str(POLICY))[0]
    options = AdmissionOptions(name_prefix=f"t{namespace}", namespace_selector={
        "matchLabels": {"kubernetes.io/metadata.name": namespace}})  # fmt: skip
    manifests = admission_manifests(policy, options)
    for manifest in manifests:
        cluster.apply(manifest)
    admin.create({"apiVersion": WL, "kind": "LocalQueue", "metadata": {"name": "default", "namespace": namespace},
                  "spec": {"clusterQueue": "cq"}})  # fmt: skip

    def created(obj: dict[str, Any]) -> dict[str, Any]:
        # Policies take effect once kube-apiserver's informers see them, each on its own, and a MAP
        # whose paramKind is a CRD's kind (LocalQueue) only once kube-apiserver's admission REST
        # mapper has seen that CRD: it is reset every 30 s (k8s.io/apiserver
        # pkg/server/options/admission.go). Create until both the default queue's and the
        # suspension's have acted; generous for a busy machine.
        deadline = time.monotonic() + 300
        last = "nothing yet"
        for attempt in itertools.count():
            body = {**obj, "metadata": {**obj["metadata"], "name": f"{obj['metadata']['name']}-{attempt}"}}
            try:
                stored = dict(admin.create(body))
            except ApiError as exc:  # (also: a new CRD can take a moment to be served)
                last = f"refused: {exc}"
            else:
                meta = stored["metadata"]
                if (meta.get("labels") or {}).get("kueue.x-k8s.io/queue-name") and MARKER in (
                    meta.get("annotations") or {}
                ):
                    return stored
                last = f"stored with labels {meta.get('labels')} and annotations {meta.get('annotations')}"
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the admission policies never applied in 300 s ({attempt + 1} creates; last: {last})"
                )
            time.sleep(0.2)
        raise AssertionError("unreachable")

    unlabelled = batchrun("plain", marked=False, suspend=None, namespace=namespace)
    del unlabelled["metadata"]["labels"]
    stored = created(unlabelled)
    assert stored["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "default"
    assert stored["spec"]["suspend"] is True
    assert stored["metadata"]["annotations"] == {MARKER: "true"}

    mine = admin.create(batchrun("mine", marked=False, suspend=True, namespace=namespace))
    assert MARKER not in (mine["metadata"].get("annotations") or {})  # the user's suspension stays unmarked

    running = dict(stored)
    running["spec"] = {**running["spec"], "suspend": False}
    running = dict(admin.update(running))
    running["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "other"
    with pytest.raises(ApiError) as refused:
        admin.update(running)
    assert "queue-name]: Invalid value: field is immutable" in str(refused.value)


def test_the_controller_on_kube_apiserver(kube: tuple[Any, str]) -> None:
    cluster, namespace = kube
    kueue = Kueue(cluster.admin, namespace)

    async def scenario() -> None:
        async with controller(cluster, lease_namespace="kueue-system", lease_name=f"lease-{namespace}"):
            await asyncio.to_thread(cluster.admin.create, batchrun(namespace=namespace))
            wl = await eventually(kueue.workload, timeout=30, what="the Workload")
            assert wl["metadata"]["ownerReferences"][0]["kind"] == "BatchRun"
            await asyncio.to_thread(kueue.admit, wl)
            started = await eventually(lambda: (j := kueue.job())["spec"]["suspend"] is False and j, timeout=30,
                                       what="started")  # fmt: skip
            assert started["spec"]["template"]["spec"]["nodeSelector"] == {"cloud.example.com/pool": "spot"}
            await asyncio.to_thread(kueue.evict, kueue.the_workload())
            await eventually(lambda: kueue.job()["spec"]["suspend"] is True, timeout=30, what="stopped")
            released = await eventually(
                lambda: (w := kueue.workload()) and condition(w, "QuotaReserved")["status"] == "False" and w,  # type: ignore[index]
                timeout=30, what="the quota released")  # fmt: skip
            assert condition(released, "Requeued")["status"] == "True"  # type: ignore[index]
            await asyncio.to_thread(kueue.admit, released)
            await eventually(lambda: kueue.job()["spec"]["suspend"] is False, timeout=30, what="restarted")
            done = kueue.job()
            done["status"] = {"conditions": [{"type": "Complete", "status": "True", "message": "ok"}]}
            await asyncio.to_thread(cluster.admin.update, done, subresource="status")
            finished = await eventually(lambda: condition(kueue.workload(), "Finished"), timeout=30, what="finished")
            assert finished["reason"] == "Succeeded"

    asyncio.run(scenario())


def test_the_controller_needs_no_more_than_the_exported_rbac(kube: tuple[Any, str]) -> None:
    """The controller as a ServiceAccount bound to 'mkpolicy export controller-rbac' only (kube-apiserver
    authorizes with RBAC): the lifecycle still works."""
    from mkpolicy.lint.export import controller_rbac

    cluster, namespace = kube
    admin = cluster.admin
    prefix = f"rbac-{namespace}"
    for doc in yaml.safe_load_all(controller_rbac(load(str(POLICY)), prefix)):
        if doc:
            cluster.apply(doc)
    admin.create(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "controller", "namespace": namespace}}
    )
    cluster.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": f"{prefix}-controller"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"{prefix}-controller"},
                   "subjects": [{"kind": "ServiceAccount", "name": "controller", "namespace": namespace}]})  # fmt: skip
    config: dict[str, Any] = cluster.kubeconfig()

    class AsServiceAccount:
        def kubeconfig(self) -> dict[str, Any]:
            return config

    kueue = Kueue(admin, namespace)

    async def scenario() -> None:
        async with client(cluster) as kube:
            issued = await kube.create(
                f"/api/v1/namespaces/{namespace}/serviceaccounts/controller/token",
                {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}},
            )
        config["users"] = [{"name": "controller", "user": {"token": issued["status"]["token"]}}]
        for context in config["contexts"]:
            context["context"]["user"] = "controller"
        async with controller(AsServiceAccount(), lease_name=f"lease-{prefix}"):
            await asyncio.to_thread(admin.create, batchrun(namespace=namespace))
            wl = await eventually(kueue.workload, timeout=30, what="the Workload")
            await asyncio.to_thread(kueue.admit, wl)
            await eventually(lambda: kueue.job()["spec"]["suspend"] is False, timeout=30, what="started")

    asyncio.run(scenario())


def test_mkpolicy_webhook_on_kube_apiserver(kube: tuple[Any, str], tmp_path: Path) -> None:
    """'mkpolicy webhook' called by kube-apiserver through the rendered webhook configurations
    (in URL form: no Service here): the same admission as the admission policies."""
    import socket
    import subprocess
    import sys

    from mkpolicy.engine.admission_policies import webhook_configurations
    from mkpolicy.kube.certs import make_ca, make_serving_cert

    cluster, namespace = kube
    admin = cluster.admin
    ca = make_ca()
    pair = make_serving_cert(ca, ["127.0.0.1"])
    (tmp_path / "tls.crt").write_bytes(pair.cert_pem)
    (tmp_path / "tls.key").write_bytes(pair.key_pem)
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "mkpolicy", "webhook", "--policies", str(POLICY),
                             "--tls-cert", str(tmp_path / "tls.crt"), "--tls-key", str(tmp_path / "tls.key"),
                             "--address", "127.0.0.1", "--port", str(port), "--kubeconfig", str(kubeconfig)],
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    options = AdmissionOptions(name_prefix=f"w{namespace}", namespace_selector={
        "matchLabels": {"kubernetes.io/metadata.name": namespace}})  # fmt: skip
    try:
        admin.create({"apiVersion": WL, "kind": "LocalQueue", "metadata": {"name": "default", "namespace": namespace},
                      "spec": {"clusterQueue": "cq"}})  # fmt: skip
        for config in webhook_configurations([load(str(POLICY))[0]], ("unused", "unused"), ca.cert_pem, options):
            for hook in config["webhooks"]:
                path = hook["clientConfig"]["service"]["path"]
                hook["clientConfig"] = {
                    "url": f"https://127.0.0.1:{port}{path}",
                    "caBundle": hook["clientConfig"]["caBundle"],
                }
            cluster.apply(config)
        plain = batchrun("plain", marked=False, suspend=None, namespace=namespace)
        del plain["metadata"]["labels"]
        stored: dict[str, Any] = {}
        for attempt in range(300):  # until the server listens and kube-apiserver sees the configuration
            body = {**plain, "metadata": {**plain["metadata"], "name": f"plain-{attempt}"}}
            with contextlib.suppress(ApiError):
                stored = dict(admin.create(body))
                if (stored["metadata"].get("labels") or {}).get("kueue.x-k8s.io/queue-name"):
                    break
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.1)
        assert stored["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "default"
        assert stored["spec"]["suspend"] is True and stored["metadata"]["annotations"] == {MARKER: "true"}
        running = dict(admin.update({**stored, "spec": {**stored["spec"], "suspend": False}}))
        running["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "other"
        with pytest.raises(ApiError) as refused:
            admin.update(running)
        assert "queue-name]: Invalid value: field is immutable" in str(refused.value)
    finally:
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            with contextlib.suppress(ApiError):
                admin.delete("admissionregistration.k8s.io/v1", kind, f"w{namespace}-admission")
        proc.terminate()
        proc.communicate(timeout=30)
