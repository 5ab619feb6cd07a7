"""What the sidecar reads of Kueue's configuration, and what it concludes (Kueue v0.19.2's code)."""

from __future__ import annotations

import pytest

from mkpolicy.policy import GVK
from mkpolicy.policy.gvk import parse_gvk
from mkpolicy.sidecar.config import config_from_dict
from mkpolicy.sidecar.kueueconfig import (
    KueueInfo,
    parse_configuration,
    parse_deployment,
    policy_findings,
    port_findings,
    sidecar_ports,
    stranded_kinds,
    version_of_image,
)

PIPELINERUN = GVK("tekton.dev", "v1", "PipelineRun")

CONFIG = """\
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
health: {healthProbeBindAddress: ":9081"}
metrics: {bindAddress: ":8443"}
webhook: {port: 9443}
featureGates: {WorkloadIdentifierAnnotations: false}
integrations:
  frameworks: [batch/job, ray.io/rayjob]
multiKueue:
  origin: prod
  externalFrameworks:
  - name: PipelineRun.v1beta1.tekton.dev
  - name: Workflow.v1alpha1.argoproj.io
"""


def test_configuration() -> None:
    info = KueueInfo()
    parse_configuration(CONFIG, "cm", info)
    assert info.external_frameworks == (
        GVK("tekton.dev", "v1beta1", "PipelineRun"),
        GVK("argoproj.io", "v1alpha1", "Workflow"),
    )
    assert info.integrations == {"batch/job", "ray.io/rayjob"}
    assert info.gates == {"WorkloadIdentifierAnnotations": False}
    assert info.origin == "prod"
    assert info.ports[9081] == "health probes" and 8081 in info.ports  # defaults stay as well
    assert info.native_integration(GVK("batch", "v1", "Job")) == "batch/job"
    assert info.native_integration(GVK("jobset.x-k8s.io", "v1alpha2", "JobSet")) is None  # not enabled
    assert KueueInfo().native_integration(GVK("jobset.x-k8s.io", "v1alpha2", "JobSet")) == "jobset.x-k8s.io/jobset"
    bad = KueueInfo()
    parse_configuration("multiKueue: {externalFrameworks: [{name: Nope}]}\n", "cm", bad)
    assert bad.unread == ["cm: multiKueue.externalFrameworks entry 'Nope' is not Kind.version.group"]


def test_deployment_gives_version_and_gates() -> None:
    info = KueueInfo()
    parse_deployment(
        {
            "spec": {
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "manager",
                                "image": "registry.k8s.io/kueue/kueue:v0.18.4",
                                "args": ["--zap-log-level=2", "--feature-gates=WorkloadIdentifierAnnotations=false"],
                            },
                            {"name": "mkpolicy", "image": "ghcr.io/mkpolicy/mkpolicy:0.1.0"},
                        ]
                    }
                }
            }
        },
        info,
    )
    assert info.version == (0, 18, 4) and info.gates == {"WorkloadIdentifierAnnotations": False}
    assert info.identifier() == "label-only"


@pytest.mark.parametrize(
    ("image", "version"),
    [
        ("registry.k8s.io/kueue/kueue:v0.19.2", (0, 19, 2)),
        ("localhost:5000/kueue:v0.18.6-rc.1@sha256:abc", (0, 18, 6)),
        ("kueue:latest", None),
        ("localhost:5000/kueue", None),
    ],
)
def test_version_of_image(image: str, version: tuple[int, int, int] | None) -> None:
    assert version_of_image(image) == version


# pkg/controller/jobframework/utils.go: the gate (default on from 0.18) puts the name in an
# annotation; with it off, the over-63-characters fallback exists from 0.18.5 and 0.19.1.
@pytest.mark.parametrize(
    ("version", "gate", "identifier"),
    [
        ((0, 19, 2), None, "annotation"),
        ((0, 18, 0), None, "annotation"),
        ((0, 17, 8), None, "label-only"),
        ((0, 17, 8), True, "annotation"),
        ((0, 16, 9), None, "label-only"),
        ((0, 18, 4), False, "label-only"),
        ((0, 18, 5), False, "label"),
        ((0, 19, 0), False, "label-only"),
        ((0, 19, 1), False, "label"),
        (None, None, None),
        (None, True, "annotation"),
    ],
)
def test_identifier_follows_the_version(
    version: tuple[int, int, int] | None, gate: bool | None, identifier: str | None
) -> None:
    info = KueueInfo(version=version, gates={} if gate is None else {"WorkloadIdentifierAnnotations": gate})
    assert info.identifier() == identifier


