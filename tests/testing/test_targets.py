"""Real clusters as a target of the end-to-end tests (mkpolicy.testing.targets, docs/testing.md).

No real cluster exists in CI, so the real-cluster code path is checked against loopback API
servers *dressed as* real clusters: their kubeconfigs are handed over through the
``MKPOLICY_E2E_*`` variables, and from then on they are reached only over HTTP, as a kind
cluster would be. The last test runs a representative part of the end-to-end suite that
way in a child pytest and checks, on the servers' own history, that it worked in test
namespaces only.
"""

from __future__ import annotations

import base64
import copy
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import kubernetes
import pytest
import yaml
from kubernetes.dynamic import DynamicClient

from mkpolicy.kube.kubeconfig import kueue_violations, make_kubeconfig
from mkpolicy.testing import fixtures
from mkpolicy.testing.apiserver import ApiError, ApiServer
from mkpolicy.testing.targets import (
    ENV_ALLOWED,
    ENV_INSTALL_CRDS,
    ENV_KEEP_NAMESPACES,
    ENV_NAMESPACE_PREFIX,
    NAMESPACE_LABEL,
    ROLES,
    TEST_ANNOTATION,
    LoopbackOnlyError,
    RealCluster,
    TargetConfig,
    TargetError,
    UnsafeRequestError,
    connect,
    context_var,
    flatten_kubeconfig,
    kubeconfig_var,
    namespace_of,
    real_clusters,
)

from .conftest import pipelinerun

ROOT = Path(__file__).resolve().parents[2]
FAKE_CA = b"-----BEGIN CERTIFICATE-----\nMIIBdummy\n-----END CERTIFICATE-----\n"
PR = ("tekton.dev/v1", "PipelineRun")


def kubeconfig_file(path: Path, *, context: str = "kind-manager", server: str = "https://127.0.0.1:6443",
                    **user: Any) -> Path:  # fmt: skip
    config = make_kubeconfig(server, FAKE_CA, "token", cluster=context)
    if user:
        config["users"][0]["user"] = user
    path.write_text(yaml.safe_dump(config))
    return path


def env_for(tmp: Path, servers: dict[str, ApiServer], **extra: str) -> dict[str, str]:
    """``MKPOLICY_E2E_*`` for ``servers`` dressed as real clusters (context name = server name)."""
    env = {kubeconfig_var(role): str(srv.write_kubeconfig(tmp / f"{role}.kubeconfig")) for role, srv in servers.items()}
    env[ENV_ALLOWED] = ",".join(servers)
    env.update(extra)
    return env


@pytest.fixture
def dressed() -> Iterator[dict[str, ApiServer]]:
    """A manager with the bundled CRDs and two workers without, started (not the apiserver_factory
    fixture: that one is skipped on real clusters, and these tests run on both)."""
    servers = {role: ApiServer(role, bundled=(role == "manager")).start() for role in ROLES}
    yield servers
    for srv in servers.values():
        srv.stop()


