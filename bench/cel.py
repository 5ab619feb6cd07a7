"""CEL evaluation speed: mkpolicy vs. cel-python, cel-expr-python and hand-written Python.

A corpus of Kubernetes-style expressions (field access, has(), optional chains,
map/filter/all over lists of 100 items, string functions, JSONPatch construction) is
evaluated on realistic objects, side by side in one process:

* mkpolicy: ``Program.evaluate`` on the plain JSON objects, the way the engine uses
  it (bindings and results are plain Python values already; JSON needs no conversion);
* cel-python: its stock ``InterpretedRunner``, the objects converted with
  ``celpy.json_to_cel`` on every evaluation (they change between evaluations);
* cel-expr-python: Google's C++ runtime, with its value conversion (``eval(data=...)``
  and ``plain_value()``);
* hand-written Python computing the same result.

Every implementation's result is checked against the hand-written one before timing.
Expressions an implementation cannot run (cel-python has no optional syntax, neither
knows ``JSONPatch{...}``) are shown as n/a. Rounds are interleaved and the best of
each is kept (the machines are shared and noisy). Goals: mkpolicy >= 10x cel-python,
at least as fast as cel-expr-python, within 5x of hand-written (geometric means).

    python bench/cel.py [--seconds 0.2] [--rounds 5] [--only NAME]
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mkpolicy.cel import Environment, Program
from mkpolicy.cel.values import ObjectValue

VARIABLES = ["object", "managerObject", "workerObject", "params"]


def pipeline_run(tasks: int = 100) -> dict[str, Any]:
    """A Tekton-PipelineRun-like object with ``tasks`` pipeline tasks."""
    return {
        "apiVersion": "tekton.dev/v1",
        "kind": "PipelineRun",
        "metadata": {
            "name": "Build-And-Deploy-7f9c",
            "namespace": "team-a",
            "uid": "4c1d3a9e-0b8e-4a5b-9a57-6b7d1f0c2e11",
            "labels": {"app": "train", "kueue.x-k8s.io/queue-name": "user-queue", "tekton.dev/pipeline": "build"},
            "annotations": {"kueue.x-k8s.io/workload": "team-a/pipelinerun-build-7f9c", "owner": "alice"},
        },
        "spec": {
            "managedBy": "kueue.x-k8s.io/multikueue",
            "timeouts": {"pipeline": "1h0m0s", "tasks": "45m0s"},
            "taskRunTemplate": {"serviceAccountName": "builder", "podTemplate": {"nodeSelector": {"pool": "gpu"}}},
            "params": [{"name": "revision", "value": "main"}, {"name": "image", "value": "registry/app:1.2.3"}],
            "pipelineSpec": {
                "tasks": [
                    {
                        "name": f"{'build' if i % 3 == 0 else 'test'}-{i}",
                        "taskRef": {"name": "buildah" if i % 3 == 0 else "pytest", "kind": "Task"},
                        "params": [
                            {"name": "image", "value": f"registry/app-{i}:1.2.3"},
                            {"name": "context", "value": f"./svc/{i}"},
                            {"name": "retries", "value": str(i % 4)},
                        ],
                        "runAfter": [f"test-{i - 1}"] if i else [],
                        "timeout": "10m0s",
                    }
                    for i in range(tasks)
                ]
            },
        },
    }


def worker_run(tasks: int = 100) -> dict[str, Any]:
    """The worker's copy, with a status of ``tasks`` child references."""
    obj = pipeline_run(tasks)
    obj["status"] = {
        "startTime": "2026-11-21T06:00:00Z",
        "conditions": [
            {"type": "Succeeded", "status": "Unknown", "reason": "Running", "message": "Tasks Completed: 40"},
            {"type": "Ready", "status": "True", "reason": "Ready", "message": ""},
        ],
        "childReferences": [
            {
                "name": f"run-{i}",
                "pipelineTaskName": f"task-{i}",
                "kind": "TaskRun",
                "status": "Succeeded" if i % 5 else "Failed",
            }
            for i in range(tasks)
        ],
    }
    return obj


@dataclass
class Case:
    name: str
    expression: str
    hand: Callable[[dict[str, Any]], Any]
    #: Which of the other engines can run it.
    celpy: bool = True
    cel_expr: bool = True


def _tasks(b: dict[str, Any]) -> list[dict[str, Any]]:
    return b["object"]["spec"]["pipelineSpec"]["tasks"]  # type: ignore[no-any-return]


_NAME_RE = re.compile(r"^[a-z0-9-]+$")

