"""The Kueue model's pieces, table by table: kubeconfig rules, versions, encoding, rate limits."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import pytest
import yaml

from mkpolicy.kube.certs import make_ca
from mkpolicy.testing.kueue import KubeconfigRefused, KueueVersion, clone_for_creation, go_json, retry_after
from mkpolicy.testing.kueue.adapter import prebuilt_workload_name, set_multikueue_meta
from mkpolicy.testing.kueue.goclient import TokenBucket, query_string
from mkpolicy.testing.kueue.kubeconfig import is_valid_hostname, load
from mkpolicy.testing.kueue.reconcile import set_condition
from mkpolicy.testing.kueue.simulate import workload_name

CA = base64.b64encode(make_ca("kueue-model-test").cert_pem).decode()


def kubeconfig(cluster: dict[str, Any] | None = None, user: dict[str, Any] | None = None, **top: Any) -> bytes:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "w", "cluster": {"server": "https://10.0.0.1:6443", "certificate-authority-data": CA,
                                               **(cluster or {})}}],
        "users": [{"name": "u", "user": {"token": "t", **(user or {})}}],
        "contexts": [{"name": "c", "context": {"cluster": "w", "user": "u"}}],
        "current-context": "c",
        **top,
    }  # fmt: skip
    return yaml.safe_dump(doc).encode()


# multikueuecluster.go validateKubeconfig / validateRestConfig / isValidHostname (v0.15 to main)
REFUSED = [
    ("tokenFile", kubeconfig(user={"tokenFile": "/var/run/token"}), "tokenFile is not allowed"),
    ("insecure", kubeconfig({"insecure-skip-tls-verify": True}), "insecure TLS verification is not allowed for cluster w"),
    ("CA path", kubeconfig({"certificate-authority": "/ca.crt"}),
     "certificate-authority file paths are not allowed, use certificate-authority-data for cluster w"),
    ("empty server", kubeconfig({"server": ""}), "server URL is required for cluster w"),
    ("basic auth", kubeconfig(user={"token": None, "username": "a", "password": "b"}), "basic auth is not allowed"),
    ("exec", kubeconfig(user={"exec": {"command": "aws", "apiVersion": "client.authentication.k8s.io/v1",
                                       "interactiveMode": "Never"}}), "exec plugins are not allowed"),
    ("exec without interactiveMode",
     kubeconfig(user={"exec": {"command": "aws", "apiVersion": "client.authentication.k8s.io/v1"}}),
     "invalid configuration: interactiveMode must be specified for u to use exec authentication plugin"),
    ("auth-provider", kubeconfig(user={"auth-provider": {"name": "oidc"}}), "auth providers are not allowed"),
    ("host with underscore", kubeconfig({"server": "https://my_host:6443"}), "untrusted server endpoint"),
    ("IPv6 without port", kubeconfig({"server": "https://[::1]"}), "untrusted server endpoint"),
    ("no scheme, IP and port", kubeconfig({"server": "10.0.0.1:6443"}), "untrusted server endpoint"),
    ("no current context", kubeconfig(**{"current-context": ""}), "invalid configuration: no configuration has been provided"),
    ("unknown context", kubeconfig(**{"current-context": "nope"}), "context was not found for specified context: nope"),
    ("not YAML", b"{[", "failed to parse kubeconfig(apiconfig)"),
]  # fmt: skip

ACCEPTED = [
    ("token and CA data", kubeconfig()),
    ("http, no CA", kubeconfig({"server": "http://worker.example.com:8080", "certificate-authority-data": None})),
    ("system roots", kubeconfig({"certificate-authority-data": None})),
    ("upper-case host", kubeconfig({"server": "https://Worker.Example.COM"})),
    ("IPv6 with port", kubeconfig({"server": "https://[fd00::1]:6443"})),
    ("proxy-url", kubeconfig({"proxy-url": "http://proxy.corp:3128"})),
    ("user info in the URL", kubeconfig({"server": "https://me@worker.example.com"})),
    ("a tokenFile of another user", yaml.safe_dump({**yaml.safe_load(kubeconfig()), "users": [
        {"name": "u", "user": {"token": "t"}}]}).encode()),
]  # fmt: skip


@pytest.mark.parametrize(("name", "data", "message"), REFUSED, ids=[r[0] for r in REFUSED])
def test_kubeconfigs_kueue_refuses(name: str, data: bytes, message: str) -> None:
    with pytest.raises(KubeconfigRefused) as err:
        load(data)
    assert err.value.reason == "InsecureKubeConfig"
    assert message in err.value.message


@pytest.mark.parametrize(("name", "data"), ACCEPTED, ids=[a[0] for a in ACCEPTED])
def test_kubeconfigs_kueue_accepts(name: str, data: bytes) -> None:
    config = load(data)
    assert config.server.startswith(("https://", "http://"))


def test_client_certificate_files_are_accepted(tmp_path: Any) -> None:
    ca = make_ca("client")
    cert, key = tmp_path / "c.crt", tmp_path / "c.key"
    cert.write_bytes(ca.cert_pem)
    key.write_bytes(ca.key_pem)
    config = load(kubeconfig(user={"token": None, "client-certificate": str(cert), "client-key": str(key)}))
    assert config.client_cert_pem == ca.cert_pem
    with pytest.raises(KubeconfigRefused, match="unable to read client-certificate"):
        load(kubeconfig(user={"token": None, "client-certificate": str(tmp_path / "gone"), "client-key": str(key)}))


def test_the_insecure_gate_skips_the_rules() -> None:
    """MultiKueueAllowInsecureKubeconfigs (v0.15-v0.18): Kueue's rules off; client-go's still apply."""
    assert load(kubeconfig({"insecure-skip-tls-verify": True}), allow_insecure=True).insecure
    with pytest.raises(KubeconfigRefused, match="no configuration has been provided"):
        load(kubeconfig(**{"current-context": ""}), allow_insecure=True)


@pytest.mark.parametrize(
    ("server", "valid"),
    [("https://10.1.2.3", True), ("https://a.b-c.d:443/x", True), ("https://A.B", False),  # lower-cased by the caller
     ("https://-a.b", False), ("https://a..b", False), ("https://[::1]:1", True), ("https://fe80::1%eth0", False),
     ("https://01.2.3.4", True),  # not an IP for Go, but a valid DNS-1123 subdomain
     ("https://" + "a" * 254, False), ("unix:///sock", False)],
)  # fmt: skip
def test_is_valid_hostname(server: str, valid: bool) -> None:
    assert is_valid_hostname(server) is valid


@pytest.mark.parametrize(
    ("version", "ownership", "clone", "identifier", "fallback", "read_first"),
    [("0.15", False, False, "label", False, True), ("0.16.9", False, False, "label", False, False),
     ("0.17.5", False, False, "label", False, False), ("0.17.6", True, False, "label", False, False),
     ("0.17.7", True, True, "label", False, False), ("0.18.1", False, False, "annotation", False, False),
     ("0.18.2", True, False, "annotation", False, False), ("0.18.3", True, True, "annotation", False, False),
     ("0.18.5", True, True, "annotation", True, False), ("0.19.0", True, True, "annotation", False, False),
     ("0.19.1", True, True, "annotation", True, False), ("main", True, True, "annotation", True, False)],
)  # fmt: skip
def test_versions(
    version: str, ownership: bool, clone: bool, identifier: str, fallback: bool, read_first: bool
) -> None:
    """What changed when (tags of kubernetes-sigs/kueue; mkpolicy/testing/kueue/versions.py)."""
    v = KueueVersion.parse(version)
    assert (v.ownership_check, v.generic_clone, v.default_identifier, v.identifier_fallback, v.reads_before_delete) == (
        ownership, clone, identifier, fallback, read_first,
    )  # fmt: skip


def test_version_errors() -> None:
    with pytest.raises(ValueError, match="expected 0.MINOR"):
        KueueVersion.parse("1.0")
    with pytest.raises(ValueError, match="modelled from v0.15"):
        KueueVersion.parse("0.14.2")


LONG = "pipelinerun-" + "x" * 60


@pytest.mark.parametrize(
    ("version", "identifier", "name", "where"),
    [("0.19.2", "annotation", "wl", "annotation"), ("0.19.2", "label", "wl", "label"),
     ("0.19.2", "label", LONG, "annotation"), ("0.18.4", "label", LONG, "label"), ("0.16", "label", LONG, "label")],
)  # fmt: skip
def test_prebuilt_workload_identifier(version: str, identifier: Any, name: str, where: str) -> None:
    """SetPrebuiltWorkloadName / PrebuiltWorkloadNameFor: label mode falls back to the annotation
    for names over 63 characters from v0.18.5/v0.19.1 (before, the label is written anyway)."""
    v = KueueVersion.parse(version)
    obj: dict[str, Any] = {"metadata": {}}
    set_multikueue_meta(obj, name, "multikueue", v, identifier)
    key = "kueue.x-k8s.io/prebuilt-workload-name"
    assert obj["metadata"]["annotations" if where == "annotation" else "labels"][key] == name
    assert prebuilt_workload_name(obj, v, identifier) == name


def test_clone_for_creation() -> None:
    local = {"apiVersion": "tekton.dev/v1", "kind": "PipelineRun",
             "metadata": {"name": "r", "namespace": "n", "uid": "u", "resourceVersion": "7", "labels": {"a": "b"},
                          "ownerReferences": [{"uid": "o"}], "creationTimestamp": "2026-01-01T00:00:00Z"},
             "spec": {"managedBy": "kueue.x-k8s.io/multikueue"}, "status": {"x": 1}}  # fmt: skip
    assert clone_for_creation(local, KueueVersion.parse("0.19.2")) == {
        "apiVersion": "tekton.dev/v1", "kind": "PipelineRun",
        "metadata": {"name": "r", "namespace": "n", "labels": {"a": "b"}},
        "spec": {"managedBy": "kueue.x-k8s.io/multikueue"},
    }  # fmt: skip
    old = clone_for_creation(local, KueueVersion.parse("0.18.2"))
    assert "resourceVersion" not in old["metadata"] and old["metadata"]["ownerReferences"] == [{"uid": "o"}]
    assert old["status"] == {"x": 1}


def test_go_json_and_query_encoding() -> None:
    assert go_json({"b": 1, "a": "<&>", "c": 2.0}) == b'{"a":"\\u003c\\u0026\\u003e","b":1,"c":2}\n'
    assert query_string({"watch": "true", "labelSelector": "kueue.x-k8s.io/multikueue-origin=x y"}) == (
        "labelSelector=kueue.x-k8s.io%2Fmultikueue-origin%3Dx+y&watch=true"
    )


def test_workload_name() -> None:
    """GetWorkloadNameForOwnerWithGVK: <kind>-<name>-<sha1 of kind, group, name, uid>[:5]."""
    assert workload_name("Job", "name", "uid", "batch") == "job-name-ef3a1"  # workload_names_test.go's vector


def test_retry_after() -> None:
    """multikueuecluster.go retryAfter: 5 s doubling, capped at 320 s."""
    assert [retry_after(n) for n in range(10)] == [0, 5, 10, 20, 40, 80, 160, 320, 320, 320]


def test_token_bucket() -> None:
    """client-go's rate limiter: a burst of 10, then one request every 1/QPS seconds."""
    now = [0.0]
    waited: list[float] = []

    async def sleep(d: float) -> None:
        waited.append(d)
        now[0] += d

    async def run() -> None:
        bucket = TokenBucket(5.0, 10, clock=lambda: now[0], sleep=sleep)
        for _ in range(12):
            await bucket.wait()
        now[0] += 1.0  # a second later: 5 tokens more (the bucket was 1 short, as of the 12th request)
        for _ in range(6):
            await bucket.wait()

    asyncio.run(run())
    assert waited == pytest.approx([0.2, 0.2, 0.2])


def test_set_condition() -> None:
    """apimeta.SetStatusCondition: updated where it stands, its transition time kept unless the status changes."""
    old = "2026-01-01T00:00:00Z"
    conditions = [{"type": "A", "status": "True", "reason": "R", "message": "", "lastTransitionTime": old},
                  {"type": "B", "status": "False", "reason": "R", "message": "", "lastTransitionTime": old}]  # fmt: skip
    same = set_condition(conditions, "A", "True", "Other", "m", 3)
    assert same[0] == {"type": "A", "status": "True", "reason": "Other", "message": "m", "lastTransitionTime": old,
                       "observedGeneration": 3}  # fmt: skip
    assert conditions[0]["reason"] == "R"  # a copy
    flipped = set_condition(conditions, "A", "False", "R")
    assert [c["type"] for c in flipped] == ["A", "B"] and flipped[0]["lastTransitionTime"] != old
    added = set_condition(conditions, "C", "True", "R")
    assert [c["type"] for c in added] == ["A", "B", "C"] and "observedGeneration" not in added[2]
