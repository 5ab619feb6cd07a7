"""The ``mkpolicy sidecar`` and ``mkpolicy demo`` commands, run as processes."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from argo_harness import argo_crds
from sidecar_harness import POLICIES, WORKERS, clusters, free_ports, policy_dir

from mkpolicy.kube.kubeconfig import kueue_violations, parse_kubeconfig

pytestmark = pytest.mark.timeout(120)

TEKTON = POLICIES / "tekton-pipelinerun.yaml"


def mkpolicy_cmd(*args: str, timeout: float = 60, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkpolicy", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        **kwargs,  # type: ignore[arg-type]
    )


def test_demo_runs_and_checks_every_step() -> None:
    started = time.monotonic()
    proc = mkpolicy_cmd("demo")
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    for needle in (
        "--wire: kueue-system/worker1-secret updated",
        "Kueue v0.19.2 reads the wired Secrets and connects through the sidecar",
        "ok: the kubeconfigs pass Kueue's rules and point at the sidecar",
        "/apis/tekton.dev/v1/pipelineruns?allowWatchBookmarks=true&labelSelector=kueue.x-k8s.io%2Fmultikueue-origin"
        "%3Dmultikueue&watch=true  [application/json] -> 200",
        "ok: the copy on worker1 is exactly the policy's create output",
        "- /spec/status",
        "ok: the manager's status is exactly the policy's sync output",
        "left on the worker: observedGeneration, pipelineSpec, provenance",
        "ok: one more reconcile writes nothing",
        "ok: worker1 holds no PipelineRun and no Workload",
        "/pipelineruns/build-and-test  [PartialObjectMetadata] -> 200",
        '/pipelineruns/build-and-test {"propagationPolicy": "Background"}  [application/json] -> 200',
        "--unwire: kueue-system/worker1-secret restored",
        "every step matched what the policy says",
    ):
        assert needle in out, needle
    assert "FAILED" not in out + proc.stderr
    assert elapsed < 30


def test_demo_other_worker_label_mode_and_an_older_kueue() -> None:
    """Kueue 0.17 (the label, no ownership check, the whole object as POST body) to worker2."""
    proc = mkpolicy_cmd("demo", "--worker", "worker2", "--kueue", "0.17.5")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Kueue v0.17.5 reads the wired Secrets" in proc.stdout
    assert "Kueue on worker2 admits the Workload" in proc.stdout
    assert re.search(r"labels:\n(.*\n)*? +kueue.x-k8s.io/prebuilt-workload-name: pipelinerun-build-and-test-[0-9a-f]{5}\n",
                     proc.stdout)  # fmt: skip
    assert "ok: nothing was created on worker1" in proc.stdout
    assert "PartialObjectMetadata" not in proc.stdout  # no ownership check before 0.17.6
    bad = mkpolicy_cmd("demo", "--kueue", "0.16", "--identifier", "annotation")
    assert bad.returncode == 2 and "writes the label only" in bad.stderr
    assert mkpolicy_cmd("demo", "--kueue", "1.0").returncode == 2


def test_demo_missing_input_is_a_usage_error(tmp_path: Path) -> None:
    proc = mkpolicy_cmd("demo", "--policy", str(tmp_path / "none.yaml"), "--object", str(tmp_path / "o.yaml"))
    assert proc.returncode == 2 and "none.yaml not found" in proc.stderr
    proc = mkpolicy_cmd("demo", "--policy", str(TEKTON))
    assert proc.returncode == 2 and "--policy needs --object FILE" in proc.stderr


TRAINING_CRD = Path(__file__).parents[1] / "check" / "data" / "ml.example.com_trainingruns.yaml"


def test_demo_runs_the_users_own_kind(tmp_path: Path) -> None:
    """A new user's kind end to end: init scaffolds the policy and example objects from the CRD,
    the demo installs the CRD and runs Kueue's model through the sidecar with them."""
    init = mkpolicy_cmd("init", "--framework", "TrainingRun.v1.ml.example.com", "--crd", str(TRAINING_CRD),
                        "--dir", str(tmp_path))  # fmt: skip
    assert init.returncode == 0, init.stderr
    files = {
        "--policy": tmp_path / "ml-trainingrun.yaml",
        "--object": tmp_path / "examples" / "ml-trainingrun.yaml",
        "--worker-object": tmp_path / "examples" / "ml-trainingrun-worker.yaml",
    }
    argv = [x for flag, path in files.items() for x in (flag, str(path))]
    proc = mkpolicy_cmd("demo", "--crd", str(TRAINING_CRD), *argv, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "mkpolicy sidecar: policy ml-trainingrun for TrainingRun.v1.ml.example.com" in out
    assert "ok: the copy on worker1 is exactly the policy's create output" in out
    assert "the TrainingRun has written its status; Kueue copies the status back" in out
    assert "ok: the manager's status is exactly the policy's sync output" in out
    assert "ok: worker1 holds no TrainingRun and no Workload" in out
    assert "POST   /apis/ml.example.com/v1/namespaces/default/trainingruns  [application/json] -> 201" in out
    # without the CRD the kind cannot be served: said, not a crash
    proc = mkpolicy_cmd("demo", *argv)
    assert proc.returncode == 2 and "give its CRD with --crd FILE" in proc.stderr, proc.stderr


def test_help_stays_light() -> None:
    code = (
        "import sys; from mkpolicy.cli.main import build_parser; h = build_parser().format_help(); "
        "print('sidecar' in h and 'demo' in h, any(m.startswith(('aiohttp', 'mkpolicy.sidecar', 'mkpolicy.testing')) "
        "for m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert proc.stdout.split() == ["True", "False"]


def write(path: Path, data: object) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def test_bad_config_exits_2_with_a_located_error(tmp_path: Path) -> None:
    config = tmp_path / "sidecar.yaml"
    config.write_text("workers:\n  - name: worker1\n    kubeconfig: {file: x}\n    prot: 1\n")
    proc = mkpolicy_cmd("sidecar", "--policies", str(POLICIES), "--config", str(config))
    assert proc.returncode == 2
    assert f"{config}:4:5: error: unknown field 'workers[0].prot'" in proc.stderr
    proc = mkpolicy_cmd("sidecar", "--policies", str(tmp_path / "nope"), "--config", str(config))
    assert proc.returncode == 2


def test_check_mode(tmp_path: Path) -> None:
    with clusters(tmp_path) as env:
        insecure = yaml.safe_load(env.kubeconfigs["worker2"].read_text())
        insecure["clusters"][0]["cluster"]["insecure-skip-tls-verify"] = True
        insecure["users"][0]["user"]["tokenFile"] = "/var/run/token"
        bad = write(tmp_path / "bad.kubeconfig", insecure)
        good_config = write(
            tmp_path / "good.yaml",
            {"workers": [{"name": w, "kubeconfig": {"file": str(env.kubeconfigs[w])}} for w in WORKERS]},
        )
        bad_config = write(
            tmp_path / "bad.yaml",
            {
                "kueue": {"version": "0.17.8", "workloadIdentifierAnnotations": True},
                "workers": [
                    {"name": "worker1", "kubeconfig": {"file": str(env.kubeconfigs["worker1"])}},
                    {"name": "worker2", "kubeconfig": {"file": str(bad)}},
                ],
            },
        )
        policies = policy_dir(tmp_path, TEKTON, POLICIES / "argo-workflow.yaml", POLICIES / "kueue" / "pytorchjob.yaml")
        proc = mkpolicy_cmd("sidecar", "--check", "--policies", str(policies), "--config", str(good_config))
        assert proc.returncode == 0, proc.stderr
        assert "policy tekton-pipelinerun: ok (PipelineRun.v1.tekton.dev)" in proc.stdout
        assert "policy argo-workflow: ok (Workflow.v1alpha1.argoproj.io)" in proc.stdout
        # valid, but the sidecar skips it: said so, not "ok"
        assert (
            "policy kueue-pytorchjob: skipped (PyTorchJob.v1.kubeflow.org): stock Kueue cannot carry it: "
            "managedBy at /spec/runPolicy/managedBy" in proc.stdout
        )
        assert "policy kueue-pytorchjob: ok" not in proc.stdout
        # the wire contract in force: Kueue's Workloads, the policy kinds, every built-in integration
        # (Kueue's configuration not read)
        contract = proc.stdout[proc.stdout.index("wire contract (") :]
        assert "Workloads: watch" in contract and "policy tekton-pipelinerun: create" in contract
        assert "integration batch/job: patch" in contract and "policy argo-workflow: create" in contract
        assert "policy tekton-pipelinerun: patch" not in contract
        watches = re.search(r"watches per client address: (\d+) \(limits.maxWatchesPerAddress; Kueue watches (\d+) ", contract)
        assert watches is not None and int(watches[1]) == 2 * int(watches[2]) + 4
        assert "Workloads, integration batch/job" in contract[watches.end() :]
        proc = mkpolicy_cmd("sidecar", "--check", "--policies", str(policies), "--config", str(bad_config))
        assert proc.returncode == 2
        assert "insecure-skip-tls-verify is not allowed" in proc.stderr and "tokenFile is not allowed" in proc.stderr
        assert "kueue: not read: no manager connection" in proc.stdout
        # no manager: the configured version and gate stand in (the gate overrides 0.17's default)
        assert "kueue: Kueue 0.17.8; workload identifier: annotation" in proc.stdout
        # with the manager: Kueue's configuration names PipelineRun at another version, a port collides
        # (the manager serves the policies' kinds: Argo's Workflow with the managedBy field Kueue reads)
        env.manager.register_crd(argo_crds()[1])
        env.manager.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
                "data": {
                    "controller_manager_config.yaml": "apiVersion: config.kueue.x-k8s.io/v1beta2\n"
                    "kind: Configuration\nmultiKueue:\n  externalFrameworks:\n"
                    "  - name: PipelineRun.v1beta1.tekton.dev\n"
                },
            }
        )
        with_manager = write(
            tmp_path / "manager.yaml",
            {
                "manager": {"kubeconfig": str(env.kubeconfigs["manager"])},
                "ops": {"port": 8081},
                "kueue": {"version": "0.18.3", "workloadIdentifierAnnotations": False},
                "workers": [{"name": w, "kubeconfig": {"file": str(env.kubeconfigs[w])}} for w in WORKERS],
            },
        )
        proc = mkpolicy_cmd("sidecar", "--check", "--policies", str(policies), "--config", str(with_manager))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert (
            "warning: policy tekton-pipelinerun (PipelineRun.v1.tekton.dev): version mismatch, Kueue's "
            "multiKueue.externalFrameworks names PipelineRun.v1beta1.tekton.dev" in proc.stdout
        ), proc.stdout
        assert "warning: ops port 8081 is Kueue's health probes port in the same pod" in proc.stdout
        # the Deployment cannot be read here: the configured version and gate stand in
        assert "kueue: Kueue 0.18.3; workload identifier: label-only" in proc.stdout
        assert "kueue: not read: cannot read Deployment kueue-system/kueue-controller-manager" in proc.stdout
        (policies / "broken.yaml").write_text("apiVersion: mkpolicy.io/v1alpha1\nkind: FrameworkPolicy\nspec: {}\n")
        proc = mkpolicy_cmd("sidecar", "--check", "--policies", str(policies), "--config", str(good_config))
        assert proc.returncode == 1 and "broken.yaml" in proc.stderr


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


