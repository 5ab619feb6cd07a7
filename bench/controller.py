"""mkpolicy controller vs. Kueue's own Go integration for batch/Job, on real peers, in one run.

One kube-apiserver (on etcd) and real Kueue v0.19.2, built by the real-peer harness
(``mkpolicy.testing.peers``); a ClusterQueue large enough to admit everything. N batch/Jobs
(Kueue's Go integration) and N BatchRuns (``policies/batchrun.yaml`` under mkpolicy
controller, in this process) are submitted at once, suspended as their admission would leave
them. Measured for each side: the time until every object has a Workload, and until every one
is running (unsuspended after Kueue admitted it). Then the controller's RSS with every object
in its caches.

    python bench/controller.py --jobs 1000

With ``--rss N``: the controller's own RSS holding N jobs and their N Workloads. A real
kube-apiserver (on etcd, the real-peer harness; no Kueue: nothing needs admitting), N BatchRuns
submitted suspended and queued, then ``mkpolicy controller`` started as a process of its own,
which lists and watches them, creates the N Workloads and keeps both in its caches. Its RSS
(``/proc/PID/status``) is sampled until every Workload exists and the controller is idle.

    python bench/controller.py --rss 10000

Goal (docs/integration.md, issue "declarative integration"): mkpolicy within 2x of the Go
integration; RSS with 10,000 jobs at most 150 MiB. Needs Go (the harness builds the peers).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from mkpolicy.testing.peers.processes import guarded

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "controller"))

API = "kueue.x-k8s.io/v1beta2"
NS = "bench"
FRAMEWORK = "BatchRun.v1alpha1.batch.example.com"
TEMPLATE = {"spec": {"restartPolicy": "Never", "containers": [
    {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "10m"}}}]}}  # fmt: skip


def rss_mib(pid: int | str = "self") -> float:
    """A process's resident set (VmRSS), MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def start_kueue(plane: Any) -> tuple[Any, Any]:
    from mkpolicy.testing.apiserver import load_crds
    from mkpolicy.testing.peers import build
    from mkpolicy.testing.peers.multikueue import KueueInstance, ensure_metrics_cert, url_webhooks

    cluster = plane.add_cluster("bench")
    module = build.kueue_module_dir("v0.19.2")
    bases = module / "config" / "components" / "crd" / "bases"
    crds = [d for f in sorted(bases.glob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]
    crds += [json.loads(json.dumps(c)) for c in load_crds(str(ROOT / "examples/batchrun/crd.yaml"))]
    for ns in ("kueue-system", NS):
        cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    cluster.install_crds(crds)
    ensure_metrics_cert(plane.pki.serving.cert_pem, plane.pki.serving.key_pem)
    kueue = KueueInstance(cluster, plane.binaries["kueue-v0.19.2"], [FRAMEWORK], manager=False, log_level=1)
    for hook in url_webhooks(module / "config/components/webhook/manifests.yaml", kueue.webhook_port,
                             plane.pki.ca.cert_pem):  # fmt: skip
        cluster.apply(hook)
    kueue.process.start()
    kueue.wait_ready()
    cluster.apply({"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "default"}})
    cluster.apply({"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {
        "namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
            {"name": "default", "resources": [{"name": "cpu", "nominalQuota": "100000"}]}]}]}})  # fmt: skip
    cluster.apply({"apiVersion": API, "kind": "LocalQueue", "metadata": {"name": "q", "namespace": NS},
                   "spec": {"clusterQueue": "cq"}})  # fmt: skip
    return cluster, kueue


def objects(n: int) -> list[dict[str, Any]]:
    """N batch/Jobs and N BatchRuns, queued and suspended as their admission leaves them."""
    labels = {"kueue.x-k8s.io/queue-name": "q"}
    out: list[dict[str, Any]] = []
    for i in range(n):
        job_meta = {"name": f"j{i}", "namespace": NS, "labels": labels}
        run_meta = {**job_meta, "name": f"b{i}", "annotations": {"kueue.mkpolicy.io/suspended-by-kueue": "true"}}
        spec = {"suspend": True, "parallelism": 1, "template": TEMPLATE}
        out.append({"apiVersion": "batch/v1", "kind": "Job", "metadata": job_meta, "spec": {**spec, "completions": 1}})
        out.append({"apiVersion": "batch.example.com/v1alpha1", "kind": "BatchRun", "metadata": run_meta, "spec": spec})
    return out


def running(admin: Any, api_version: str, kind: str) -> int:
    """How many objects of the kind are unsuspended."""
    return sum(1 for obj in admin.list(api_version, kind, NS) if not obj["spec"].get("suspend"))