def test_no_kubeconfig_variables_means_the_loopback_server() -> None:
    assert TargetConfig.from_env({}) is None
    assert TargetConfig.from_env({ENV_ALLOWED: "kind-*", "PATH": "/bin"}) is None


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"MKPOLICY_E2E_WORKER_KUBECONFIG": "x"}, "unknown variable MKPOLICY_E2E_WORKER_KUBECONFIG (known: "),
        ({kubeconfig_var("worker1"): "{kc}", kubeconfig_var("worker2"): "{kc}"},
         "MKPOLICY_E2E_WORKER1_KUBECONFIG, MKPOLICY_E2E_WORKER2_KUBECONFIG set without MKPOLICY_E2E_MANAGER_KUBECONFIG"),
        ({kubeconfig_var("manager"): "{kc}", kubeconfig_var("worker1"): "{kc}", ENV_ALLOWED: "*"},
         "give both workers or neither"),
        ({kubeconfig_var("manager"): "{kc}", context_var("worker1"): "kind-worker1", ENV_ALLOWED: "*"},
         "MKPOLICY_E2E_WORKER1_CONTEXT is set but MKPOLICY_E2E_WORKER1_KUBECONFIG is not"),
        ({kubeconfig_var("manager"): "{kc}"}, "name the contexts that may be used in MKPOLICY_E2E_ALLOWED_CONTEXTS"),
        ({kubeconfig_var("manager"): "{kc}", ENV_ALLOWED: "kind-worker*, prod"},
         "context 'kind-manager' is not allowed by MKPOLICY_E2E_ALLOWED_CONTEXTS='kind-worker*,prod'"),
        ({kubeconfig_var("manager"): "{tmp}/absent", ENV_ALLOWED: "*"},
         "MKPOLICY_E2E_MANAGER_KUBECONFIG: cannot read kubeconfig: No such file or directory"),
        ({kubeconfig_var("manager"): "{kc}", context_var("manager"): "nope", ENV_ALLOWED: "*"},
         "MKPOLICY_E2E_MANAGER_KUBECONFIG: context 'nope' is not defined"),
        ({kubeconfig_var("manager"): "{kc}", ENV_ALLOWED: "*", ENV_INSTALL_CRDS: "maybe"},
         "MKPOLICY_E2E_INSTALL_CRDS='maybe': expected 1/true/yes or 0/false/no"),
        ({kubeconfig_var("manager"): "{kc}", ENV_ALLOWED: "*", ENV_NAMESPACE_PREFIX: "Team_A"},
         "MKPOLICY_E2E_NAMESPACE_PREFIX='Team_A': expected a DNS-1123 label"),
        ({kubeconfig_var("manager"): "{exec}", ENV_ALLOWED: "*"},
         "MKPOLICY_E2E_MANAGER_KUBECONFIG: context 'kind-manager': exec credential plugins are not supported"),
        ({kubeconfig_var("manager"): "{http}", ENV_ALLOWED: "*"},
         "MKPOLICY_E2E_MANAGER_KUBECONFIG: context 'kind-manager' breaks Kueue's MultiKueue kubeconfig rules, which "
         "the sidecar applies to it: cluster 'kind-manager': untrusted server endpoint 'https://bad_host:8080'"),
    ],
    ids=["unknown-variable", "workers-without-manager", "one-worker", "context-without-kubeconfig", "no-allow-list",
         "context-not-allowed", "unreadable", "no-such-context", "bad-flag", "bad-prefix", "exec-plugin",
         "kueue-rules"],
)  # fmt: skip
def test_configuration_errors_name_the_variable(tmp_path: Path, variables: dict[str, str], message: str) -> None:
    files = {
        "kc": kubeconfig_file(tmp_path / "kc"),
        "exec": kubeconfig_file(
            tmp_path / "exec", exec={"command": "aws", "apiVersion": "client.authentication.k8s.io/v1"}
        ),
        "http": kubeconfig_file(tmp_path / "http", server="https://bad_host:8080"),
        "tmp": tmp_path,
    }
    env = {k: v.format(**files) for k, v in variables.items()}
    with pytest.raises(TargetError) as info:
        TargetConfig.from_env(env)
    assert message in str(info.value)


def test_contexts_patterns_and_options(tmp_path: Path) -> None:
    two = make_kubeconfig("https://10.0.0.1:6443", FAKE_CA, "t1", cluster="kind-worker1")
    other = make_kubeconfig("https://10.0.0.2:6443", FAKE_CA, "t2", cluster="kind-worker2")
    for section in ("clusters", "users", "contexts"):
        two[section] += other[section]
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(two))  # current-context: kind-worker1
    env = {kubeconfig_var(r): str(path) for r in ROLES}
    env |= {context_var("manager"): "kind-worker1", context_var("worker1"): "kind-worker2",
            context_var("worker2"): "kind-worker1", ENV_ALLOWED: " kind-* ", ENV_INSTALL_CRDS: "yes",
            ENV_NAMESPACE_PREFIX: "ci-e2e", ENV_KEEP_NAMESPACES: "0"}  # fmt: skip
    config = TargetConfig.from_env(env)
    assert config is not None
    assert config.roles == ROLES and config.allowed_contexts == ("kind-*",)
    assert (config.install_crds, config.keep_namespaces, config.namespace_prefix) == (True, False, "ci-e2e")
    assert config.describe() == ("manager=kind-worker1 (https://10.0.0.1:6443); worker1=kind-worker2 "
                                 "(https://10.0.0.2:6443); worker2=kind-worker1 (https://10.0.0.1:6443)")  # fmt: skip
    flat = config.cluster("worker1").kubeconfig
    assert [c["name"] for c in flat["contexts"]] == ["kind-worker2"] and flat["users"][0]["user"] == {"token": "t2"}


