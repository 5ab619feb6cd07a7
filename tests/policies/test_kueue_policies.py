"""The shipped Kueue policies as documents: one per kind Kueue adapts by hand, each with the
schema comment, the comment block the issue asks for, a suite, examples, and the format
extensions exactly where Kueue's adapter needs them."""

from __future__ import annotations

import kueue_reference as ref
import pytest
from kueue_cases import EXAMPLES, KINDS, POLICIES, ROOT

import mkpolicy

#: The issue's table (plus Pod, which Kueue adapts by hand too).
FRAMEWORKS = {
    "appwrapper": "AppWrapper.v1beta2.workload.codeflare.dev",
    "job": "Job.v1.batch",
    "jobset": "JobSet.v1alpha2.jobset.x-k8s.io",
    "jaxjob": "JAXJob.v1.kubeflow.org",
    "leaderworkerset": "LeaderWorkerSet.v1.leaderworkerset.x-k8s.io",
    "mpijob": "MPIJob.v2beta1.kubeflow.org",
    "paddlejob": "PaddleJob.v1.kubeflow.org",
    "pod": "Pod.v1",
    "pytorchjob": "PyTorchJob.v1.kubeflow.org",
    "raycluster": "RayCluster.v1.ray.io",
    "rayjob": "RayJob.v1.ray.io",
    "rayservice": "RayService.v1.ray.io",
    "statefulset": "StatefulSet.v1.apps",
    "tfjob": "TFJob.v1.kubeflow.org",
    "trainjob": "TrainJob.v1alpha1.trainer.kubeflow.org",
    "xgboostjob": "XGBoostJob.v1.kubeflow.org",
}


def test_one_policy_per_kind_and_nothing_else() -> None:
    files = {p.stem for p in POLICIES.glob("*.yaml") if not p.name.endswith(".test.yaml")}
    assert files == set(KINDS) == set(FRAMEWORKS)
    suites = {p.name.removesuffix(".test.yaml") for p in POLICIES.glob("*.test.yaml")}
    assert suites == set(KINDS)
    assert {p.name for p in EXAMPLES.iterdir() if p.is_dir()} == set(KINDS)


def test_the_directory_loads_as_one_policy_set() -> None:
    policies = mkpolicy.load(str(POLICIES))
    assert sorted(p.spec.framework for p in policies) == sorted(FRAMEWORKS.values())


@pytest.mark.parametrize("kind", KINDS)
def test_policy_document(kind: str) -> None:
    path = POLICIES / f"{kind}.yaml"
    text = path.read_text()
    assert text.startswith("# yaml-language-server: $schema=../../schemas/frameworkpolicy.schema.json\n")
    assert (ROOT / "schemas" / "frameworkpolicy.schema.json").is_file()
    header = text[: text.index("\napiVersion:")]
    for needle in ("Source: kubernetes-sigs/kueue pkg/controller/jobs/", "What Kueue's adapter does", "reproduces"):
        assert needle in header, f"{path.name}: the comment block lacks {needle!r}"
    assert "cannot" in header or "What it cannot" in header
    (policy,) = mkpolicy.load(str(path))
    assert policy.name == f"kueue-{kind}"
    assert policy.spec.framework == FRAMEWORKS[kind]
    assert policy.spec.schema_ is None or not policy.spec.schema_.startswith("/")


@pytest.mark.parametrize("kind", KINDS)
def test_extensions_are_used_exactly_where_kueue_needs_them(kind: str) -> None:
    (policy,) = mkpolicy.load(str(POLICIES / f"{kind}.yaml"))
    model = ref.KINDS[kind]
    if model.managed_by is None:
        assert policy.spec.managed_by is None
    else:
        assert policy.spec.managed_by is not None
        assert policy.spec.managed_by.path == "/" + "/".join(model.managed_by)
        assert policy.spec.managed_by.value == ref.MULTIKUEUE
    assert (policy.spec.sync.mode == "none") is (model.sync == "none")
    assert policy.spec.sync.subresource == "status"
    assert policy.spec.creation.workload_identifier == ("context" if model.identifier else "none")
    assert policy.spec.failure_policy == "Fail"