@pytest.mark.loopback_only("wires Secrets in kueue-system and creates cluster-scoped MultiKueueClusters")
def test_serve_wire_sigterm_unwire(tmp_path: Path) -> None:
    """The real process: wires the Secrets, serves, exits 0 on SIGTERM; --unwire restores."""
    with clusters(tmp_path) as env:
        originals = {}
        for worker in WORKERS:
            kubeconfig = env.worker(worker).kubeconfig(cluster=worker)
            originals[worker] = yaml.safe_dump(kubeconfig).encode()
            env.manager.create(
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {"name": f"{worker}-secret", "namespace": "kueue-system"},
                    "data": {"kubeconfig": base64.b64encode(originals[worker]).decode()},
                }
            )
            env.manager.create(
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "MultiKueueCluster",
                    "metadata": {"name": worker},
                    "spec": {
                        "clusterSource": {"kubeConfig": {"locationType": "Secret", "location": f"{worker}-secret"}}
                    },
                }
            )
        ops = free_ports(1)[0]
        config = write(
            tmp_path / "sidecar.yaml",
            {
                "listen": {"basePort": 0},
                "ops": {"address": "127.0.0.1", "port": ops},
                "manager": {"kubeconfig": str(env.kubeconfigs["manager"])},
                "workers": [{"name": w, "kubeconfig": {"secret": {"name": f"{w}-secret"}}} for w in WORKERS],
                "shutdown": {"gracePeriodSeconds": 3},
                "state": {"dir": str(tmp_path / "state")},
            },
        )
        policies = policy_dir(tmp_path, TEKTON)
        kubeconfigs = tmp_path / "out"
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mkpolicy",
                "sidecar",
                "--policies",
                str(policies),
                "--config",
                str(config),
                "--wire",
                "--kubeconfig-dir",
                str(kubeconfigs),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        tokens = []
        try:
            deadline = time.monotonic() + 30
            while get(f"http://127.0.0.1:{ops}/readyz")[0] != 200:
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, "the sidecar did not become ready"
                time.sleep(0.1)
            for worker in WORKERS:
                deadline = time.monotonic() + 10
                while True:
                    secret = env.manager.get("v1", "Secret", f"{worker}-secret", "kueue-system")
                    if secret["metadata"].get("annotations", {}).get("mkpolicy.io/wired"):
                        break
                    assert time.monotonic() < deadline
                    time.sleep(0.05)
                wired = parse_kubeconfig(base64.b64decode(secret["data"]["kubeconfig"]))
                tokens.append(wired["users"][0]["user"]["token"])
                assert kueue_violations(wired) == []
                written = parse_kubeconfig((kubeconfigs / f"{worker}.kubeconfig").read_bytes())
                assert written == wired
                assert stat_mode(kubeconfigs / f"{worker}.kubeconfig") == 0o600
                assert base64.b64decode(secret["data"]["mkpolicy.original-kubeconfig"]) == originals[worker]
            status, metrics = get(f"http://127.0.0.1:{ops}/metrics")
            assert status == 200 and "mkpolicy_sidecar_policies 1.0" in metrics
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
        messages = [line["msg"] for line in lines]
        assert "sidecar started" in messages and "sidecar stopped" in messages
        assert len(tokens) == 2 and not any(token in err for token in tokens)
        # --unwire puts the original kubeconfigs back
        proc2 = mkpolicy_cmd("sidecar", "--unwire", "--policies", str(policies), "--config", str(config))
        assert proc2.returncode == 0, proc2.stderr
        assert "worker1: restored" in proc2.stdout and "worker2: restored" in proc2.stdout
        for worker in WORKERS:
            secret = env.manager.get("v1", "Secret", f"{worker}-secret", "kueue-system")
            assert base64.b64decode(secret["data"]["kubeconfig"]) == originals[worker]
            assert "mkpolicy.original-kubeconfig" not in secret["data"]
            assert "mkpolicy.io/wired" not in (secret["metadata"].get("annotations") or {})
        proc3 = mkpolicy_cmd("sidecar", "--unwire", "--policies", str(policies), "--config", str(config))
        assert "worker1: unchanged" in proc3.stdout  # idempotent