CASES: list[Case] = [
    Case("field", "object.metadata.name", lambda b: b["object"]["metadata"]["name"]),
    Case(
        "label-and",
        "object.metadata.labels['app'] == 'train' && object.spec.managedBy == 'kueue.x-k8s.io/multikueue'",
        lambda b: (
            b["object"]["metadata"]["labels"]["app"] == "train"
            and b["object"]["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
        ),
    ),
    Case(
        "has",
        "has(object.spec.timeouts) && !has(object.spec.status) && has(object.metadata.annotations)",
        lambda b: (
            "timeouts" in b["object"]["spec"]
            and "status" not in b["object"]["spec"]
            and "annotations" in b["object"]["metadata"]
        ),
    ),
    Case(
        "optional-chain",
        "object.spec.?taskRunTemplate.?serviceAccountName.orValue('default')",
        lambda b: (b["object"]["spec"].get("taskRunTemplate") or {}).get("serviceAccountName", "default"),
        celpy=False,
    ),
    Case(
        "ternary-default",
        "has(object.spec.taskRunTemplate) && has(object.spec.taskRunTemplate.serviceAccountName)"
        " ? object.spec.taskRunTemplate.serviceAccountName : 'default'",
        lambda b: (b["object"]["spec"].get("taskRunTemplate") or {}).get("serviceAccountName", "default"),
    ),
    Case(
        "map-100",
        "object.spec.pipelineSpec.tasks.map(t, t.name)",
        lambda b: [t["name"] for t in _tasks(b)],
    ),
    Case(
        "filter-100",
        "object.spec.pipelineSpec.tasks.filter(t, t.taskRef.name == 'buildah').size()",
        lambda b: len([t for t in _tasks(b) if t["taskRef"]["name"] == "buildah"]),
    ),
    Case(
        "all-nested-100",
        "object.spec.pipelineSpec.tasks.all(t, t.params.exists(p, "
        "p.name == 'image' && p.value.startsWith('registry/')))",
        lambda b: all(
            any(p["name"] == "image" and p["value"].startswith("registry/") for p in t["params"]) for t in _tasks(b)
        ),
    ),
    Case(
        "map-build-100",
        "object.spec.pipelineSpec.tasks.map(t, "
        "{'name': t.name, 'params': size(t.params), 'first': size(t.runAfter) == 0})",
        lambda b: [
            {"name": t["name"], "params": len(t["params"]), "first": len(t["runAfter"]) == 0} for t in _tasks(b)
        ],
    ),
    Case(
        "regex-100",
        "object.spec.pipelineSpec.tasks.all(t, t.name.matches('^[a-z0-9-]+$'))",
        lambda b: all(_NAME_RE.search(t["name"]) is not None for t in _tasks(b)),
    ),
    Case(
        "strings",
        "object.metadata.name.lowerAscii().replace('-', '_') + '@' "
        "+ object.metadata.annotations['kueue.x-k8s.io/workload'].split('/')[1]",
        lambda b: (
            b["object"]["metadata"]["name"].lower().replace("-", "_")
            + "@"
            + b["object"]["metadata"]["annotations"]["kueue.x-k8s.io/workload"].split("/")[1]
        ),
        celpy=False,  # cel-python has no strings extension
    ),
    Case(
        "status-copy",
        "workerObject.status.conditions.filter(c, c.type == 'Succeeded').map(c, c.status + ':' + c.reason)",
        lambda b: [
            c["status"] + ":" + c["reason"]
            for c in b["workerObject"]["status"]["conditions"]
            if c["type"] == "Succeeded"
        ],
    ),
    Case(
        "status-count-100",
        "workerObject.status.childReferences.filter(r, r.status == 'Failed').map(r, r.pipelineTaskName)",
        lambda b: [
            r["pipelineTaskName"] for r in b["workerObject"]["status"]["childReferences"] if r["status"] == "Failed"
        ],
    ),
    Case(
        "jsonpatch",
        "has(object.spec.timeouts) ? [JSONPatch{op: 'remove', path: '/spec/timeouts'}, JSONPatch{op: 'add', "
        "path: '/metadata/labels/' + jsonpatch.escapeKey('kueue.x-k8s.io/origin'), value: 'mk'}] : []",
        lambda b: (
            [
                {"op": "remove", "path": "/spec/timeouts"},
                {"op": "add", "path": "/metadata/labels/" + "kueue.x-k8s.io~1origin", "value": "mk"},
            ]
            if "timeouts" in b["object"]["spec"]
            else []
        ),
        celpy=False,
        cel_expr=False,
    ),
]


def bindings() -> dict[str, Any]:
    run = pipeline_run()
    return {"object": run, "managerObject": run, "workerObject": worker_run(), "params": {}}


# -- the four implementations ---------------------------------------------------------------


def mkpolicy_fn(case: Case) -> Callable[[dict[str, Any]], Any]:
    program = Program(case.expression, Environment.of(VARIABLES))

    return program.evaluate


def celpy_fn(case: Case) -> Callable[[dict[str, Any]], Any] | None:
    if not case.celpy:
        return None
    import celpy

    env = celpy.Environment()
    program = env.program(env.compile(case.expression))

    def run(b: dict[str, Any]) -> Any:
        activation = {k: celpy.json_to_cel(v) for k, v in b.items()}
        return _plain_celpy(program.evaluate(activation))

    return run


def _plain_celpy(value: Any) -> Any:
    import celpy

    if isinstance(value, celpy.celtypes.BoolType):
        return bool(value)
    if isinstance(value, celpy.celtypes.IntType):
        return int(value)
    if isinstance(value, celpy.celtypes.StringType):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_plain_celpy(v) for v in value]
    if isinstance(value, dict):
        return {_plain_celpy(k): _plain_celpy(v) for k, v in value.items()}
    return value


