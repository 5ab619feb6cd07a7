"""The Argo policy's integration choices as docs/install.md ("Argo Workflows") gives them: the shipped
declared-requests podSets, the documented bound over ``parallelism`` and templates (swapped into the
shipped policy, lint-clean, as a user would), and the documented terminating stop."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

import mkpolicy
from mkpolicy.check import check_paths

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "policies" / "argo-workflow.yaml"
INSTALL = ROOT / "docs" / "install.md"


def documented(first_line: str) -> str:
    """The YAML block of install.md's Argo section that starts with ``first_line`` (its lines, as given)."""
    section = INSTALL.read_text().split("## Argo Workflows", 1)[1]
    for block in re.findall(r"```yaml\n(.*?)```", section, re.S):
        if block.startswith(first_line):
            return str(block)
    raise AssertionError(f"install.md's Argo section has no yaml block starting {first_line!r}")


def with_section(tmp_path: Path, key: str, block: str) -> Path:
    """The shipped policy with install.md's ``block`` for ``spec.integration.<key>`` (replacing the
    shipped one, or added at the end)."""
    text = POLICY.read_text()
    if f"\n    {key}:" in text:
        start = text.index(f"\n    {key}:") + 1
        end = re.compile(r"^    [#a-z]", re.M).search(text, start + 1)
        assert end is not None
        text = text[:start] + block + text[end.start() :]
    else:
        text = text.rstrip("\n") + "\n" + block
    out = tmp_path / "argo-workflow.yaml"
    out.write_text(text.replace("../schemas/", str(ROOT / "schemas") + "/"))
    return out


def queued() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "argo" / "workflow-queued.yaml").read_text())
    return data


def integration(path: Path) -> Any:
    (policy,) = mkpolicy.load(str(path))
    adapter = mkpolicy.compile(policy)
    assert adapter.integration is not None
    return adapter.integration


def test_the_shipped_podsets_charge_what_the_workflow_declares() -> None:
    [pod_set] = integration(POLICY).pod_sets(queued())
    assert pod_set["count"] == 1
    assert pod_set["template"]["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "6", "memory": "24Gi"}


def test_the_documented_bound_is_parallelism_pods_of_each_container_template(tmp_path: Path) -> None:
    path = with_section(tmp_path, "podSets", documented("    podSets: |"))
    # only the request-annotation prefix is left unused
    assert [f.rule for f in check_paths([str(path)]).findings] == ["MKP207"]
    [pod_set] = integration(path).pod_sets(queued())
    assert (pod_set["name"], pod_set["count"]) == ("shard", 3)
    assert pod_set["template"]["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "2", "memory": "8Gi"}
    assert pod_set["template"]["spec"]["nodeSelector"] == {"kubernetes.io/arch": "amd64"}


@pytest.mark.parametrize("strategy", ["Terminate", "Stop"])
def test_the_documented_terminating_stop(tmp_path: Path, strategy: str) -> None:
    block = documented("    stop:").replace('"Terminate"', f'"{strategy}"')
    path = with_section(tmp_path, "stop", block)
    job = queued()
    job["spec"].pop("suspend", None)
    stopped = integration(path).stop(job, None)
    assert stopped["spec"]["shutdown"] == strategy and "suspend" not in stopped["spec"]