def test_findings() -> None:
    info = KueueInfo(version=(0, 19, 2))
    parse_configuration(CONFIG, "cm", info)
    found = [(f.level, f.message.split(":")[0]) for f in policy_findings(info, [("tekton", PIPELINERUN)])]
    assert found == [
        ("warning", "policy tekton (PipelineRun.v1.tekton.dev)"),  # version mismatch
        ("info", "Kueue's external framework Workflow.v1alpha1.argoproj.io has no policy"),
    ]
    assert "version mismatch" in policy_findings(info, [("tekton", PIPELINERUN)])[0].message
    info.external_frameworks = ()
    [absent] = policy_findings(info, [("tekton", PIPELINERUN)])
    assert "not in Kueue's multiKueue.externalFrameworks" in absent.message
    old = KueueInfo(version=(0, 14, 3), external_frameworks=(PIPELINERUN,))
    [gate] = policy_findings(old, [("tekton", PIPELINERUN)])
    assert "MultiKueueAdaptersForCustomJobs off" in gate.message


def test_port_collisions() -> None:
    config = config_from_dict(
        {
            "listen": {"basePort": 9442},
            "ops": {"port": 8082},
            "workers": [{"name": "a", "kubeconfig": {"file": "x"}}, {"name": "b", "kubeconfig": {"file": "y"}}],
        }
    )
    messages = [f.message for f in port_findings(KueueInfo(), sidecar_ports(config))]
    assert messages == [
        "worker b endpoint port 9443 is Kueue's webhooks port in the same pod: one of them cannot listen",
        "ops port 8082 is Kueue's visibility API port in the same pod: one of them cannot listen",
    ]
    assert port_findings(KueueInfo(), sidecar_ports(config_from_dict({"workers": [config.workers[0]]}))) == []


@pytest.mark.parametrize(
    ("external", "active", "inactive", "stranded"),
    [
        # a typo in the group: the policy is pending, the kind Kueue dispatches is stranded
        ("Sim.v1.acme.io", [], [("sim", "Sim.v1.acme.com", "pending")], [("Sim.v1.acme.io", "sim")]),
        # the same typo, the typo'd kind served: the active policy is never used
        ("Sim.v1.acme.io", [("sim", "Sim.v1.acme.com")], [], [("Sim.v1.acme.io", "sim")]),
        # a skipped policy of the same kind
        (
            "Workflow.v1alpha1.argoproj.io",
            [],
            [("argo", "Workflow.v1alpha1.argoproj.io", "skipped")],
            [("Workflow.v1alpha1.argoproj.io", "argo")],
        ),
        # covered (another version is a version mismatch, refused elsewhere): not stranded
        ("Sim.v1.acme.io", [("sim", "Sim.v1beta1.acme.io")], [], []),
        # nothing close: the kind travels as Kueue makes it (info, as documented)
        ("Sim.v1.acme.io", [], [("other", "PipelineRun.v1.tekton.dev", "pending")], []),
    ],
)
def test_stranded_kinds(
    external: str,
    active: list[tuple[str, str]],
    inactive: list[tuple[str, str, str]],
    stranded: list[tuple[str, str]],
) -> None:
    info = KueueInfo(external_frameworks=(parse_gvk(external),))
    found = stranded_kinds(
        info, [(n, parse_gvk(g)) for n, g in active], [(n, parse_gvk(g), why) for n, g, why in inactive]
    )
    assert [(str(s.kind), s.policy) for s in found] == stranded
    findings = policy_findings(info, [(n, parse_gvk(g)) for n, g in active], found)
    errors = [f.message for f in findings if f.level == "error"]
    assert len(errors) == len(stranded)
    if stranded:
        assert errors[0].startswith(f"Kueue dispatches {external} (multiKueue.externalFrameworks) but no policy")
        assert not any("has no policy" in f.message for f in findings)  # not also said as info


def test_a_pending_policy_with_kueues_entries_unread_is_a_warning() -> None:
    """Without Kueue's externalFrameworks a typo cannot be told from a missing CRD: said, not silent."""
    pending = [("sim", parse_gvk("Sim.v1.acme.com"))]
    [finding] = policy_findings(KueueInfo(), [], (), pending)
    assert finding.level == "warning"
    assert finding.message.startswith("policy sim (Sim.v1.acme.com) is pending and Kueue's multiKueue.externalFrameworks")
    known = KueueInfo(external_frameworks=(parse_gvk("Sim.v1.acme.io"),))
    assert not any("could not be read" in f.message for f in policy_findings(known, [], (), pending))
