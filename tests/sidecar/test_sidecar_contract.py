"""The wire contract: only the requests Kueue sends reach a worker (the recording worker shows it)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from sidecar_harness import DATA
from test_sidecar_wire import JSON_ANSWER, PolicyHub, json_answer, pipelinerun, read_response, replying, wire

import mkpolicy
from mkpolicy.policy import GVK
from mkpolicy.sidecar.config import AllowRule, ConfigError, load_config
from mkpolicy.sidecar.contract import ContractRefusal, build, guess_resource
from mkpolicy.sidecar.http1 import parse_request_head
from mkpolicy.sidecar.kueueconfig import KueueInfo
from mkpolicy.sidecar.paths import target_of
from mkpolicy.sidecar.policies import PolicySet
from mkpolicy.testing.kueue.goclient import DISCOVERY_ACCEPT, METADATA_ACCEPT, TYPED_ACCEPT

pytestmark = pytest.mark.timeout(30)


@pytest.fixture(params=[True, False], ids=["fast", "slow"])
def fast(request: pytest.FixtureRequest) -> bool:
    """With the callbacks' fast path on and off."""
    return bool(request.param)


RUNS = "/apis/tekton.dev/v1/namespaces/team-a/pipelineruns"
WORKLOADS = "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/workloads"
WATCH = "?allowWatchBookmarks=true&labelSelector=kueue.x-k8s.io%2Fmultikueue-origin%3Dmultikueue&watch=true"


def strict_hub() -> PolicyHub:
    """A hub with the Tekton policy and the contract unwidened."""
    hub = PolicyHub(mkpolicy.compile(mkpolicy.load(str(DATA / "tekton-policy.yaml"))[0]), {})
    hub.allow, hub.allow_paths = [], []
    return hub


# -- what never reaches the worker -----------------------------------------------------------------
ATTACKS = [
    ("GET", "/api/v1/namespaces/team-a/secrets/s", (), 403, "is not a resource Kueue uses"),
    ("GET", "/api/v1/namespaces/team-a/secrets", (), 403, "secrets"),
    ("GET", "/api/v1/namespaces/team-a/pods/p/log", (), 403, "pods/log"),
    ("GET", "/api/v1/namespaces/team-a/pods/p/proxy/x", (), 403, "pods/proxy"),
    ("GET", "/api/v1/namespaces/team-a/services/s:80/proxy/x", (), 403, "services/proxy"),
    ("POST", "/api/v1/nodes/n/proxy/run/team-a/p/c?cmd=id", ("Content-Length: 0",), 403, "nodes/proxy"),
    ("POST", "/api/v1/namespaces/team-a/pods/p/exec?command=id&stdout=1", ("Content-Length: 0",), 403, "pods/exec"),
    (
        "PATCH",
        f"{RUNS}/r",
        ("Content-Type: application/merge-patch+json", "Content-Length: 2"),
        403,
        "Kueue sends only",
    ),
    ("PUT", f"{RUNS}/r/status", ("Content-Type: application/json", "Content-Length: 2"), 403, "pipelineruns/status"),
    ("GET", RUNS, (), 403, "Kueue sends only"),  # a LIST of a policy kind
    ("HEAD", f"{RUNS}/r", (), 403, "Kueue sends only"),
    ("GET", f"{RUNS}/r", ("Accept: application/json;as=Table;g=meta.k8s.io;v=v1",), 403, "as=Table"),
    ("GET", f"{RUNS}{WATCH}&resourceVersion=1", (), 403, "'resourceVersion'"),
    ("POST", f"{RUNS}?dryRun=All", ("Content-Type: application/json", "Content-Length: 2"), 403, "'dryRun'"),
    ("POST", RUNS, ("Content-Type: text/plain", "Content-Length: 2"), 403, "Content-Type 'text/plain'"),
    ("GET", "/version", (), 403, "GET /version is refused"),
    ("GET", "/", (), 403, "GET / is refused"),
    ("GET", "/api/v1/namespaces", (), 403, "namespaces"),
    ("GET", f"{RUNS}/r", ("Content-Length: 2",), 400, "a GET with a body"),
    ("HEAD", f"{RUNS}/r", ("Content-Length: 2",), 400, "a HEAD with a body"),
    ("GET", f"{RUNS}{WATCH}", ("Transfer-Encoding: chunked",), 400, "a GET with a body"),
    ("DELETE", "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/workloads", (), 403, "Kueue sends only"),
]