def cel_expr_fn(case: Case) -> Callable[[dict[str, Any]], Any] | None:
    if not case.cel_expr:
        return None
    try:
        from cel_expr_python import cel
        from cel_expr_python.ext import ext_optional, ext_strings
    except ImportError:
        return None
    env = cel.NewEnv(
        variables={name: cel.Type.DYN for name in VARIABLES},
        extensions=[ext_optional.ExtOptional(), ext_strings.ExtStrings()],
    )
    try:
        expression = env.compile(case.expression)
    except Exception:
        return None

    def run(b: dict[str, Any]) -> Any:
        return expression.eval(data=b).plain_value()

    return run


def _plain(value: Any) -> Any:
    if type(value) is ObjectValue or isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


# -- timing ------------------------------------------------------------------------------------


def per_call(fn: Callable[[dict[str, Any]], Any], b: dict[str, Any], seconds: float) -> float:
    """Seconds per call over about ``seconds`` of wall time."""
    n = 1
    while True:
        start = time.perf_counter()
        for _ in range(n):
            fn(b)
        elapsed = time.perf_counter() - start
        if elapsed >= seconds or n >= 1 << 20:
            return elapsed / n
        n = max(n * 2, int(n * seconds / max(elapsed, 1e-9)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=0.15, help="time per measurement (default 0.15)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds, best kept (default 3)")
    parser.add_argument("--only", help="run only the cases whose name contains this")
    args = parser.parse_args(argv)

    b = bindings()
    names = ["mkpolicy", "cel-python", "cel-expr-python", "hand-written"]
    rows: list[tuple[str, dict[str, float | None]]] = []
    for case in CASES:
        if args.only and args.only not in case.name:
            continue
        fns: dict[str, Callable[[dict[str, Any]], Any] | None] = {
            "mkpolicy": mkpolicy_fn(case),
            "cel-python": celpy_fn(case),
            "cel-expr-python": cel_expr_fn(case),
            "hand-written": case.hand,
        }
        want = _plain(case.hand(b))
        for name, fn in fns.items():
            if fn is None:
                continue
            got = _plain(fn(b))
            if got != want:
                print(f"{case.name}: {name} computed {got!r:.200}, expected {want!r:.200}", file=sys.stderr)
                return 1
        best: dict[str, float | None] = {name: None for name in names}
        for _ in range(args.rounds):
            for name in names:
                fn = fns[name]
                if fn is None:
                    continue
                t = per_call(fn, b, args.seconds)
                prev = best[name]
                best[name] = t if prev is None else min(prev, t)
        rows.append((case.name, best))

    def fmt(t: float | None) -> str:
        return "n/a" if t is None else f"{t * 1e6:,.1f}"

    print(
        f"{'expression':<18}"
        + "".join(f"{n + ' (us)':>22}" for n in names)
        + f"{'vs cel-py':>11}{'vs cel-expr':>12}{'vs hand':>9}"
    )
    ratios: dict[str, list[float]] = {"cel-python": [], "cel-expr-python": [], "hand-written": []}
    for name, best in rows:
        mine = best["mkpolicy"]
        assert mine is not None
        cells = []
        for other in ("cel-python", "cel-expr-python", "hand-written"):
            theirs = best[other]
            if theirs is None:
                cells.append("n/a")
                continue
            ratio = theirs / mine if other != "hand-written" else mine / theirs
            ratios[other].append(ratio)
            cells.append(f"{ratio:.1f}x")
        print(
            f"{name:<18}" + "".join(f"{fmt(best[n]):>22}" for n in names) + f"{cells[0]:>11}{cells[1]:>12}{cells[2]:>9}"
        )

    def geomean(values: list[float]) -> float:
        return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")

    print()
    print(f"geometric mean: mkpolicy is {geomean(ratios['cel-python']):.1f}x faster than cel-python (goal >= 10x),")
    if ratios["cel-expr-python"]:
        print(f"                {geomean(ratios['cel-expr-python']):.2f}x as fast as cel-expr-python (goal >= 1x),")
    else:
        print("                cel-expr-python not installed (pip install -e '.[bench]'),")
    print(f"                {geomean(ratios['hand-written']):.1f}x the time of hand-written Python (goal <= 5x).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
