from __future__ import annotations

import pytest

from mkpolicy.policy import GVK, parse_gvk


@pytest.mark.parametrize(
    ("text", "expected", "api_version"),
    [
        ("PipelineRun.v1.tekton.dev", GVK("tekton.dev", "v1", "PipelineRun"), "tekton.dev/v1"),
        ("Job.v1.batch", GVK("batch", "v1", "Job"), "batch/v1"),
        ("Workflow.v1alpha1.argoproj.io", GVK("argoproj.io", "v1alpha1", "Workflow"), "argoproj.io/v1alpha1"),
        ("JobSet.v1alpha2.jobset.x-k8s.io", GVK("jobset.x-k8s.io", "v1alpha2", "JobSet"), "jobset.x-k8s.io/v1alpha2"),
        ("ConfigMap.v1", GVK("", "v1", "ConfigMap"), "v1"),
    ],
)
def test_parse_gvk(text: str, expected: GVK, api_version: str) -> None:
    gvk = parse_gvk(text)
    assert gvk == expected
    assert gvk.api_version == api_version
    assert str(gvk) == text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "found an empty value"),
        ("PipelineRun", "(no version)"),
        ("pipelineRun.v1.tekton.dev", "found kind 'pipelineRun'"),
        ("PipelineRun.1.tekton.dev", "found version '1'"),
        ("PipelineRun.v1.Tekton.Dev", "found group 'Tekton.Dev'"),
        ("PipelineRun.v1..dev", "found group '.dev'"),
        ("PipelineRun.tekton.dev.v1", "found version 'tekton'"),
    ],
)
def test_parse_gvk_rejects(text: str, message: str) -> None:
    with pytest.raises(ValueError, match="expected Kind.version.group") as info:
        parse_gvk(text)
    assert message in str(info.value)
