"""``mkpolicy export admission --map-version v1beta1`` on a real kube-apiserver v1.36 serving
``admissionregistration.k8s.io/v1beta1`` (the real-peer harness ``mkpolicy.testing.peers``).

What serves v1beta1 MutatingAdmissionPolicy there, read in k8s.io/kubernetes@v1.36.3: the
group version is in ``genericBetaAPIGroupVersionsDisabledByDefault``
(``pkg/controlplane/instance.go``), so only ``--runtime-config=admissionregistration.k8s.io/v1beta1=true``
turns it on; ``v1beta1Storage`` (``pkg/registry/admissionregistration/rest/storage_apiserver.go``)
then serves ``mutatingadmissionpolicies`` with no feature-gate check, and the
``MutatingAdmissionPolicy`` gate is GA and on by default in 1.36
(``pkg/features/kube_features.go``), so no ``--feature-gates`` is needed. (On 1.34/1.35 the
gate is beta and off: there both are needed, as docs/integration.md says.)

The same checks as for v1: every manifest the export renders for the shipped policies is
accepted, and the v1beta1 MAPs act as the v1 ones do
(``test_real_peers.py::test_the_exported_admission_policies_on_kube_apiserver``)."""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("mkpolicy.testing.peers.controlplane", reason="the real-peer harness (mkpolicy.testing.peers)")
from controller_harness import CRD, MARKER, WL, batchrun
from test_real_admission_export import EXPORTS, exported

import mkpolicy.testing
from mkpolicy.testing.apiserver import ApiError

# (after the skip: the marks are registered where the harness is, with pytest-timeout)
pytestmark = [pytest.mark.real_peers, pytest.mark.timeout(900)]

BETA = "admissionregistration.k8s.io/v1beta1"
RUNTIME_CONFIG = f"--runtime-config={BETA}=true"
KUEUE_CRDS = ("workloads", "resourceflavors", "localqueues", "clusterqueues")
#: Generous: a MAP with a CRD paramKind (LocalQueue) acts once admission's REST mapper has seen the
#: CRD, and that mapper resets every 30 s (k8s.io/apiserver pkg/server/options/admission.go).
EFFECTIVE_TIMEOUT = 180.0
_names = itertools.count()


@pytest.fixture(scope="module")
def beta_kube(real_kube: Any) -> Iterator[Any]:
    """A second kube-apiserver on ``real_kube``'s etcd with v1beta1 admission registration served,
    Kueue's and BatchRun's CRDs installed; stopped at the end of the module."""
    cluster = real_kube.plane.add_cluster(f"beta{next(_names)}", extra_args=[RUNTIME_CONFIG])
    try:
        crd_dir = Path(mkpolicy.testing.__file__).parent / "crds"
        crds = [yaml.safe_load((crd_dir / f"kueue.x-k8s.io_{name}.yaml").read_text()) for name in KUEUE_CRDS]
        cluster.install_crds([*crds, yaml.safe_load(CRD.read_text())])
        yield cluster
    finally:
        cluster.stop()


