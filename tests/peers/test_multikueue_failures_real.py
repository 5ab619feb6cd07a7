"""MultiKueue's failure scenarios on real peers: real kube-apiservers, real Kueue, the sidecar in between.

The session's RealMultiKueue (``real_multikueue``, once per Kueue version) and the steps
of ``test_multikueue_real.Scenario`` (the test plays the integration that creates the
manager's Workload, and on the worker Tekton and the job's end). Each scenario: a failing
status write-back, a version mismatch between Kueue's externalFrameworks and the policy,
a rotated Secret, a rotated worker token (the old one revoked), a worker kubeconfig
Kueue's rules refuse, a remote Workload finished ``OutOfSync``. Each one puts back what
it changed (policies, Secrets, Kueue's configuration) for the tests after it.

Throughout: no copy reaches a worker untransformed, no copy is left behind, every refusal
is an Event on the job; what real Kueue shows (MultiKueueCluster conditions, the
Workload's check, Events) is asserted as it is, and where the Python model of Kueue
(``mkpolicy.testing.kueue``) says the same thing, compared with it.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as _dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from peer_waits import condition, eventually, exists
from test_multikueue_real import PR, WL, Scenario, pipelinerun

from mkpolicy.sidecar.wiring import ORIGINAL_KEY
from mkpolicy.testing.apiserver import ApiError
from mkpolicy.testing.kueue import kubeconfig as model_kubeconfig
from mkpolicy.testing.kueue.goclient import generic_server_response
from mkpolicy.testing.kueue.simulate import workload_name
from mkpolicy.testing.peers.multikueue import KUEUE_API, KUEUE_NAMESPACE, RealMultiKueue

pytestmark = [pytest.mark.real_peers, pytest.mark.timeout(600)]

#: Sync patch #1 of the Tekton policy, made to fail at run time (a JSON Patch ``replace`` of a status field
#: the manager's PipelineRun has no status for before its first write-back: it never gets one).
SYNC = "  sync:\n    subresource: status\n    patches:\n"
FAILING_SYNC = (
    SYNC
    + """\
      - type: JSONPatch
        jsonPatch:
          expression: '[JSONPatch{op: "replace", path: "/status/completionTime", value: "2026-11-21T10:05:00Z"}]'
"""
)


@pytest.fixture
def scenario(real_multikueue: RealMultiKueue, real_namespace: str, tmp_path: Path) -> Scenario:
    return Scenario(real_multikueue, real_namespace, tmp_path)


def events(s: Scenario, reason: str, name: str) -> list[dict[str, Any]]:
    """The manager's Events in the scenario's namespace with ``reason`` about object ``name``."""
    return [e for e in s.manager().list("v1", "Event", namespace=s.ns)
            if e["reason"] == reason and e["involvedObject"]["name"] == name]  # fmt: skip


def active(mk: RealMultiKueue, cluster: str) -> dict[str, Any]:
    """MultiKueueCluster ``cluster``'s ``Active`` condition."""
    return condition(mk.manager.admin.get(KUEUE_API, "MultiKueueCluster", cluster), "Active")


def shows(mk: RealMultiKueue, cluster: str, expected: tuple[str, str, str]) -> tuple[str, str, str] | str:
    """``expected`` when it is MultiKueueCluster ``cluster``'s (status, reason, message) of ``Active``;
    else what it is, as a string (for ``eventually``: not yet, and shown as the last value)."""
    cond = active(mk, cluster)
    got = (str(cond.get("status")), str(cond.get("reason")), str(cond.get("message")))
    return got if got == expected else repr(got)


def finished(s: Scenario, workload: str) -> dict[str, Any]:
    """The manager's Workload's ``Finished`` condition when True ({} otherwise)."""
    cond = condition(s.manager().get(*WL, workload, s.ns), "Finished")
    return cond if cond.get("status") == "True" else {}


def secret_kubeconfig(secret: dict[str, Any], key: str = "kubeconfig") -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(base64.b64decode(secret["data"][key]))
    return loaded


def wired(mk: RealMultiKueue, worker: str) -> bool:
    """Whether ``worker``'s Secret points at the sidecar again."""
    assert mk.sidecar is not None
    server = secret_kubeconfig(mk.worker_secret(worker))["clusters"][0]["cluster"]["server"]
    return bool(server == mk.sidecar.endpoint(worker))


