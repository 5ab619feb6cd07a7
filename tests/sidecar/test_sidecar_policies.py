"""The policy store: first load, hot reload, a bad reload keeps the last good set."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from mkpolicy.kube.client import ApiError, ResourceInfo
from mkpolicy.policy import GVK
from mkpolicy.sidecar import policies
from mkpolicy.sidecar.metrics import Metrics
from mkpolicy.sidecar.policies import PolicySet, PolicyStore, ReloadError, fingerprint

DATA = Path(__file__).parent / "data"

ARGO = """\
apiVersion: mkpolicy.io/v1alpha1
kind: FrameworkPolicy
metadata: {name: argo}
spec:
  framework: Workflow.v1alpha1.argoproj.io
"""


async def resolve(gvk: GVK) -> ResourceInfo:
    if gvk.group == "unknown.example.com":
        raise ApiError(404, "NotFound", f"no {gvk}")
    if gvk.group == "unreachable.example.com":
        raise ConnectionRefusedError("connection refused")
    return ResourceInfo(gvk.group, gvk.version, gvk.kind, gvk.kind.lower() + "s", True)


def sample(metrics: Metrics, name: str, labels: dict[str, str] | None = None) -> float:
    value = metrics.registry.get_sample_value(name, labels or {})
    return value or 0.0


def test_load_reload_and_rejections(tmp_path: Path) -> None:
    shutil.copy(DATA / "tekton-policy.yaml", tmp_path / "tekton.yaml")
    metrics = Metrics()
    changes: list[PolicySet] = []

    async def on_change(new: PolicySet) -> None:
        changes.append(new)

    async def scenario() -> None:
        store = PolicyStore(str(tmp_path), resolve, metrics, on_change)
        assert await store.reload(force=True)
        assert store.active is not None
        entry = store.active.lookup("tekton.dev", "pipelineruns")
        assert entry is not None and entry.name == "test-pipelinerun"
        assert store.active.lookup("tekton.dev", "tasks") is None
        assert not await store.reload()  # nothing changed

        (tmp_path / "argo.yaml").write_text(ARGO)
        assert await store.reload()
        assert store.active.lookup("argoproj.io", "workflows") is not None
        good = store.active

        (tmp_path / "argo.yaml").write_text(ARGO.replace("framework:", "framewrk:"))
        with pytest.raises(ReloadError) as info:
            await store.reload()
        assert info.value.reason == "load" and "argo.yaml" in info.value.message
        assert store.active is good and store.last_error is not None
        assert not await store.reload()  # the same bad content is not retried

        (tmp_path / "argo.yaml").write_text(
            ARGO + "  creation:\n    patches:\n      - type: JSONPatch\n        jsonPatch: {expression: 'nope('}\n"
        )
        with pytest.raises(ReloadError) as info:
            await store.reload()
        assert info.value.reason == "compile" and store.active is good

        (tmp_path / "argo.yaml").write_text(ARGO.replace("argoproj.io", "unreachable.example.com"))
        with pytest.raises(ReloadError) as info:
            await store.reload()
        assert info.value.reason == "discovery" and store.active is good

        # a kind the manager does not serve: the others stay active, the policy waits
        (tmp_path / "argo.yaml").write_text(ARGO.replace("argoproj.io", "unknown.example.com"))
        assert await store.reload()
        assert store.active.lookup("tekton.dev", "pipelineruns") is not None
        assert len(store.active.pending) == 1 and "argo" in store.active.pending[0]
        assert not await store.reload()  # looked up again, still absent: no new set

        os.remove(tmp_path / "argo.yaml")
        assert await store.reload()
        assert store.active.lookup("argoproj.io", "workflows") is None and store.last_error is None

    asyncio.run(scenario())
    assert len(changes) == 4
    assert sample(metrics, "mkpolicy_sidecar_policy_reloads_total", {"result": "ok"}) == 4
    assert sample(metrics, "mkpolicy_sidecar_policy_reloads_total", {"result": "error"}) == 3
    for reason in ("load", "compile", "discovery"):
        assert sample(metrics, "mkpolicy_sidecar_policy_reload_errors_total", {"reason": reason}) == 1
    assert sample(metrics, "mkpolicy_sidecar_policies") == 1


def test_fingerprint_follows_configmap_symlink_swaps(tmp_path: Path) -> None:
    """A ConfigMap volume: files are symlinks into ..data, which is swapped atomically."""
    v1, v2 = tmp_path / "..2024_v1", tmp_path / "..2024_v2"
    v1.mkdir()
    v2.mkdir()
    (v1 / "p.yaml").write_text("a: 1\n")
    (v2 / "p.yaml").write_text("a: 2\n")
    os.symlink(v1.name, tmp_path / "..data")
    os.symlink("..data/p.yaml", tmp_path / "p.yaml")
    before = fingerprint(str(tmp_path))
    os.symlink(v2.name, tmp_path / "..data_tmp")
    os.replace(tmp_path / "..data_tmp", tmp_path / "..data")
    assert fingerprint(str(tmp_path)) != before


def test_periodic_reload_task(tmp_path: Path) -> None:
    shutil.copy(DATA / "tekton-policy.yaml", tmp_path / "tekton.yaml")
    metrics = Metrics()

    async def scenario() -> None:
        store = PolicyStore(str(tmp_path), resolve, metrics)
        await store.reload(force=True)
        store.start(0.05)
        (tmp_path / "argo.yaml").write_text(ARGO)
        for _ in range(100):
            await asyncio.sleep(0.05)
            if store.active is not None and store.active.lookup("argoproj.io", "workflows"):
                break
        await store.stop()
        assert store.active is not None and store.active.lookup("argoproj.io", "workflows") is not None

    asyncio.run(scenario())


def test_repository_policies_only_use_what_the_wire_can_carry() -> None:
    """policies/ holds Kueue parity policies, Tekton, Argo and the in-house BatchRun: those three go on the wire."""
    root = Path(__file__).resolve().parents[2]
    metrics = Metrics()

    async def scenario() -> PolicySet:
        store = PolicyStore(str(root / "policies"), resolve, metrics)
        await store.reload(force=True)
        assert store.active is not None
        return store.active

    active = asyncio.run(scenario())
    assert sorted(e.name for e in active.entries) == ["argo-workflow", "batchrun", "tekton-pipelinerun"]
    reasons = "\n".join(active.skipped)
    assert "kueue-pytorchjob (PyTorchJob.v1.kubeflow.org): managedBy at /spec/runPolicy/managedBy" in reasons
    assert (
        "kueue-job (Job.v1.batch): Kueue's integration batch/job may be enabled (Kueue's configuration unread): "
        "its own adapter sends Job" in reasons
    )
    assert sample(metrics, "mkpolicy_sidecar_policies_skipped") == len(active.skipped) >= 10


def test_native_kinds_follow_kueues_integrations() -> None:
    """A natively adapted kind is skipped only while Kueue enables that integration
    (Kueue refuses it as an external framework then); otherwise the generic adapter carries it."""
    from mkpolicy.sidecar.kueueconfig import KueueInfo, parse_configuration

    root = Path(__file__).resolve().parents[2]
    info = KueueInfo()
    parse_configuration(
        "integrations:\n  frameworks: [batch/job, pod]\n"
        "multiKueue:\n  externalFrameworks: [{name: RayJob.v1.ray.io}]\n",
        "kueue.yaml",
        info,
    )

    async def scenario() -> PolicySet:
        store = PolicyStore(str(root / "policies"), resolve, Metrics())
        store.kueue = info
        await store.reload(force=True)
        assert store.active is not None
        return store.active

    active = asyncio.run(scenario())
    carried = [e.name for e in active.entries]
    assert "kueue-rayjob" in carried and "kueue-job" not in carried, carried
    assert any(
        line.startswith("kueue-job (Job.v1.batch): Kueue's integration batch/job is enabled") for line in active.skipped
    )


def test_retries_redo_the_discovery_not_the_compilation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pending kind or a failed discovery is looked up again at each check; the unchanged directory is not recompiled."""
    shutil.copy(DATA / "tekton-policy.yaml", tmp_path / "tekton.yaml")
    (tmp_path / "argo.yaml").write_text(ARGO.replace("argoproj.io", "unknown.example.com"))
    compiled: list[str] = []
    real = policies.compile_directory

    def counting(directory: str) -> list[Any]:
        compiled.append(directory)
        return real(directory)

    monkeypatch.setattr(policies, "compile_directory", counting)
    looked_up: list[GVK] = []

    async def counting_resolve(gvk: GVK) -> ResourceInfo:
        looked_up.append(gvk)
        return await resolve(gvk)

    async def scenario() -> None:
        store = PolicyStore(str(tmp_path), counting_resolve, Metrics())
        assert await store.reload(force=True)
        assert store.active is not None and len(store.active.pending) == 1
        for _ in range(3):
            assert not await store.reload()  # the pending kind is looked up again, still absent
        assert len(compiled) == 1
        assert sum(gvk.group == "unknown.example.com" for gvk in looked_up) == 4

        # a discovery error: retried at each check, still without recompiling
        (tmp_path / "argo.yaml").write_text(ARGO.replace("argoproj.io", "unreachable.example.com"))
        for _ in range(3):
            with pytest.raises(ReloadError) as info:
                await store.reload()
            assert info.value.reason == "discovery"
        assert len(compiled) == 2
        assert sum(gvk.group == "unreachable.example.com" for gvk in looked_up) == 3

        (tmp_path / "argo.yaml").write_text(ARGO)
        assert await store.reload()
        assert len(compiled) == 3 and store.active.lookup("argoproj.io", "workflows") is not None

    asyncio.run(scenario())


def test_a_reload_refuses_an_expression_over_the_cost_limit_on_every_object(tmp_path: Path) -> None:
    """MKP213 is an error: the last good set stays; a worst case over the limit (MKP205) is not."""
    shutil.copy(DATA / "tekton-policy.yaml", tmp_path / "tekton.yaml")
    patch = "  creation:\n    patches:\n      - type: JSONPatch\n        jsonPatch: {expression: 'EXPR'}\n"
    always = "lists.range(1000000).filter(i, i % 7 == 0).size() > 0 ? [] : []"
    large = "object.metadata.labels.all(k, k.size() < 64) ? [] : []"

    async def scenario() -> None:
        store = PolicyStore(str(tmp_path), resolve, Metrics())
        assert await store.reload(force=True)
        good = store.active
        (tmp_path / "argo.yaml").write_text(ARGO + patch.replace("EXPR", always))
        with pytest.raises(ReloadError) as info:
            await store.reload()
        assert info.value.reason == "compile" and "MKP213" in info.value.message
        assert store.active is good
        (tmp_path / "argo.yaml").write_text(ARGO + patch.replace("EXPR", large))
        assert await store.reload()

    asyncio.run(scenario())