def test_flatten_inlines_files_and_keeps_one_context(tmp_path: Path) -> None:
    (tmp_path / "ca.crt").write_bytes(FAKE_CA)
    (tmp_path / "client.crt").write_bytes(b"CERT")
    (tmp_path / "client.key").write_bytes(b"KEY")
    (tmp_path / "token").write_text("from-file\n")
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "a",
        "clusters": [{"name": "c", "cluster": {"server": "https://k:6443", "certificate-authority": "ca.crt"}},
                     {"name": "unused", "cluster": {"server": "https://other"}}],
        "users": [{"name": "u", "user": {"client-certificate": "client.crt", "client-key": str(tmp_path / "client.key"),
                                         "tokenFile": "token"}}],
        "contexts": [{"name": "a", "context": {"cluster": "c", "user": "u", "namespace": "ns"}},
                     {"name": "b", "context": {"cluster": "unused", "user": "u"}}],
    }  # fmt: skip
    flat = flatten_kubeconfig(config, "a", base_dir=str(tmp_path))
    cluster, user = flat["clusters"][0]["cluster"], flat["users"][0]["user"]
    assert cluster == {"server": "https://k:6443", "certificate-authority-data": base64.b64encode(FAKE_CA).decode()}
    assert user == {"token": "from-file", "client-certificate-data": base64.b64encode(b"CERT").decode(),
                    "client-key-data": base64.b64encode(b"KEY").decode()}  # fmt: skip
    assert flat["contexts"] == [{"name": "a", "context": {"cluster": "a", "user": "a", "namespace": "ns"}}]
    assert kueue_violations(flat) == []
    with pytest.raises(TargetError, match="cannot read the CA certificate '.*/elsewhere/ca.crt': No such file"):
        flatten_kubeconfig(config, "a", base_dir=str(tmp_path / "elsewhere"))


def test_namespace_of_paths() -> None:
    assert namespace_of("/api/v1/namespaces/t/configmaps/c") == "t"
    assert namespace_of("https://h:1/apis/tekton.dev/v1/namespaces/t/pipelineruns?watch=1") == "t"
    assert namespace_of("/api/v1/namespaces/t") == "t"  # the namespace object itself
    assert namespace_of("/api/v1/namespaces") is None
    assert namespace_of("/apis/apiextensions.k8s.io/v1/customresourcedefinitions") is None
    assert namespace_of("/apis/kueue.x-k8s.io/v1beta2/multikueueclusters/namespaces") is None
    assert namespace_of("/version") is None


def test_unreachable_and_refused_clusters(tmp_path: Path, dressed: dict[str, ApiServer]) -> None:
    env = env_for(tmp_path, {"manager": dressed["manager"]})
    dressed["manager"].faults.unreachable()
    config = TargetConfig.from_env(env)
    assert config is not None
    with pytest.raises(TargetError, match=r"cannot reach manager \(context manager, https://127\.0\.0\.1:\d+\): "):
        connect(config)
    dressed["manager"].faults.reachable()
    kc = yaml.safe_load(Path(env[kubeconfig_var("manager")]).read_text())
    kc["users"][0]["user"]["token"] = "not-the-token"
    Path(env[kubeconfig_var("manager")]).write_text(yaml.safe_dump(kc))
    with pytest.raises(TargetError, match=r"cannot authenticate to manager .*: 401 Unauthorized \(check the cred"):
        connect(TargetConfig.from_env(env))  # type: ignore[arg-type]


def test_the_same_cluster_twice_is_refused(tmp_path: Path, dressed: dict[str, ApiServer]) -> None:
    env = env_for(tmp_path, {"manager": dressed["manager"], "worker1": dressed["worker1"],
                             "worker2": dressed["worker1"]})  # fmt: skip
    config = TargetConfig.from_env(env)
    assert config is not None
    with pytest.raises(TargetError, match="worker2 and worker1 are the same cluster"):
        connect(config)