@contextlib.contextmanager
def edited_policy(mk: RealMultiKueue, old: str, new: str) -> Iterator[None]:
    """The sidecar's Tekton policy with ``old`` replaced by ``new`` while the block runs (hot-reloaded
    both ways; the folder holds one policy per framework)."""
    sidecar = mk.sidecar
    assert sidecar is not None and mk.policies is not None
    path = mk.policies / "tekton-pipelinerun.yaml"
    original = path.read_text()
    assert old in original

    def reload(text: str) -> None:
        before = sidecar.metric("mkpolicy_sidecar_policy_reloads_total", result="ok")
        path.write_text(text)
        eventually(lambda: sidecar.metric("mkpolicy_sidecar_policy_reloads_total", result="ok") > before,
                   "the sidecar reloaded the policy")  # fmt: skip

    try:
        reload(original.replace(old, new))
        yield
    finally:
        reload(original)


@contextlib.contextmanager
def restored_secret(mk: RealMultiKueue, worker: str) -> Iterator[None]:
    """Put ``worker``'s own kubeconfig back into its Secret afterwards; wait until it is wired and Active."""
    try:
        yield
    finally:
        own = mk.worker_kubeconfig(worker)
        mk.write_worker_secret(worker, own)
        eventually(lambda: wired(mk, worker) and secret_kubeconfig(mk.worker_secret(worker), ORIGINAL_KEY) == own,
                   f"{worker}'s Secret wired again, its own kubeconfig kept")  # fmt: skip
        eventually(lambda: active(mk, worker).get("status") == "True", f"MultiKueueCluster {worker} Active again")