@pytest.mark.parametrize(("method", "path", "extra", "code", "text"), ATTACKS, ids=[a[1][-40:] for a in ATTACKS])
def test_requests_kueue_never_sends_never_reach_the_worker(
    method: str, path: str, extra: tuple[str, ...], code: int, text: str, fast: bool
) -> None:
    async def scenario() -> None:
        async with wire(replying(JSON_ANSWER), hub=strict_hub(), fast=fast) as w:
            reader, writer = await w.connect()
            body = (
                b"2\r\n{}\r\n0\r\n\r\n"
                if "Transfer-Encoding: chunked" in extra
                else b"{}" * ("Content-Length: 2" in extra)
            )
            writer.write(w.get(path, *extra, method=method) + body)
            got = await read_response(reader, method)
            assert got.startswith(f"HTTP/1.1 {code} ".encode()), got[:80]
            if method != "HEAD":
                status = json.loads(got.split(b"\r\n\r\n", 1)[1])
                assert status["kind"] == "Status" and status["code"] == code
                assert text in status["message"], status["message"]
                assert "mkpolicy sidecar" in status["message"]
            if code == 400:  # the body is never read as a request: the connection is closed
                assert await asyncio.wait_for(reader.read(), 5) == b""
            assert w.worker.requests == []
            assert w.metric("mkpolicy_sidecar_refusals_total", cluster="w", policy="", reason="WireContract") == 1

    asyncio.run(scenario())


def test_a_smuggled_request_in_a_get_body_never_runs() -> None:
    """The body of a GET (here a whole second request) is refused with the GET: nothing reaches the worker."""

    async def scenario() -> None:
        async with wire(replying(JSON_ANSWER), hub=strict_hub()) as w:
            smuggled = w.get(f"{RUNS}/r", "Content-Type: application/json", "Content-Length: 2", method="PATCH") + b"{}"
            reader, writer = await w.connect()
            writer.write(w.get(f"{RUNS}/r", f"Content-Length: {len(smuggled)}", "Expect: 100-continue") + smuggled)
            got = await asyncio.wait_for(reader.read(), 5)
            assert got.startswith(b"HTTP/1.1 400 ") and got.count(b"HTTP/1.1") == 1
            assert w.worker.requests == []

    asyncio.run(scenario())


def test_identity_headers_never_reach_the_worker() -> None:
    async def scenario() -> None:
        async with wire(replying(JSON_ANSWER), hub=strict_hub()) as w:
            for header in ("Impersonate-User: system:admin", "Impersonate-Group: system:masters"):
                reader, writer = await w.connect()
                writer.write(w.get(f"{WORKLOADS}/wl", header))
                assert (await asyncio.wait_for(reader.read(), 5)).startswith(b"HTTP/1.1 403 ")
            assert w.worker.requests == []

    asyncio.run(scenario())


def test_what_kueue_sends_passes(fast: bool) -> None:
    async def scenario() -> None:
        async with wire(replying(JSON_ANSWER), hub=strict_hub(), fast=fast) as w:
            reader, writer = await w.connect()
            sent = [
                w.get("/api", f"Accept: {DISCOVERY_ACCEPT}"),
                w.get("/apis", f"Accept: {DISCOVERY_ACCEPT}"),
                w.get(f"{WORKLOADS}/wl-1", f"Accept: {TYPED_ACCEPT}"),
                w.get(f"{RUNS}/r", f"Accept: {METADATA_ACCEPT}"),  # the ownership check
                w.get("/apis/batch/v1/namespaces/team-a/jobs/j", "Accept: application/vnd.kubernetes.protobuf, */*"),
            ]
            for request in sent:
                writer.write(request)
                assert await read_response(reader) == JSON_ANSWER
            delete = b'{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Background"}\n'
            writer.write(
                w.get(f"{WORKLOADS}/wl-1", "Content-Type: application/json", f"Content-Length: {len(delete)}",
                      method="DELETE") + delete
            )  # fmt: skip
            assert await read_response(reader) == JSON_ANSWER
            assert [r.head.method for r in w.worker.requests] == ["GET"] * len(sent) + ["DELETE"]
            assert w.worker.requests[-1].body == delete

    asyncio.run(scenario())