async def run(n: int) -> dict[str, Any]:
    from controller_harness import controller

    from mkpolicy.testing.peers.controlplane import ControlPlane

    with ControlPlane(log=lambda line: print(f"[peers] {line}", file=sys.stderr), kueue_versions=["v0.19.2"]) as plane:
        cluster, kueue = start_kueue(plane)
        admin = cluster.admin
        try:
            async with controller(cluster, lease_name="bench", workers=8) as ctl:
                items = objects(n)
                started = time.monotonic()
                with ThreadPoolExecutor(16) as pool:
                    await asyncio.get_running_loop().run_in_executor(None, lambda: list(pool.map(admin.create, items)))
                submitted = time.monotonic() - started
                done: dict[str, dict[str, float]] = {"Job": {}, "BatchRun": {}}
                while any(len(done[k]) < 2 for k in done):
                    now = time.monotonic() - started
                    workloads = await asyncio.to_thread(admin.list, API, "Workload", NS)
                    owners = {"Job": 0, "BatchRun": 0}
                    for wl in workloads:
                        kind = (wl["metadata"].get("ownerReferences") or [{}])[0].get("kind")
                        if kind in owners:
                            owners[kind] += 1
                    started_now = {
                        "Job": await asyncio.to_thread(running, admin, "batch/v1", "Job"),
                        "BatchRun": await asyncio.to_thread(running, admin, "batch.example.com/v1alpha1", "BatchRun"),
                    }
                    for kind in done:
                        if owners[kind] >= n and "workloads" not in done[kind]:
                            done[kind]["workloads"] = now
                        if started_now[kind] >= n and "running" not in done[kind]:
                            done[kind]["running"] = now
                    if now > 1800:
                        raise SystemExit(f"not done in 30 min: {owners} workloads, {started_now} running")
                    await asyncio.sleep(0.5)
                rss = rss_mib()
                cached = len(ctl.job_informers["batchrun"]) + len(ctl.workloads or [])
        finally:
            kueue.process.stop()
    return {"jobs": n, "submitted_s": round(submitted, 1), "go": done["Job"], "mkpolicy": done["BatchRun"],
            "rss_mib": round(rss, 1), "objects_cached": cached}  # fmt: skip


async def count(client: Any, path: str) -> int:
    """How many objects the collection ``path`` holds (one item listed: remainingItemCount)."""
    page = await client.get(f"{path}?limit=1")
    return len(page.get("items") or []) + int((page.get("metadata") or {}).get("remainingItemCount") or 0)


async def rss(n: int) -> dict[str, Any]:
    import subprocess
    import tempfile

    from controller_harness import CRD, batchrun, client

    from mkpolicy.testing.peers.controlplane import ControlPlane
    from mkpolicy.testing.peers.processes import free_port

    crd_dir = ROOT / "mkpolicy" / "testing" / "crds"
    crds = [yaml.safe_load((crd_dir / f"kueue.x-k8s.io_{r}.yaml").read_text())
            for r in ("workloads", "resourceflavors", "localqueues", "clusterqueues")]  # fmt: skip
    with ControlPlane(log=lambda line: print(f"[peers] {line}", file=sys.stderr)) as plane, \
            tempfile.TemporaryDirectory() as tmp:  # fmt: skip
        cluster = plane.add_cluster("rss")
        cluster.install_crds([*crds, yaml.safe_load(CRD.read_text())])
        admin = cluster.admin
        admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        started = time.monotonic()
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(admin.create, (batchrun(f"b{i}", namespace=NS) for i in range(n))))
        submitted = time.monotonic() - started
        kubeconfig = cluster.write_kubeconfig(Path(tmp) / "kubeconfig")
        port = free_port()
        argv = [sys.executable, "-m", "mkpolicy", "controller", "--policies", str(ROOT / "policies/batchrun.yaml"),
                "--kubeconfig", str(kubeconfig), "--no-leader-election", "--ops-address", "127.0.0.1",
                "--ops-port", str(port), "--log-level", "warning"]  # fmt: skip
        proc = guarded(subprocess.Popen(argv, stderr=subprocess.DEVNULL))
        samples: list[float] = []
        try:
            async with client(cluster) as kube:
                path = f"/apis/{API}/namespaces/{NS}/workloads"
                begun = time.monotonic()
                while (have := await count(kube, path)) < n:
                    samples.append(rss_mib(proc.pid))
                    if proc.poll() is not None or time.monotonic() - begun > 3600:
                        raise SystemExit(f"controller exited or stalled: {have} of {n} Workloads")
                    await asyncio.sleep(1.0)
                all_made = time.monotonic() - begun
                for _ in range(20):  # idle: the last events applied, the queue drained
                    samples.append(rss_mib(proc.pid))
                    await asyncio.sleep(0.5)
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return {"jobs": n, "workloads": n, "submitted_s": round(submitted, 1), "workloads_made_s": round(all_made, 1),
            "rss_peak_mib": round(max(samples), 1), "rss_idle_mib": round(samples[-1], 1)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1000, help="jobs of each kind (default 1000)")
    parser.add_argument("--rss", type=int, metavar="N", help="measure the controller's RSS with N jobs instead")
    args = parser.parse_args()
    if args.rss:
        print(json.dumps(asyncio.run(rss(args.rss)), indent=2))
        return
    result = asyncio.run(run(args.jobs))
    go, mk = result["go"], result["mkpolicy"]
    result["ratio_workloads"] = round(mk["workloads"] / go["workloads"], 2)
    result["ratio_running"] = round(mk["running"] / go["running"], 2)
    print(json.dumps(result, indent=2))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