def submit_at(s: Scenario, name: str, api_version: str) -> str:
    """As ``Scenario.submit``, the PipelineRun created at ``api_version`` (its Workload's owner
    reference names that version: Kueue finds the MultiKueue adapter by it); the Workload's name."""
    obj = pipelinerun(name, s.ns)
    obj["apiVersion"] = api_version
    uid = s.manager().create(obj)["metadata"]["uid"]
    wl = workload_name("PipelineRun", name, uid, "tekton.dev")
    owner = {"apiVersion": api_version, "kind": "PipelineRun", "name": name, "uid": uid, "controller": True,
             "blockOwnerDeletion": True}  # fmt: skip
    pod = {"spec": {"restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}  # fmt: skip
    s.manager().create({"apiVersion": KUEUE_API, "kind": "Workload",
                        "metadata": {"name": wl, "namespace": s.ns, "ownerReferences": [owner]},
                        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": pod}]}})  # fmt: skip
    return wl


def finish_as(s: Scenario, workload: str, cluster: str, reason: str, message: str) -> None:
    """The worker's integration finishes the remote Workload with ``reason`` (``Scenario.finish`` says Succeeded)."""
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    cond = {"type": "Finished", "status": "True", "reason": reason, "message": message, "lastTransitionTime": now}
    s.worker(cluster).patch(*WL, workload, [{"op": "add", "path": "/status/conditions/-", "value": cond}],
                            namespace=s.ns, patch_type="json", subresource="status")  # fmt: skip


def dispatch_through_the_sidecar(s: Scenario, name: str) -> str:
    """A job dispatched to worker1 (its copy the policy's ``create``, created through the sidecar),
    its status written back, finished, nothing left; its Workload's name."""
    sidecar = s.mk.sidecar
    assert sidecar is not None
    created = {"cluster": "worker1", "policy": "tekton-pipelinerun", "verb": "create", "code": "201"}
    before = sidecar.metric("mkpolicy_sidecar_requests_total", **created)
    wl = s.submit(name)
    s.copy_created(name, wl, "worker1")
    assert sidecar.metric("mkpolicy_sidecar_requests_total", **created) == before + 1
    s.admitted_on(wl, "worker1")
    s.status_written(name, wl, "worker1", 2)
    s.finish(wl, "worker1")
    eventually(lambda: finished(s, wl), "the manager's Workload finished")
    s.nothing_left(name, wl, "worker1")
    return wl


# -- a failing sync ----------------------------------------------------------------------------------------


def test_failing_sync_is_an_event_and_finish_still_works(scenario: Scenario) -> None:
    """A sync patch that fails: Kueue's read of the copy gets it without a status (so Kueue's
    SyncJob writes nothing: externalframeworks ``copyStatusFromRemote`` copies only a status
    that is there), the manager's PipelineRun gets a ``SyncFailed`` Event saying why; finishing
    is not blocked: the manager's Workload finishes and every copy is removed."""
    s = scenario
    sidecar = s.mk.sidecar
    assert sidecar is not None
    failed = {"cluster": "worker1", "policy": "tekton-pipelinerun", "phase": "sync", "result": "error"}
    with edited_policy(s.mk, SYNC, FAILING_SYNC):
        errors = sidecar.metric("mkpolicy_sidecar_transforms_total", **failed)
        wl = s.submit("build")
        s.copy_created("build", wl, "worker1")  # (the policy's creation patches are untouched)
        s.admitted_on(wl, "worker1")
        s.worker("worker1").patch(*PR, "build", {"status": {"startTime": "2026-11-21T10:00:00Z"}},
                                  namespace=s.ns, subresource="status")  # fmt: skip

        [event] = eventually(lambda: events(s, "SyncFailed", "build"), "a SyncFailed event on the PipelineRun")
        assert event["involvedObject"]["kind"] == "PipelineRun" and event["type"] == "Warning"
        assert "sync patch #1" in event["message"] and event["message"].count("mkpolicy:") == 1, event["message"]
        assert "status" not in s.manager().get(*PR, "build", s.ns)  # nothing written back
        assert sidecar.metric("mkpolicy_sidecar_transforms_total", **failed) > errors

        s.finish(wl, "worker1")
        eventually(lambda: finished(s, wl), "the manager's Workload finished")
        assert finished(s, wl)["reason"] == "Succeeded"
        s.nothing_left("build", wl, "worker1")
        assert "status" not in s.manager().get(*PR, "build", s.ns)


# -- a version mismatch ---------------------------------------------------------------------------------------


def test_version_mismatch_keeps_kueue_connected_and_refuses_creations(scenario: Scenario) -> None:
    """Kueue's externalFrameworks names PipelineRun at v1beta1, the policy at v1 (Kueue and the
    sidecar restarted with that configuration): the sidecar says so in /readyz, Kueue's v1beta1
    watches pass (both clusters stay Active), and Kueue's creation of a v1beta1 copy is refused
    with a ``VersionMismatch`` Event on the job: nothing reaches the worker."""
    s = scenario
    mk = s.mk
    sidecar = mk.sidecar
    assert sidecar is not None
    original = list(mk.frameworks)
    try:
        mk.set_frameworks(["PipelineRun.v1beta1.tekton.dev"])
        checks = sidecar.readiness()
        assert any(c.startswith("warn kueue: policy tekton-pipelinerun") and "version mismatch" in c
                   for c in checks), checks  # fmt: skip
        assert all(active(mk, w).get("status") == "True" for w in mk.worker_names)

        # users create v1beta1 PipelineRuns: Kueue finds its adapter by the job's version
        wl = submit_at(s, "build", "tekton.dev/v1beta1")
        [event] = eventually(lambda: events(s, "VersionMismatch", "build"), "a VersionMismatch event")
        assert event["involvedObject"]["kind"] == "PipelineRun" and event["type"] == "Warning"
        assert "covers pipelineruns.tekton.dev at version v1 only" in event["message"], event["message"]
        assert "at v1beta1 for worker1" in event["message"], event["message"]
        assert sidecar.metric("mkpolicy_sidecar_refusals_total", cluster="worker1", reason="VersionMismatch") >= 1
        assert not exists(mk.workers["worker1"], s.ns, PR, "build")
        assert all(active(mk, w).get("status") == "True" for w in mk.worker_names)
        # the job goes away: nothing is left anywhere
        s.manager().delete(*PR, "build", s.ns)
        s.manager().patch(*WL, wl, {"metadata": {"finalizers": None}}, namespace=s.ns)
        s.manager().delete(*WL, wl, s.ns)
        for worker in mk.worker_names:
            s.nothing_left("build", wl, worker)
    finally:
        mk.set_frameworks(original)
    assert not any("version mismatch" in c for c in sidecar.readiness())


# -- a rotated Secret, a rotated worker token ----------------------------------------------------------------


def test_rotated_secret_is_rewired_and_used(scenario: Scenario) -> None:
    """GitOps re-applies worker1's Secret with another kubeconfig (a ServiceAccount token instead
    of the client certificate): the sidecar takes it as worker1's real kubeconfig and wires the
    Secret again; Kueue reconnects (through the sidecar) and the next job travels transformed."""
    s = scenario
    mk = s.mk
    sidecar = mk.sidecar
    assert sidecar is not None
    reloads = sidecar.metric("mkpolicy_sidecar_worker_kubeconfig_reloads_total", cluster="worker1", result="ok")
    with restored_secret(mk, "worker1"):
        rotated = mk.worker_kubeconfig("worker1", token=mk.service_account_token("worker1", "multikueue-a"))
        try:
            mk.write_worker_secret("worker1", rotated)
            eventually(lambda: wired(mk, "worker1"), "worker1's Secret wired again")
            assert secret_kubeconfig(mk.worker_secret("worker1"), ORIGINAL_KEY) == rotated
            assert sidecar.metric("mkpolicy_sidecar_worker_kubeconfig_reloads_total", cluster="worker1",
                                  result="ok") == reloads + 1  # fmt: skip
            eventually(lambda: active(mk, "worker1").get("status") == "True", "MultiKueueCluster worker1 Active")
            dispatch_through_the_sidecar(s, "after-rotation")
        finally:
            mk.revoke_service_account("worker1", "multikueue-a")


def test_rotated_worker_token_old_one_revoked(scenario: Scenario) -> None:
    """worker1's token rotated: the Secret re-applied with a new token and the old one revoked
    (its ServiceAccount deleted: the worker refuses it). The sidecar uses the new one: the next
    job's copy is created on worker1, transformed."""
    s = scenario
    mk = s.mk
    worker1 = mk.workers["worker1"]
    with restored_secret(mk, "worker1"):
        try:
            old = mk.service_account_token("worker1", "multikueue-old")
            mk.write_worker_secret("worker1", mk.worker_kubeconfig("worker1", token=old))
            eventually(lambda: wired(mk, "worker1"), "worker1's Secret wired (old token)")
            new = mk.service_account_token("worker1", "multikueue-new")
            mk.write_worker_secret("worker1", mk.worker_kubeconfig("worker1", token=new))
            eventually(lambda: wired(mk, "worker1") and secret_kubeconfig(mk.worker_secret("worker1"), ORIGINAL_KEY)
                       == mk.worker_kubeconfig("worker1", token=new), "worker1's Secret wired (new token)")  # fmt: skip
            mk.revoke_service_account("worker1", "multikueue-old")
            ca = worker1.plane.pki.ca.cert_pem
            eventually(lambda: answer_to(worker1.url, ca, old) == 401, "the old token refused (401)")
            assert answer_to(worker1.url, ca, new) == 200
            eventually(lambda: active(mk, "worker1").get("status") == "True", "MultiKueueCluster worker1 Active")
            dispatch_through_the_sidecar(s, "after-token-rotation")
        finally:
            for account in ("multikueue-old", "multikueue-new"):
                with contextlib.suppress(ApiError):
                    mk.revoke_service_account("worker1", account)


def answer_to(server: str, ca_pem: bytes, token: str) -> int:
    """The HTTP status ``server`` answers a discovery GET with ``token``."""
    import ssl
    import urllib.error
    import urllib.request

    request = urllib.request.Request(f"{server}/api", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, context=ssl.create_default_context(cadata=ca_pem.decode()), timeout=10):
            return 200
    except urllib.error.HTTPError as exc:
        return exc.code


# -- a refused worker kubeconfig -------------------------------------------------------------------------------


def _user(kubeconfig: dict[str, Any]) -> dict[str, Any]:
    user: dict[str, Any] = kubeconfig["users"][0]["user"]
    return user


def _cluster(kubeconfig: dict[str, Any]) -> dict[str, Any]:
    cluster: dict[str, Any] = kubeconfig["clusters"][0]["cluster"]
    return cluster


EXEC_API = "client.authentication.k8s.io/v1"
#: Kubeconfigs each of Kueue's rules refuses (``validateKubeconfig``, ``validateRestConfig`` in
#: ``pkg/controller/admissionchecks/multikueue/multikueuecluster.go``, the same at v0.17.1 and v0.19.2).
REFUSED = {
    "tokenFile": lambda k: _user(k).update(tokenFile="/var/run/token"),
    "insecure-skip-tls-verify": lambda k: _cluster(k).update({"insecure-skip-tls-verify": True}),
    "certificate-authority path": lambda k: _cluster(k).update({"certificate-authority": "/etc/ca.crt"}),
    "no server": lambda k: _cluster(k).update(server=""),
    "untrusted server": lambda k: _cluster(k).update(server="https://under_score.example:6443"),
    "basic auth": lambda k: k["users"][0].update(user={"username": "u", "password": "p"}),
    "basic auth and a certificate": lambda k: _user(k).update(username="u", password="p"),
    "basic auth and a token": lambda k: _user(k).update(token="t", username="u", password="p"),
    "a certificate without its key": lambda k: _user(k).pop("client-key-data"),
    "exec plugin": lambda k: _user(k).update(exec={"command": "x", "apiVersion": EXEC_API, "interactiveMode": "Never"}),
    "exec plugin without interactiveMode": lambda k: _user(k).update(exec={"command": "x", "apiVersion": EXEC_API}),
    "auth provider": lambda k: _user(k).update({"auth-provider": {"name": "oidc"}}),
    "no current context": lambda k: k.pop("current-context"),
}


def test_kueue_refuses_what_the_model_refuses(real_multikueue: RealMultiKueue) -> None:
    """A MultiKueueCluster the sidecar does not wire, its Secret holding worker1's kubeconfig
    changed to break each of Kueue's rules: real Kueue's ``Active`` condition is False with
    reason ``InsecureKubeConfig`` and exactly the message the model of Kueue gives
    (``mkpolicy.testing.kueue.kubeconfig``); the sidecar's own rules refuse each one too (it
    would never use such a kubeconfig). Kueue never connects with any of them."""
    from mkpolicy.kube.kubeconfig import KubeconfigError, rest_config

    mk = real_multikueue
    name = "refused-check"
    secret = f"{name}-secret"
    # a refused kubeconfig before the cluster exists: Kueue never connects around the sidecar
    first = mk.worker_kubeconfig("worker1")
    REFUSED["tokenFile"](first)
    mk.write_worker_secret("worker1", first, secret=secret)
    mk.manager.apply({"apiVersion": KUEUE_API, "kind": "MultiKueueCluster", "metadata": {"name": name},
                      "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": secret}}}})  # fmt: skip
    try:
        for case, mutate in REFUSED.items():
            kubeconfig = mk.worker_kubeconfig("worker1")
            mutate(kubeconfig)
            raw = yaml.safe_dump(kubeconfig).encode()
            with pytest.raises(model_kubeconfig.KubeconfigRefused) as model:
                model_kubeconfig.load(raw)
            with pytest.raises(KubeconfigError):
                rest_config(kubeconfig, case)
            mk.write_worker_secret("worker1", kubeconfig, secret=secret)
            expected = ("False", model.value.reason, f"load client config failed: {model.value.message}")
            eventually(lambda e=expected: shows(mk, name, e), f"{case}: Kueue shows {expected}")  # type: ignore[misc]
    finally:
        mk.manager.admin.delete(KUEUE_API, "MultiKueueCluster", name)
        mk.manager.admin.delete("v1", "Secret", secret, KUEUE_NAMESPACE)


def test_refused_worker_kubeconfig_is_isolated_until_fixed(scenario: Scenario) -> None:
    """worker2's Secret re-applied with a kubeconfig Kueue's rules refuse (insecure TLS): the
    sidecar refuses worker2 (its /readyz and metrics say why) and wires the Secret again, so
    Kueue's connection to worker2 fails on the sidecar's 503 (``Active=False``,
    ``ClientConnectionFailed``), never reaching worker2 insecurely; worker1 keeps serving. The
    fixed kubeconfig re-applied: taken up without a restart, worker2 Active again."""
    s = scenario
    mk = s.mk
    sidecar = mk.sidecar
    assert sidecar is not None
    refused = sidecar.metric("mkpolicy_sidecar_worker_kubeconfig_reloads_total", cluster="worker2", result="refused")
    with restored_secret(mk, "worker2"):
        insecure = mk.worker_kubeconfig("worker2")
        _cluster(insecure)["insecure-skip-tls-verify"] = True
        mk.write_worker_secret("worker2", insecure)
        eventually(lambda: any(c.startswith("warn worker worker2: refused:") for c in sidecar.readiness()),
                   "worker2 refused by the sidecar")  # fmt: skip
        [line] = [c for c in sidecar.readiness() if c.startswith("warn worker worker2: refused:")]
        assert "insecure-skip-tls-verify" in line, line
        assert sidecar.metric("mkpolicy_sidecar_worker_kubeconfig_reloads_total", cluster="worker2",
                              result="refused") == refused + 1  # fmt: skip
        assert sidecar.metric("mkpolicy_sidecar_worker_up", cluster="worker2") == 0
        eventually(lambda: wired(mk, "worker2"), "worker2's Secret wired again")
        # Kueue's discovery through the refused endpoint gets the sidecar's 503, whose message
        # client-go drops (discovery reads answers raw: rest/request.go newUnstructuredResponseError);
        # the model of Kueue says the same (goclient.DiscoveryError)
        refusal = ("False", "ClientConnectionFailed", f"failed to get server groups: {generic_server_response(503)}")
        eventually(lambda: shows(mk, "worker2", refusal), "worker2 inactive on the sidecar's answer")
        assert active(mk, "worker1").get("status") == "True"
        dispatch_through_the_sidecar(s, "beside-a-refused-worker")
    assert not any(c.startswith("warn worker worker2") for c in sidecar.readiness())
    assert sidecar.metric("mkpolicy_sidecar_worker_up", cluster="worker2") == 1


# -- a remote Workload finished OutOfSync ----------------------------------------------------------------------

OUT_OF_SYNC = "The prebuilt workload is out of sync with its user job"


def test_remote_out_of_sync(scenario: Scenario) -> None:
    """The worker's integration finishes the prebuilt Workload ``OutOfSync`` (what jobframework's
    ``ensurePrebuiltWorkloadInSync`` does when the copy is not equivalent to its Workload).
    Kueue v0.17.1 finishes the manager's Workload ``OutOfSync``: the job is stranded (no status
    ever written back). Kueue >= 0.17.8/0.18.4/0.19.0 resets the check to Retry with an Event
    instead; the Workload is evicted, and once its quota is released (the integration's part) it
    is dispatched again and runs (a worker integration that finds the same copy unlike its
    Workload again ends it OutOfSync again: a loop)."""
    s = scenario
    wl = s.submit("build")
    s.copy_created("build", wl, "worker1")
    s.admitted_on(wl, "worker1")
    finish_as(s, wl, "worker1", "OutOfSync", OUT_OF_SYNC)
    if s.mk.kueue_version == "v0.17.1":
        cond = eventually(lambda: finished(s, wl), "the manager's Workload finished")
        assert (cond["reason"], cond["message"]) == ("OutOfSync", OUT_OF_SYNC)
        s.nothing_left("build", wl, "worker1")
        assert "status" not in s.manager().get(*PR, "build", s.ns)  # stranded: nothing ever ran
        return

    # MultiKueue resets its check to Retry (workload.go step 3) with an Event; Kueue's workload
    # controller at once evicts the Workload and puts the check back to Pending
    retry = ('Remote workload on worker cluster "worker1" is out of sync with its user job, resetting for '
             're-dispatch, Previously: "Ready"')  # fmt: skip
    eventually(lambda: [e for e in events(s, "MultiKueue", wl) if e["message"] == retry], "the OutOfSync Event")
    [evicted] = eventually(lambda: events(s, "EvictedDueToAdmissionCheck", wl), "evicted for the check")
    assert evicted["message"] == f'Evicted due to AdmissionCheck in Retry state: "mk" ({retry})'
    wl_now = s.manager().get(*WL, wl, s.ns)
    assert condition(wl_now, "Evicted")["reason"] == "AdmissionCheck" and not finished(s, wl)
    [check] = wl_now["status"]["admissionChecks"]
    assert (check["state"], check["message"]) == ("Pending", "Reset to Pending after eviction. Previously: Retry")
    s.release_quota(wl)
    # Kueue reserves quota again at once and MultiKueue dispatches it again to worker1: admitted
    # there, the copy the policy's (the same object when Kueue re-reserved the quota before
    # MultiKueue saw it released, else a new one), its remote Workload no longer finished
    s.admitted_on(wl, "worker1")
    s.copy_created("build", wl, "worker1")
    assert not condition(s.worker("worker1").get(*WL, wl, s.ns), "Finished")
    s.status_written("build", wl, "worker1", 2)
    s.finish(wl, "worker1")
    eventually(lambda: finished(s, wl), "the manager's Workload finished")
    s.nothing_left("build", wl, "worker1")