def stat_mode(path: Path) -> int:
    return os.stat(path).st_mode & 0o777


def test_invalid_policies_at_start_exit_1(tmp_path: Path) -> None:
    with clusters(tmp_path) as env:
        policies = policy_dir(tmp_path)
        (policies / "bad.yaml").write_text(
            "apiVersion: mkpolicy.io/v1alpha1\nkind: FrameworkPolicy\nmetadata: {name: bad}\n"
            "spec: {framework: PipelineRun.v1.tekton.dev, failurePolicy: Sometimes}\n"
        )
        config = write(
            tmp_path / "sidecar.yaml",
            {
                "listen": {"basePort": 0},
                "ops": {"port": 0},
                "manager": {"kubeconfig": str(env.kubeconfigs["manager"])},
                "workers": [{"name": "worker1", "kubeconfig": {"file": str(env.kubeconfigs["worker1"])}}],
                "state": {"dir": None},
            },
        )
        proc = mkpolicy_cmd("sidecar", "--policies", str(policies), "--config", str(config))
        assert proc.returncode == 1
        assert "bad.yaml:4" in proc.stderr and "failurePolicy" in proc.stderr


def test_init_state_is_shared_read_only(tmp_path: Path) -> None:
    """Several Kueue replicas: one state, generated once, mounted read-only by every sidecar."""
    from mkpolicy.sidecar import load_config
    from mkpolicy.sidecar.endpoints import certificate_hosts, load_or_create

    config = write(
        tmp_path / "sidecar.yaml", {"workers": [{"name": w, "kubeconfig": {"file": "unused"}} for w in WORKERS]}
    )
    state = tmp_path / "state"
    proc = mkpolicy_cmd("sidecar", "--init-state", str(state), "--policies", str(POLICIES), "--config", str(config))
    assert proc.returncode == 0, proc.stderr
    assert sorted(Path(line).name for line in proc.stdout.split()) == [
        "ca.crt",
        "ca.key",
        "tls.crt",
        "tls.key",
        "tokens.json",
    ]
    first = json.loads((state / "tokens.json").read_text())
    stamps = {p.name: p.stat().st_mtime_ns for p in state.iterdir()}
    for path in state.iterdir():
        path.chmod(0o400)
    state.chmod(0o500)
    try:
        cfg = load_config(str(config))
        creds = load_or_create(str(state), [w.name for w in cfg.workers], certificate_hosts("127.0.0.1", []))
        assert creds.tokens == first
        assert creds.ca.cert_pem == (state / "ca.crt").read_bytes()
        assert {p.name: p.stat().st_mtime_ns for p in state.iterdir()} == stamps  # nothing written
    finally:
        state.chmod(0o700)