def test_a_widening_is_explicit() -> None:
    async def scenario() -> None:
        hub = strict_hub()
        hub.allow = [AllowRule(reason="read config maps", verbs=["get"], group="", resource="configmaps")]
        async with wire(replying(JSON_ANSWER), hub=hub) as w:
            reader, writer = await w.connect()
            writer.write(w.get("/api/v1/namespaces/team-a/configmaps/c"))
            assert await read_response(reader) == JSON_ANSWER
            writer.write(w.get("/api/v1/namespaces/team-a/configmaps"))  # a LIST: not widened
            got = await read_response(reader)
            assert got.startswith(b"HTTP/1.1 403 ") and b"wire.allow[0]" in got
            assert len(w.worker.requests) == 1

    asyncio.run(scenario())


# -- the contract as data -------------------------------------------------------------------------------
def head(method: str, target: str, *fields: str) -> Any:
    raw = "\r\n".join([f"{method} {target} HTTP/1.1", "Host: x", *fields]) + "\r\n\r\n"
    return parse_request_head(raw.encode())


def allowed(contract: Any, method: str, target: str, *fields: str) -> bool:
    h = head(method, target, *fields)
    try:
        contract.check(h, target_of(h.method, h.decoded))
    except ContractRefusal:
        return False
    return True


@pytest.mark.parametrize(
    ("info", "target", "expected"),
    [
        # Kueue before 0.15 speaks v1beta1 Workloads, from 0.15 on v1beta2; unknown: both
        (KueueInfo(version=(0, 14, 0)), "/apis/kueue.x-k8s.io/v1beta1/workloads?labelSelector=x", True),
        (KueueInfo(version=(0, 14, 0)), "/apis/kueue.x-k8s.io/v1beta2/workloads?labelSelector=x", False),
        (KueueInfo(version=(0, 19, 2)), "/apis/kueue.x-k8s.io/v1beta2/workloads?labelSelector=x", True),
        (None, "/apis/kueue.x-k8s.io/v1beta1/workloads?labelSelector=x", True),
        # the enabled integrations' kinds only (all of them when Kueue's configuration is not read)
        (KueueInfo(integrations=frozenset({"batch/job"})), "/apis/batch/v1/namespaces/a/jobs/j", True),
        (KueueInfo(integrations=frozenset({"batch/job"})), "/api/v1/namespaces/a/pods/p", False),
        (KueueInfo(), "/api/v1/namespaces/a/pods/p", True),
        (KueueInfo(), "/apis/ray.io/v1/namespaces/a/rayjobs/r", True),
        # an external framework's kind, at its version (its plural as apimachinery guesses it)
        (KueueInfo(external_frameworks=(GVK("example.com", "v1", "Policy"),)), "/apis/example.com/v1/policies/p", True),
        (
            KueueInfo(external_frameworks=(GVK("example.com", "v1", "Policy"),)),
            "/apis/example.com/v2/policies/p",
            False,
        ),
        # the queue caches exist only with MultiKueueManagerQuotaAutomation
        (KueueInfo(version=(0, 19, 2)), "/apis/kueue.x-k8s.io/v1beta2/clusterqueues?resourceVersion=0", False),
        (
            KueueInfo(version=(0, 19, 2), gates={"MultiKueueManagerQuotaAutomation": True}),
            "/apis/kueue.x-k8s.io/v1beta2/clusterqueues?limit=500&resourceVersion=0",
            True,
        ),
    ],
)
def test_the_contract_follows_kueues_version_and_configuration(
    info: KueueInfo | None, target: str, expected: bool
) -> None:
    assert allowed(build(info, PolicySet((), "none")), "GET", target) is expected


