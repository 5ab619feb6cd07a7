"""Every admission manifest mkpolicy exports for the shipped policies, as a real kube-apiserver
(v1.36, the real-peer harness ``mkpolicy.testing.peers``) accepts it: kube-apiserver compiles each
MutatingAdmissionPolicy's and ValidatingAdmissionPolicy's CEL when the policy is created and
refuses one it cannot compile (422). And the dialect gap MKP607 guards: the same CEL with
``cel.bind`` is refused there, while mkpolicy's own CEL accepts it."""

from __future__ import annotations

import copy
import itertools
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("mkpolicy.testing.peers.controlplane", reason="the real-peer harness (mkpolicy.testing.peers)")
from mkpolicy.cel import Environment
from mkpolicy.cli.main import main
from mkpolicy.engine.admission_policies import ADMISSION_VARIABLES
from mkpolicy.engine.expressions import Locator, PolicyExpression
from mkpolicy.testing.apiserver import ApiError

# (after the skip: the marks are registered where the harness is, with pytest-timeout)
pytestmark = [pytest.mark.real_peers, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
POLICIES = str(ROOT / "policies")
_prefixes = itertools.count()

#: (what, the arguments of 'mkpolicy export'): every shape the exports take.
EXPORTS = [
    ("admission", ["admission"]),
    ("admission for a manager, Kueue v0.17.1, manageJobsWithoutQueueName, a namespace label",
     ["admission", "--managed-by", "--manage-jobs-without-queue-name", "--kueue-version", "v0.17.1",
      "--namespace-label", "team=a", "--managed-jobs-namespace-selector", "{matchLabels: {kueue: 'on'}}"]),
    ("admission without the default LocalQueue", ["admission", "--no-default-queue"]),
    ("admission as webhook configurations", ["admission", "--webhook", "mkpolicy/webhook", "--ca-bundle", "{ca}"]),
    ("argo-admission", ["argo-admission"]),
]  # fmt: skip


def exported(capsys: pytest.CaptureFixture[str], argv: list[str]) -> list[dict[str, Any]]:
    assert main(["export", *argv, "--policies", POLICIES, "--name-prefix", f"t{next(_prefixes)}"]) == 0
    return [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]


def test_every_exported_admission_manifest_of_the_shipped_policies_is_accepted(
    real_kube: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    admin = real_kube.admin
    (tmp_path / "ca.pem").write_bytes(real_kube.plane.pki.ca.cert_pem)
    seen: set[str] = set()
    for what, argv in EXPORTS:
        manifests = exported(capsys, [a.replace("{ca}", str(tmp_path / "ca.pem")) for a in argv])
        assert manifests, f"{what}: nothing exported"
        for manifest in manifests:
            seen.add(manifest["kind"])
            try:
                admin.create(manifest)
            except ApiError as exc:  # pragma: no cover - the failure this test exists for
                pytest.fail(f"{what}: kube-apiserver refused {manifest['kind']} {manifest['metadata']['name']}: {exc}")
        for manifest in manifests:
            admin.delete(manifest["apiVersion"], manifest["kind"], manifest["metadata"]["name"])
    assert seen >= {"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding", "ValidatingAdmissionPolicy",
                    "ValidatingAdmissionPolicyBinding", "MutatingWebhookConfiguration",
                    "ValidatingWebhookConfiguration"}  # fmt: skip


def test_cel_bind_is_refused_by_kube_apiserver(real_kube: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """What MKP607 is for: the exported suspension MAP and validation VAP with their isSuspended
    written with cel.bind. mkpolicy's CEL compiles it; kube-apiserver answers 422 (the same
    manifests without it are accepted above and here)."""
    admin = real_kube.admin
    manifests = exported(capsys, ["admission"])
    suspend = next(m for m in manifests if m["kind"] == "MutatingAdmissionPolicy" and m["metadata"]["name"].endswith(
        "-batchrun-suspend"))  # fmt: skip
    validate = next(m for m in manifests if m["kind"] == "ValidatingAdmissionPolicy" and m["metadata"][
        "name"].endswith("-batchrun-validate"))  # fmt: skip
    plain, bound = "object.spec.?suspend.orValue(false)", "cel.bind(s, object.spec.?suspend, s.orValue(false))"
    for manifest in (suspend, validate):
        text = yaml.safe_dump(manifest)
        assert plain in text
        with_bind = yaml.safe_load(text.replace(plain, bound))
        for expression in _expressions(with_bind):
            PolicyExpression(expression, (), "e", Locator(), Environment.of(ADMISSION_VARIABLES))  # mkpolicy: fine
        refused = copy.deepcopy(with_bind)
        refused["metadata"]["name"] += "-bind"
        with pytest.raises(ApiError) as err:
            admin.create(refused)
        assert err.value.code == 422
        admin.create(manifest)  # the control: as exported, accepted
        admin.delete(manifest["apiVersion"], manifest["kind"], manifest["metadata"]["name"])


def _expressions(manifest: dict[str, Any]) -> list[str]:
    spec = manifest["spec"]
    out = [c["expression"] for c in spec.get("matchConditions") or []]
    out += [v["expression"] for v in spec.get("validations") or []]
    for mutation in spec.get("mutations") or []:
        out.append((mutation.get("jsonPatch") or mutation.get("applyConfiguration"))["expression"])
    return out