def test_missing_crds_are_an_error_or_installed(tmp_path: Path, dressed: dict[str, ApiServer]) -> None:
    config = TargetConfig.from_env(env_for(tmp_path, dressed))
    assert config is not None
    with pytest.raises(TargetError) as info:
        connect(config)
    message = str(info.value)
    assert "worker1 (context worker1, https://127.0.0.1:" in message and "worker2 (context worker2" in message
    assert "manager" not in message.split(". Install")[0]
    assert "serves no tekton.dev/v1 pipelineruns with a status subresource" in message
    assert "set MKPOLICY_E2E_INSTALL_CRDS=1" in message
    before = {role: srv.resource_version for role, srv in dressed.items()}
    config = TargetConfig.from_env(env_for(tmp_path, dressed, **{ENV_INSTALL_CRDS: "1"}))
    assert config is not None
    for conn in connect(config).values():
        conn.close()
    assert dressed["manager"].resource_version == before["manager"]  # it had the CRD: nothing written
    for role in ("worker1", "worker2"):
        crd = dressed[role].get("apiextensions.k8s.io/v1", "CustomResourceDefinition", "pipelineruns.tekton.dev")
        assert "conversion" not in crd["spec"] or crd["spec"]["conversion"].get("strategy") != "Webhook"
        assert dressed[role].list(*PR, namespace="default") == []


def test_an_existing_crd_is_never_replaced(tmp_path: Path, dressed: dict[str, ApiServer]) -> None:
    from mkpolicy.testing.apiserver import bundled_crds

    crd = copy.deepcopy(bundled_crds("pipelineruns.tekton.dev")[0])
    for version in crd["spec"]["versions"]:
        version.pop("subresources", None)  # an old or odd PipelineRun CRD: no status subresource
    dressed["worker2"].register_crd(crd)
    before = dressed["worker2"].resource_version
    config = TargetConfig.from_env(env_for(tmp_path, dressed, **{ENV_INSTALL_CRDS: "1"}))
    assert config is not None
    with pytest.raises(TargetError, match=r"worker2 .*: CRD pipelineruns.tekton.dev exists but does not serve .* "
                                          r"with a status subresource; it is left alone"):  # fmt: skip
        connect(config)
    assert dressed["worker2"].resource_version == before


def test_namespace_lifecycle(tmp_path: Path, dressed: dict[str, ApiServer]) -> None:
    config = TargetConfig.from_env(env_for(tmp_path, dressed, **{ENV_INSTALL_CRDS: "1"}))
    assert config is not None
    with real_clusters(config, ROLES, test="tests/x.py::test_y") as real:
        ns = real["manager"].namespace
        assert ns.startswith("mkpolicy-e2e-") and len(ns) == len("mkpolicy-e2e-") + 8
        for role, srv in dressed.items():
            assert real[role].namespace == ns and real[role].namespaces == {ns} and real[role].name == role
            meta = srv.get("v1", "Namespace", ns)["metadata"]
            assert meta["labels"][NAMESPACE_LABEL] == "true"
            assert meta["annotations"][TEST_ANNOTATION] == "tests/x.py::test_y"
            real[role].create(pipelinerun("inside", ns))
        assert real["worker1"].kubeconfig()["contexts"][0]["context"]["namespace"] == ns
    for srv in dressed.values():
        assert ns not in [n["metadata"]["name"] for n in srv.list("v1", "Namespace")]
        assert srv.list(*PR) == []  # the content went with the namespace
        # the PipelineRuns first (cluster-wide watches of the next test must not see them go), then the namespace
        gone = [e.rv for e in srv.store.collections[("tekton.dev", "pipelineruns")].history if e.type == "DELETED"]
        added, deletion, *_ = [e for e in srv.store.collections[("", "namespaces")].history if e.key == ("", ns)]
        assert added.type == "ADDED" and len(gone) == 1 and gone[0] < deletion.rv
    # a failing test still loses its namespace; the next one gets another name
    with pytest.raises(RuntimeError, match="test failed"), real_clusters(config, ("manager",)) as real:
        second = real["manager"].namespace
        raise RuntimeError("test failed")
    assert second != ns
    assert second not in [n["metadata"]["name"] for n in dressed["manager"].list("v1", "Namespace")]
    # MKPOLICY_E2E_KEEP_NAMESPACES=1 keeps them for a post-mortem
    keep = TargetConfig.from_env(env_for(tmp_path, dressed, **{ENV_KEEP_NAMESPACES: "1", ENV_INSTALL_CRDS: "1"}))
    assert keep is not None
    with real_clusters(keep, ("manager",)) as real:
        kept = real["manager"].namespace
    assert kept in [n["metadata"]["name"] for n in dressed["manager"].list("v1", "Namespace")]