def test_merge_patches_only_where_an_adapter_sends_them() -> None:
    contract = build(KueueInfo(), PolicySet((), "none"))
    patch = ("Content-Type: application/merge-patch+json", "Content-Length: 2")
    assert allowed(contract, "PATCH", "/apis/batch/v1/namespaces/a/jobs/j", *patch)  # elastic jobs
    assert not allowed(contract, "PATCH", "/apis/jobset.x-k8s.io/v1alpha2/namespaces/a/jobsets/j", *patch)
    apply = ("Content-Type: application/apply-patch+yaml", "Content-Length: 2")
    status = "/apis/kueue.x-k8s.io/v1beta2/namespaces/a/workloads/w/status"
    assert allowed(contract, "PATCH", f"{status}?fieldManager=kueue-admission&force=true", *apply)
    assert not allowed(contract, "PATCH", "/apis/kueue.x-k8s.io/v1beta2/namespaces/a/workloads/w", *apply)


def test_before_the_first_policy_set_unknown_kinds_wait() -> None:
    contract = build(None, None)
    h = head("GET", f"{RUNS}/r")
    with pytest.raises(ContractRefusal) as info:
        contract.check(h, target_of(h.method, h.decoded))
    assert info.value.code == 503 and info.value.details == {"retryAfterSeconds": 1}


@pytest.mark.parametrize(
    ("kind", "plural"), [("PipelineRun", "pipelineruns"), ("Policy", "policies"), ("Address", "addresses"),
                         ("Endpoints", "endpoints")],
)  # fmt: skip
def test_plurals_as_apimachinery_guesses_them(kind: str, plural: str) -> None:
    assert guess_resource(kind) == plural


def test_wire_allow_errors_name_the_file_line_and_column(tmp_path: Path) -> None:
    config = tmp_path / "sidecar.yaml"
    config.write_text(
        "apiVersion: mkpolicy.io/v1alpha1\nkind: SidecarConfig\n"
        "workers: [{name: w, kubeconfig: {file: /x}}]\n"
        "wire:\n  allow:\n    - reason: kubectl\n      verbs: [get, exec]\n      group: ''\n      resource: pods\n"
    )
    with pytest.raises(ConfigError) as info:
        load_config(str(config))
    report = "\n".join(info.value.problems)
    assert f"{config}:7:" in report and "found 'exec'" in report, report
    config.write_text(
        "apiVersion: mkpolicy.io/v1alpha1\nkind: SidecarConfig\n"
        "workers: [{name: w, kubeconfig: {file: /x}}]\n"
        "wire:\n  allow:\n    - {reason: x, verbs: [get], group: '', resource: pods, contentTypes: [application/json]}\n"
    )
    with pytest.raises(ConfigError) as info:
        load_config(str(config))
    assert "never carries a body" in "\n".join(info.value.problems)


def test_the_architecture_page_holds_the_generated_contract() -> None:
    from mkpolicy.sidecar.contract import render_markdown

    page = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text()
    begin = "<!-- wire-contract:begin (generated by: mkpolicy export wire-contract) -->\n"
    section = page[page.index(begin) + len(begin) : page.index("<!-- wire-contract:end -->")]
    assert section == render_markdown(), (
        "docs/architecture.md's wire contract table is out of date: replace it with `mkpolicy export wire-contract`"
    )


@pytest.mark.parametrize(("namespace", "name"), [("team-b", "r"), ("team-a", "other")])
def test_a_worker_answering_another_object_reads_nothing_of_it(namespace: str, name: str, fast: bool) -> None:
    """A hostile worker's answer naming another object (another namespace's): no manager read, no Event there."""

    async def scenario() -> None:
        hub = strict_hub()
        hub.managers = {"r": pipelinerun("r", worker=False), "other": pipelinerun("other", worker=False)}
        answer = pipelinerun(name, worker=True)
        answer["metadata"]["namespace"] = namespace
        async with wire(replying(json_answer(answer)), hub=hub, fast=fast) as w:
            reader, writer = await w.connect()
            writer.write(w.get(f"{RUNS}/r", "Accept: application/json"))
            got = await read_response(reader)
            assert got.startswith(b"HTTP/1.1 502 "), got[:80]
            assert f"answered {namespace}/{name} for team-a/r".encode() in got
            assert hub.hits == 0 and hub.direct_reads == 0

    asyncio.run(scenario())