def test_only_a_server_with_the_runtime_config_serves_v1beta1(
    real_kube: Any, beta_kube: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """The control: the default 1.36 server has no v1beta1 MutatingAdmissionPolicy (404), the one
    started with the runtime config has it."""
    policy = next(m for m in exported(capsys, ["admission", "--map-version", "v1beta1"])
                  if m["kind"] == "MutatingAdmissionPolicy")  # fmt: skip
    assert policy["apiVersion"] == BETA
    with pytest.raises(ApiError) as refused:
        real_kube.admin.create(policy)
    assert refused.value.code == 404
    beta_kube.admin.create(policy)
    beta_kube.admin.delete(BETA, "MutatingAdmissionPolicy", policy["metadata"]["name"])


def test_every_v1beta1_manifest_of_the_shipped_policies_is_accepted(
    beta_kube: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    admin = beta_kube.admin
    (tmp_path / "ca.pem").write_bytes(beta_kube.plane.pki.ca.cert_pem)
    betas = 0
    for what, argv in EXPORTS:
        args = [a.replace("{ca}", str(tmp_path / "ca.pem")) for a in argv]
        manifests = exported(capsys, [*args, "--map-version", "v1beta1"])
        assert manifests, f"{what}: nothing exported"
        for manifest in manifests:
            if manifest["kind"].startswith("MutatingAdmissionPolicy"):
                assert manifest["apiVersion"] == BETA, f"{what}: {manifest['kind']} at {manifest['apiVersion']}"
                betas += 1
            try:
                admin.create(manifest)
            except ApiError as exc:  # pragma: no cover - the failure this test exists for
                pytest.fail(f"{what}: kube-apiserver refused {manifest['apiVersion']} {manifest['kind']} "
                            f"{manifest['metadata']['name']}: {exc}")  # fmt: skip
        for manifest in manifests:
            admin.delete(manifest["apiVersion"], manifest["kind"], manifest["metadata"]["name"])
    assert betas, "no v1beta1 MutatingAdmissionPolicy exported"


def test_the_v1beta1_policies_default_the_queue_and_suspend_as_v1_does(
    beta_kube: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    admin = beta_kube.admin
    namespace = f"beta-{next(_names)}"
    admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    manifests = exported(capsys, ["admission", "--map-version", "v1beta1",
                                  "--namespace-label", f"kubernetes.io/metadata.name={namespace}"])  # fmt: skip
    try:
        for manifest in manifests:
            beta_kube.apply(manifest)
        admin.create({"apiVersion": WL, "kind": "LocalQueue", "metadata": {"name": "default", "namespace": namespace},
                      "spec": {"clusterQueue": "cq"}})  # fmt: skip
        unlabelled = batchrun("plain", marked=False, suspend=None, namespace=namespace)
        del unlabelled["metadata"]["labels"]
        stored = _created_under_both(admin, unlabelled)
        assert stored["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "default"
        assert stored["spec"]["suspend"] is True
        assert stored["metadata"]["annotations"] == {MARKER: "true"}

        mine = admin.create(batchrun("mine", marked=False, suspend=True, namespace=namespace))
        assert MARKER not in (mine["metadata"].get("annotations") or {})  # the user's suspension stays unmarked
    finally:
        for manifest in manifests:
            with contextlib.suppress(ApiError):
                admin.delete(manifest["apiVersion"], manifest["kind"], manifest["metadata"]["name"])
        admin.delete("v1", "Namespace", namespace)


def _created_under_both(admin: Any, obj: dict[str, Any]) -> dict[str, Any]:
    """Create ``obj`` (a new name each attempt) until both the default queue's MAP (LocalQueue
    params: it waits for admission's REST mapper) and the suspension's have acted."""
    deadline = time.monotonic() + EFFECTIVE_TIMEOUT
    last: object = None
    for attempt in itertools.count():
        body = {**obj, "metadata": {**obj["metadata"], "name": f"{obj['metadata']['name']}-{attempt}"}}
        try:
            stored = dict(admin.create(body))
        except ApiError as exc:  # (a new CRD's kind unknown to admission for a while)
            last = f"refused: {exc}"
        else:
            meta = stored["metadata"]
            queued = (meta.get("labels") or {}).get("kueue.x-k8s.io/queue-name")
            if queued and MARKER in (meta.get("annotations") or {}):
                return stored
            last = {"labels": meta.get("labels"), "annotations": meta.get("annotations"),
                    "suspend": stored["spec"].get("suspend")}  # fmt: skip
        if time.monotonic() > deadline:
            raise AssertionError(f"the v1beta1 admission policies did not both act within {EFFECTIVE_TIMEOUT:.0f}s; "
                                 f"the last attempt: {last}")  # fmt: skip
        time.sleep(0.5)
    raise AssertionError("unreachable")  # pragma: no cover