@pytest.fixture
def real(tmp_path: Path, dressed: dict[str, ApiServer]) -> Iterator[RealCluster]:
    """The manager server, dressed as a real cluster, bound to a test namespace."""
    config = TargetConfig.from_env(env_for(tmp_path, {"manager": dressed["manager"]}))
    assert config is not None
    with real_clusters(config, ("manager",)) as targets:
        yield targets["manager"]


def test_the_direct_api_matches_the_loopback_one(real: RealCluster, dressed: dict[str, ApiServer]) -> None:
    srv, ns = dressed["manager"], real.namespace
    created = real.create(pipelinerun("a", ns))
    assert created == srv.get(*PR, "a", ns) == real.get(*PR, "a", ns)
    assert real.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}, namespace=ns)["kind"] == (
        "ConfigMap"
    )
    listed = real.list("v1", "ConfigMap", ns)
    assert [(o["apiVersion"], o["kind"], o["metadata"]["name"]) for o in listed] == [("v1", "ConfigMap", "c")]
    assert listed == srv.list("v1", "ConfigMap", ns)
    status = real.patch(*PR, "a", {"status": {"startTime": "2025-01-01T00:00:00Z"}}, namespace=ns, subresource="status")
    assert status["status"] == srv.get(*PR, "a", ns)["status"] == {"startTime": "2025-01-01T00:00:00Z"}
    ops = [{"op": "add", "path": "/metadata/labels", "value": {"x": "y"}}]
    assert real.patch(*PR, "a", ops, namespace=ns, patch_type="json")["metadata"]["labels"] == {"x": "y"}
    assert [o["metadata"]["name"] for o in real.list(*PR, label_selector="x=y")] == ["a"]
    obj = real.get(*PR, "a", ns)
    obj["spec"]["params"] = [{"name": "p", "value": "v"}]
    assert real.update(obj)["metadata"]["generation"] == 2
    with pytest.raises(ApiError) as stale:
        real.update(obj)
    assert stale.value.code == 409 and stale.value.reason == "Conflict"
    assert real.resource_version == srv.resource_version
    held = pipelinerun("held", ns)
    held["metadata"]["finalizers"] = ["example.com/hold"]
    real.create(held)
    assert real.delete(*PR, "held", ns)["metadata"]["deletionTimestamp"]  # type: ignore[index]
    assert real.delete(*PR, "a", ns) is None
    assert real.delete("v1", "ConfigMap", "c", ns) is None
    with pytest.raises(ApiError) as missing:
        real.get(*PR, "a", ns)
    assert missing.value.code == 404 and "not found" in missing.value.message
    with pytest.raises(ApiError, match="PipelineRun is namespaced"):
        real.get(*PR, "a")
    with pytest.raises(ApiError, match="no resource of kind Pipeline in tekton.dev/v1"):
        real.get("tekton.dev/v1", "Pipeline", "p", ns)


def test_writes_outside_the_test_namespace_are_refused(real: RealCluster, dressed: dict[str, ApiServer],
                                                       tmp_path: Path) -> None:  # fmt: skip
    srv = dressed["manager"]
    before = srv.resource_version
    api = real.api_client()
    core, custom = kubernetes.client.CoreV1Api(api), kubernetes.client.CustomObjectsApi(api)
    attempts = [
        lambda: real.create(pipelinerun("a", "default")),
        lambda: real.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "mine"}}),
        lambda: real.patch("v1", "Namespace", "default", {"metadata": {"labels": {"x": "y"}}}),
        lambda: real.delete("v1", "Namespace", "kube-system"),
        lambda: core.create_namespaced_config_map("default", {"metadata": {"name": "c"}}),
        lambda: core.delete_namespace("default"),
        lambda: custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "multikueueclusters",
                                                    {"metadata": {"name": "w"}}),
        lambda: kubernetes.client.ApiextensionsV1Api(api).delete_custom_resource_definition("pipelineruns.tekton.dev"),
        lambda: DynamicClient(api, cache_file=str(tmp_path / "discovery.json")).resources.get(
            api_version="v1", kind="ConfigMap").create(body={"metadata": {"name": "c"}}, namespace="kube-system"),
    ]  # fmt: skip
    for attempt in attempts:
        with pytest.raises(UnsafeRequestError, match=f"outside the test namespace '{real.namespace}'"):
            attempt()
    assert srv.resource_version == before  # nothing reached the server
    # reads go anywhere; writes inside the test namespace pass
    assert "default" in [n.metadata.name for n in core.list_namespace().items]
    core.create_namespaced_config_map(real.namespace, {"metadata": {"name": "c"}})
    assert [c["metadata"]["name"] for c in srv.list("v1", "ConfigMap", real.namespace)] == ["c"]
    api.close()


