"""Engine throughput: create+sync of the shipped Tekton policy vs. hand-written Python.

Both sides do the same work on the same objects, side by side in one process:
build the worker copy (generic clone, drop managedBy, kubectl's annotation and the
pending status, add the markers and the origin-uid annotation) and compute the status
merge patch (the outcome fields of the worker's status). Prints objects/s for each and
the ratio (goal: engine within 3x of hand-written) for two workloads:

* ``example``: examples/tekton/pipelinerun.yaml, a minimal PipelineRun referencing its
  pipeline (the engine's fixed cost per patch dominates);
* ``inline``: the same run with an inline 10-task pipelineSpec and a worker status with
  10 child references, the size of a typical CI PipelineRun.

    python bench/engine.py [--seconds 2]
"""

from __future__ import annotations

import argparse
import copy
import time
from pathlib import Path
from typing import Any

import yaml

import mkpolicy

ROOT = Path(__file__).resolve().parent.parent
ORIGIN = "kueue.x-k8s.io/multikueue-origin"
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
MANAGED_BY = "kueue.x-k8s.io/multikueue"
STATUS_FIELDS = (
    "conditions",
    "startTime",
    "completionTime",
    "finallyStartTime",
    "results",
    "childReferences",
    "skippedTasks",
)


def _deep(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep(v) for v in value]
    return value


def hand_create(manager: dict[str, Any], workload: str, origin: str) -> dict[str, Any]:
    """What tekton-pipelinerun.yaml does on creation, written by hand."""
    if manager["spec"].get("managedBy") != MANAGED_BY:
        raise ValueError("not managed")
    meta = manager["metadata"]
    labels = dict(meta.get("labels") or {})
    labels[ORIGIN] = origin
    annotations = dict(meta.get("annotations") or {})
    annotations.pop(LAST_APPLIED, None)
    annotations[PREBUILT] = workload
    annotations["mkpolicy.io/origin-uid"] = meta.get("uid", "")
    spec = _deep(manager["spec"])
    spec.pop("managedBy", None)
    if spec.get("status") == "PipelineRunPending":
        del spec["status"]
    new_meta = {"name": meta["name"], "namespace": meta["namespace"], "labels": labels, "annotations": annotations}
    return {"apiVersion": manager["apiVersion"], "kind": manager["kind"], "metadata": new_meta, "spec": spec}


def _diff(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: None for k in old if k not in new}
    for k, v in new.items():
        if k not in old:
            out[k] = v
        elif isinstance(v, dict) and isinstance(old[k], dict):
            sub = _diff(old[k], v)
            if sub:
                out[k] = sub
        elif old[k] != v:
            out[k] = v
    return out


def hand_sync(manager: dict[str, Any], worker: dict[str, Any]) -> dict[str, Any] | None:
    """What tekton-pipelinerun.yaml does on status write-back, written by hand."""
    if manager["spec"].get("managedBy") != MANAGED_BY:
        raise ValueError("not managed")
    if "status" not in worker:
        return None
    status = {k: worker["status"][k] for k in STATUS_FIELDS if k in worker["status"]}
    patch = _diff({"status": manager.get("status", {})} if "status" in manager else {}, {"status": status})
    return _deep(patch) if patch else None


def _rate(fn: Any, seconds: float) -> float:
    n = 0
    start = time.perf_counter()
    while True:
        for _ in range(50):
            fn()
        n += 50
        now = time.perf_counter()
        if now - start >= seconds:
            return n / (now - start)


def measure(sides: dict[str, Any], seconds: float, rounds: int = 7) -> dict[str, float]:
    """Calls per second of each side: best of interleaved rounds, so that load from other
    processes hits both sides alike."""
    best = dict.fromkeys(sides, 0.0)
    for _ in range(rounds):
        for name, fn in sides.items():
            best[name] = max(best[name], _rate(fn, seconds / rounds))
    return best


def inline(manager: dict[str, Any], worker: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The example with an inline 10-task pipeline, as CI systems usually submit runs."""
    manager, worker = copy.deepcopy(manager), copy.deepcopy(worker)
    step = {
        "name": "run",
        "image": "golang:1.23",
        "script": "go vet ./...\ngo test ./...\n",
        "env": [{"name": "GOFLAGS", "value": "-mod=mod"}],
    }
    tasks = [
        {
            "name": f"t{i}",
            "runAfter": [f"t{i - 1}"] if i else [],
            "params": [{"name": "revision", "value": "$(params.revision)"}],
            "taskSpec": {"steps": [step]},
        }
        for i in range(10)
    ]
    del manager["spec"]["pipelineRef"]
    manager["spec"]["pipelineSpec"] = {"params": [{"name": "revision", "type": "string"}], "tasks": tasks}
    worker["status"]["childReferences"] = [
        {"apiVersion": "tekton.dev/v1", "kind": "TaskRun", "name": f"build-and-test-t{i}", "pipelineTaskName": f"t{i}"}
        for i in range(10)
    ]
    return manager, worker


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=2.0, help="measuring time per side and workload")
    args = parser.parse_args()
    example_manager = yaml.safe_load((ROOT / "examples/tekton/pipelinerun.yaml").read_text())
    example_worker = yaml.safe_load((ROOT / "examples/tekton/pipelinerun-worker.yaml").read_text())
    (policy,) = mkpolicy.load(str(ROOT / "policies/tekton-pipelinerun.yaml"))
    adapter = mkpolicy.compile(policy)
    ctx = mkpolicy.Context(workload_name="pipelinerun-build-and-test-7c1f2", cluster="worker1")
    workloads = {"example": (example_manager, example_worker), "inline": inline(example_manager, example_worker)}
    for name, (manager, worker) in workloads.items():
        # Same results first: the comparison is only fair if both do the same work.
        assert adapter.create(manager, ctx) == hand_create(manager, ctx.workload_name, ctx.origin)
        assert adapter.sync(manager, worker, ctx) == hand_sync(manager, worker)
        before = copy.deepcopy(manager)

        def engine(manager: dict[str, Any] = manager, worker: dict[str, Any] = worker) -> None:
            adapter.create(manager, ctx)
            adapter.sync(manager, worker, ctx)

        def hand(manager: dict[str, Any] = manager, worker: dict[str, Any] = worker) -> None:
            hand_create(manager, ctx.workload_name, ctx.origin)
            hand_sync(manager, worker)

        rates = measure({"engine": engine, "hand": hand}, args.seconds)
        assert manager == before, "the engine must not modify its input"
        ratio = rates["hand"] / rates["engine"]
        print(
            f"{name:8s} engine {rates['engine']:9.0f} objects/s   hand-written {rates['hand']:9.0f} objects/s"
            f"   ratio {ratio:5.2f}x (goal <= 3x)"
        )


if __name__ == "__main__":
    main()
