"""``mkpolicy dev multikueue``: a manager and workers with MultiKueue configured, until interrupted.

The loopback form runs everywhere; ``--real`` (real etcd, kube-apiservers and Kueue) needs Go,
like every real-peer test (docs/testing.md).
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from mkpolicy.testing.kubectl import Kubectl
from mkpolicy.testing.peers import build

ROOT = Path(__file__).resolve().parents[2]


def policies(tmp: Path) -> Path:
    folder = tmp / "policies"
    folder.mkdir()
    shutil.copy(ROOT / "policies" / "tekton-pipelinerun.yaml", folder)
    shutil.copytree(ROOT / "schemas", tmp / "schemas")
    return folder


def started(proc: subprocess.Popen[str]) -> Iterator[str]:
    """stdout lines until 'press Ctrl-C to stop' (the command is up)."""
    assert proc.stdout is not None
    for line in proc.stdout:
        yield line.rstrip("\n")
        if line.startswith("press Ctrl-C"):
            return
    raise AssertionError(f"exited {proc.wait()} before it was up:\n{proc.stderr.read() if proc.stderr else ''}")


def interrupted(proc: subprocess.Popen[str], sig: int = signal.SIGINT) -> tuple[str, str]:
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return out, err


def launch(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "mkpolicy", "dev", "multikueue", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


@pytest.mark.timeout(120)
def test_loopback_with_the_sidecar_wired(tmp_path: Path) -> None:
    out_dir = tmp_path / "kubeconfigs"
    proc = launch("--workers", "2", "--policies", str(policies(tmp_path)), "--kubeconfig-dir", str(out_dir))
    try:
        lines = list(started(proc))
        assert f"manager: {out_dir / 'manager.kubeconfig'}" in lines
        assert f"worker2: {out_dir / 'worker2.kubeconfig'}" in lines
        kubectl = Kubectl.for_kubeconfig(out_dir / "manager.kubeconfig", tmp_path)
        if kubectl is None:
            pytest.skip("kubectl is not installed")
        secret = kubectl.json("get", "secret", "-n", "kueue-system", "worker1-secret")
        kubeconfig = yaml.safe_load(base64.b64decode(secret["data"]["kubeconfig"]))
        worker1 = yaml.safe_load((out_dir / "worker1.kubeconfig").read_text())
        # --wire pointed the MultiKueueCluster Secret at the sidecar, not at the worker
        assert kubeconfig["clusters"][0]["cluster"]["server"] != worker1["clusters"][0]["cluster"]["server"]
        assert [m["metadata"]["name"] for m in kubectl.json("get", "multikueueclusters")["items"]] == [
            "worker1", "worker2"]  # fmt: skip
    finally:
        out, _ = interrupted(proc)
    assert out.rstrip().endswith("stopped")
    assert list(out_dir.iterdir()) == []  # the kubeconfigs pointed at servers that are gone


@pytest.mark.timeout(120)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP-terminal-closed"])
def test_other_stop_signals_stop_it_as_ctrl_c_does(sig: int, tmp_path: Path) -> None:
    out_dir = tmp_path / "kubeconfigs"
    proc = launch("--workers", "1", "--kubeconfig-dir", str(out_dir))
    try:
        list(started(proc))
    finally:
        out, _ = interrupted(proc, sig)
    assert out.rstrip().endswith("stopped")
    assert list(out_dir.iterdir()) == []


@pytest.mark.timeout(120)
def test_the_shipped_policies_folder_starts_with_the_kinds_not_served_pending(tmp_path: Path) -> None:
    """The folder the docs show: Tekton (its CRD bundled) works, the kinds without a CRD wait, listed."""
    proc = launch("--workers", "1", "--policies", str(ROOT / "policies"), "--kubeconfig-dir", str(tmp_path / "kc"))
    try:
        pending = [line.strip() for line in started(proc) if "pending" in line]
    finally:
        interrupted(proc)
    assert [line.split(": ", 1)[1].split(" (")[0] for line in pending] == ["argo-workflow", "batchrun"]
    assert all(line.startswith("pending (give its CRD with --crd): ") for line in pending)
    assert all(line.endswith("the manager cluster does not serve this kind") for line in pending)


@pytest.mark.timeout(120)
def test_a_kubeconfig_that_cannot_be_written_is_an_error_line(tmp_path: Path) -> None:
    """Found while starting (here a folder where manager.kubeconfig goes): everything stopped, no traceback."""
    out_dir = tmp_path / "kc"
    (out_dir / "manager.kubeconfig").mkdir(parents=True)
    proc = subprocess.run([sys.executable, "-m", "mkpolicy", "dev", "multikueue", "--kubeconfig-dir", str(out_dir)],
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"error: {out_dir / 'manager.kubeconfig'}: "), proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.splitlines()) == 1
    assert [p.name for p in out_dir.iterdir()] == ["manager.kubeconfig"]  # (the user's, kept)


@pytest.mark.parametrize(("args", "message"), [
    (["--workers", "0"], "--workers must be at least 1, found 0"),
    (["--crd", "/nonexistent.yaml"], "/nonexistent.yaml: no such file or directory"),
    (["--policies", "/nonexistent"], "/nonexistent: no such file or directory"),
    (["--real", "--kueue-version", "0.18.0"],
     "--kueue-version 0.18.0: no module for it in peers/; expected one of v0.19.2, v0.17.1"),
    (["--kubeconfig-dir", "/dev/null/kubeconfigs"],
     "--kubeconfig-dir /dev/null/kubeconfigs: cannot make the folder: "),
], ids=["no-workers", "missing-crd", "missing-policies", "unknown-kueue", "unwritable-dir"])  # fmt: skip
def test_bad_options_exit_2(args: list[str], message: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "mkpolicy", "dev", "multikueue", *args],
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert proc.returncode == 2
    assert message in proc.stderr


@pytest.mark.real_peers
@pytest.mark.timeout(1800)  # (a cold first run builds the peers)
def test_real_multikueue_until_interrupted(tmp_path: Path) -> None:
    """One worker, real Kueue: the MultiKueueCluster is Active; Ctrl-C stops every process and removes the files."""
    if build.go_binary() is None:
        pytest.skip("no Go toolchain ('go' is not on PATH): --real builds etcd, kube-apiserver and Kueue with it")
    out_dir = tmp_path / "kubeconfigs"
    proc = launch("--real", "--workers", "1", "--kubeconfig-dir", str(out_dir))
    try:
        lines = list(started(proc))
        [up] = [line for line in lines if line.startswith("MultiKueue on real peers")]
        run_dir = Path(re.sub(r".*; logs in ", "", up))
        assert run_dir.is_dir()
        kubectl = Kubectl.for_kubeconfig(out_dir / "manager.kubeconfig", tmp_path)
        if kubectl is None:
            pytest.skip("kubectl is not installed")
        cluster = kubectl.json("get", "multikueuecluster", "worker1")
        assert [c["status"] for c in cluster["status"]["conditions"] if c["type"] == "Active"] == ["True"]
        assert "queue jobs in namespace default: LocalQueue lq -> ClusterQueue cq on every cluster" in lines
        for name in ("manager", "worker1"):  # jobs can be queued at once
            queue = Kubectl.for_kubeconfig(out_dir / f"{name}.kubeconfig", tmp_path)
            assert queue is not None
            assert queue.json("get", "localqueue", "lq", "-n", "default")["spec"]["clusterQueue"] == "cq", name
        assert json.loads(kubectl.run("version", "-o", "json").stdout)["serverVersion"]["gitVersion"] == "v1.36.3"
    finally:
        out, _ = interrupted(proc)
    assert out.rstrip().endswith("stopped")
    assert not run_dir.exists()
    assert list(out_dir.iterdir()) == []