def test_loopback_only_features_say_how_to_mark_the_test(real: RealCluster) -> None:
    for use in (lambda: real.faults, real.compact, lambda: real.store, lambda: real.token, lambda: real.ca_pem,
                real.wait_for_watches, real.watch_count, lambda: real.register_crd({})):  # fmt: skip
        with pytest.raises(LoopbackOnlyError, match=r"real cluster\. Mark the test @pytest\.mark\.loopback_only"):
            use()


def test_pytest_plumbing(tmp_path: Path, dressed: dict[str, ApiServer], monkeypatch: pytest.MonkeyPatch) -> None:
    for key in [k for k in os.environ if k.startswith("MKPOLICY_E2E_")]:
        monkeypatch.delenv(key)
    with pytest.raises(RuntimeError, match="no real cluster is configured"), fixtures.real_cluster_targets(ROLES):
        pass
    # a bad environment stops pytest before any test runs
    monkeypatch.setenv(kubeconfig_var("manager"), str(tmp_path / "absent"))
    monkeypatch.setenv(ENV_ALLOWED, "*")

    class Config:
        def addinivalue_line(self, name: str, line: str) -> None:
            assert name == "markers" and line.startswith("loopback_only(reason):")

    with pytest.raises(
        pytest.UsageError, match=r"^mkpolicy end-to-end target: .*MKPOLICY_E2E_MANAGER_KUBECONFIG: cannot read"
    ):
        fixtures.pytest_configure(Config())  # type: ignore[arg-type]
    # only a manager: tests that need three clusters skip, saying what to set
    for key, value in env_for(tmp_path, {"manager": dressed["manager"]}).items():
        monkeypatch.setenv(key, value)
    with (
        pytest.raises(pytest.skip.Exception, match="set MKPOLICY_E2E_WORKER1_KUBECONFIG and MKPOLICY_E2E_WORKER2_"),
        fixtures.real_cluster_targets(ROLES),
    ):
        pass
    # a configured cluster that cannot be used stops the run before the first test, or at a test
    dressed["manager"].faults.unreachable()

    session = SimpleNamespace(config=SimpleNamespace(option=SimpleNamespace(collectonly=False)))
    with pytest.raises(pytest.exit.Exception, match=r"^mkpolicy end-to-end target: cannot reach manager \(context"):
        fixtures.pytest_sessionstart(session)  # type: ignore[arg-type]
    with (
        pytest.raises(pytest.exit.Exception, match="mkpolicy end-to-end target: cannot reach manager"),
        fixtures.real_cluster_targets(("manager",)),
    ):
        pass


# The representative part of the suite the child run is asked for, and what each must give.
SELECTION = {
    "tests/sidecar/test_sidecar_e2e.py::test_dispatch_and_status_write_back[label]": "passed",
    "tests/sidecar/test_sidecar_e2e.py::test_cluster_variable_and_derived_status": "passed",
    "tests/sidecar/test_sidecar_e2e.py::test_refusals_create_nothing": "passed",
    "tests/sidecar/test_sidecar_e2e.py::test_passthrough_is_byte_identical": "loopback only: compares bytes",
    "tests/sidecar/test_sidecar_faults.py::test_worker_down_and_back": "loopback only: takes a worker down",
    "tests/sidecar/test_sidecar_wiring.py::test_wire_unwire_round_trips": "loopback only: writes Secrets in kueue-sys",
    "tests/testing/test_crud.py::test_direct_python_api_matches_http": "passed",
    "tests/testing/test_crud.py::test_unknown_fields_are_pruned_with_warning_or_rejected": "passed",
    "tests/testing/test_crud.py::test_crd_without_status_subresource": "loopback only: registers a CRD",
    "tests/testing/test_watch.py::test_watch_resumes_from_a_resource_version": "passed",
    "tests/testing/test_watch.py::test_history_limit_expires_old_versions": "loopback only: starts loopback servers",
    "tests/testing/test_errors.py::test_health_needs_no_token": "loopback only: the loopback server's own error",
}


def _outcomes(junit: Path) -> dict[str, str]:
    out = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        module = case.get("classname", "").replace(".", "/") + ".py"
        node = f"{module}::{case.get('name')}"
        skipped, failed = case.find("skipped"), case.find("failure")
        if failed is None:  # (an Element without children is falsy: no `or` here)
            failed = case.find("error")
        if failed is not None:
            out[node] = "failed: " + (failed.get("message") or "")
        elif skipped is not None:
            out[node] = (skipped.get("message") or "").removeprefix("Skipped: ")
        else:
            out[node] = "passed"
    return out


def _history(server: ApiServer, since: int) -> list[tuple[str, str, str, dict[str, Any]]]:
    """Every change the server stored after ``since``: (resource, type, namespace, object)."""
    out = []
    for (group, plural), coll in server.store.collections.items():
        for event in coll.events_after(since):
            meta = event.obj.obj.get("metadata") or {}
            out.append((f"{plural}.{group}" if group else plural, event.type, meta.get("namespace", ""), event.obj.obj))
    return out


@pytest.mark.timeout(180)
def test_e2e_tests_run_on_loopback_servers_dressed_as_real_clusters(tmp_path: Path,
                                                                    dressed: dict[str, ApiServer]) -> None:  # fmt: skip
    """The e2e tests themselves, through the real-cluster code path: they pass, loopback-only ones skip,
    and the servers' history shows they wrote inside their own test namespaces only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MKPOLICY_E2E_")}
    env |= env_for(tmp_path, dressed, **{ENV_INSTALL_CRDS: "1"})
    since = {role: srv.resource_version for role, srv in dressed.items()}
    junit = tmp_path / "junit.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", f"--junitxml={junit}", *SELECTION],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=170, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    outcomes = _outcomes(junit)
    assert set(outcomes) == set(SELECTION), outcomes
    for node, expected in SELECTION.items():
        assert outcomes[node].startswith(expected), (node, outcomes[node])
    assert "mkpolicy end-to-end target: real clusters" in proc.stdout
    assert "6 test(s) skipped as loopback only" in proc.stdout

    changes = {role: _history(srv, since[role]) for role, srv in dressed.items()}
    created = {role: {obj["metadata"]["name"]: obj["metadata"]["annotations"][TEST_ANNOTATION]
                      for res, kind, _, obj in events if res == "namespaces" and kind == "ADDED"}
               for role, events in changes.items()}  # fmt: skip
    passed = {n for n, o in outcomes.items() if o == "passed"}
    # one namespace per test that ran: on the manager for every one, on the workers for the sidecar ones
    assert sorted(created["manager"].values()) == sorted(passed)
    sidecar = {ns: test for ns, test in created["manager"].items() if test.startswith("tests/sidecar/")}
    assert len(sidecar) == 3
    assert created["worker1"] == created["worker2"] == sidecar  # the same name on every cluster
    for role, events in changes.items():
        for resource, kind, namespace, obj in events:
            name = obj["metadata"]["name"]
            if resource == "namespaces":
                assert name in created[role], (role, kind, name)
            elif resource == "customresourcedefinitions.apiextensions.k8s.io":  # opted in: the workers lacked it
                assert (role, kind, name) in {("worker1", "ADDED", "pipelineruns.tekton.dev"),
                                              ("worker2", "ADDED", "pipelineruns.tekton.dev")}  # fmt: skip
            else:
                assert namespace in created[role], (role, resource, kind, namespace, name)
        # every test namespace is gone again
        names = {n["metadata"]["name"] for n in dressed[role].list("v1", "Namespace")}
        assert names.isdisjoint(created[role]), names
    assert any(res == "pipelineruns.tekton.dev" for res, _, _, _ in changes["worker1"])  # work reached the workers
