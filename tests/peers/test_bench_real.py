"""``bench/sidecar.py --real`` runs end to end in a tiny configuration (so that it cannot rot): one job
per side, a few requests; every figure it reports is there and positive. And how it reads its goal."""

from __future__ import annotations

import importlib
import json
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from mkpolicy.testing.peers.fixtures import require_peers

ROOT = Path(__file__).resolve().parents[2]


def bench_module(name: str) -> Any:
    """A module of bench/ (which imports its neighbours by name)."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(ROOT / "bench"))


@pytest.mark.real_peers
@pytest.mark.timeout(600)
def test_real_peer_bench_runs_tiny(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    require_peers()
    samples = tmp_path / "samples.jsonl"
    argv = [sys.executable, str(ROOT / "bench" / "sidecar.py"), "--real", "--jobs", "1", "--requests", "10",
            "--rounds", "1", "--posts", "2", "--json", "--samples", str(samples)]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=540, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    r = json.loads(proc.stdout)
    for measure in ("pt", "tr", "post"):
        for side in ("direct", "go", "mkpolicy"):
            assert r[f"{measure}_{side}"]["p50"] > 0 and r[f"{measure}_{side}"]["p99"] > 0
    for key in ("dispatch", "dispatch_from_reserved", "status"):
        for side in ("direct", "goproxy", "sidecar"):  # one manager Kueue, a worker per route
            assert r[f"{key}_{side}"]["p50"] > 0
    # real Kueue drove the job through the sidecar: its reconciles counted, its requests answered, among
    # them the policy's create and its transformed reads
    assert r["reconciles"] > 0 and r["sidecar_requests"] == sum(r["mix_per_job"].values())
    assert (
        r["mix_per_job"]["create 201 tekton-pipelinerun"] == 1 and r["mix_per_job"]["get 200 tekton-pipelinerun"] >= 1
    )
    assert r["cpu_per_reconcile_ms"] > 0 and r["workers_per_core"] > 0 and r["cpu_pt_ms"] > 0
    assert r["goproxy_cpu_per_reconcile_ms"] >= 0  # (one job: 0 where only /proc's 10 ms ticks are counted)
    # the table a user reads renders from these figures
    bench_module("sidecar_real").report(r)
    table = capsys.readouterr().out
    for row in ("pass-through GET p50", "transformed POST p99", "dispatch: admitted -> copy created mean",
                "status: worker -> manager written mean", "per reconcile", "the Go proxy's CPU per reconcile",
                "Kueue's requests through the sidecar per job", "workers per sidecar core"):  # fmt: skip
        assert row in table
    # each job's figures were written as it ended; pooled, they are the run's own
    lines = [json.loads(line) for line in samples.read_text().splitlines()]
    assert sorted(line["route"] for line in lines) == ["direct", "goproxy", "sidecar"]
    pooled = bench_module("sidecar_real").pool([samples])
    for key in ("dispatch", "dispatch_from_reserved", "status"):
        for side in ("direct", "goproxy", "sidecar"):
            assert pooled[f"{key}_{side}"]["samples"] == r[f"{key}_{side}"]["samples"]


def _sample_lines(route: str, status_ms: list[float]) -> list[str]:
    return [json.dumps({"route": route, "job": j, "dispatch": 1000.0, "dispatch_from_reserved": 1010.0,
                        "status": ms}) for j, ms in enumerate(status_ms)]  # fmt: skip


def test_pooled_samples_are_read_on_the_pooled_interval(tmp_path: Path) -> None:
    """``--pool``: the --samples files of several runs taken together (every line of each), the goals read
    on the pooled interval and printed as the run's own table."""
    runs = []
    for n in range(2):
        lines = [*_sample_lines("direct", [20.0, 21.0, 22.0] * 20), *_sample_lines("goproxy", [20.5, 21.5] * 30),
                 *_sample_lines("sidecar", [20.0, 21.0, 23.0] * 20)]  # fmt: skip
        runs.append(tmp_path / f"run{n}.jsonl")
        runs[-1].write_text("\n".join(lines) + "\n")
    argv = [sys.executable, str(ROOT / "bench" / "sidecar.py"), "--real", "--pool", *map(str, runs)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert f"pooled from {runs[0]}, {runs[1]}" in proc.stdout
    assert "Kueue end to end, 120 jobs per route" in proc.stdout
    status = next(line for line in proc.stdout.splitlines() if line.startswith("status: worker -> manager written p50"))
    assert "<= 1.10x  ok" in status
    pooled = bench_module("sidecar_real").pool(runs)
    assert len(pooled["status_sidecar"]["samples"]) == 120 and pooled["status_sidecar_ratio"]["p50"] == 1.0


@pytest.mark.parametrize(("content", "message"), [
    ('{"route": "direct", "job": 0, "dispatch": 1.0, "dispatch_from_reserved": 1.0}\n',
     "{path}:1: expected a --samples line, a JSON object with route (direct, goproxy, sidecar) and dispatch, "
     "dispatch_from_reserved, status in ms; found"),
    ("\n".join(_sample_lines("direct", [1.0])) + "\nnot json\n", "{path}:2: expected a --samples line"),
    ('{"route": "elsewhere", "dispatch": 1, "dispatch_from_reserved": 1, "status": 1}\n',
     "{path}:1: expected a --samples line"),
    ("\n".join(_sample_lines("direct", [1.0])) + "\n", "no samples of the goproxy, sidecar route in {path}"),
    (None, "{path}: cannot be read ("),
], ids=["missing-figure", "not-json", "unknown-route", "routes-missing", "no-file"])  # fmt: skip
def test_pool_refuses_what_is_not_samples(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "run.jsonl"
    if content is not None:
        path.write_text(content)
    argv = [sys.executable, str(ROOT / "bench" / "sidecar.py"), "--real", "--pool", str(path)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2 and "--pool: " + message.format(path=path) in proc.stderr, proc.stderr


@pytest.mark.real_peers
@pytest.mark.timeout(600)
def test_real_peer_bench_against_another_version_runs_tiny(capsys: pytest.CaptureFixture[str]) -> None:
    """``--real --against SRC``: this checkout's sidecar against SRC's (here the same checkout), every kind."""
    require_peers()
    argv = [sys.executable, str(ROOT / "bench" / "sidecar.py"), "--real", "--against", str(ROOT), "--requests", "5",
            "--json"]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=540, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    r = json.loads(proc.stdout)
    kinds = ("workload_get", "missing_get", "metadata_get", "transformed_get", "create_delete",
             "transformed_create_delete")  # fmt: skip
    for kind in kinds:
        assert r[kind]["this"] >= 0 and r[kind]["other"] >= 0, kind
    assert r["against"] == str(ROOT) and r["requests"] == 5
    bench_module("sidecar_versus").report(r)
    table = capsys.readouterr().out
    assert all(kind in table for kind in kinds)


@pytest.mark.parametrize(("sidecar", "verdict"), [
    ([20.0, 21.0, 22.0] * 20, "ok"),  # the same as direct, tight: the whole interval within 1.10x
    ([30.0, 31.0, 32.0] * 20, "MISSED"),  # +50%, tight: none of it within
    ([5.0, 21.0, 60.0] * 10, "unresolved: more --jobs"),  # the same median, spread wide, fewer jobs
], ids=["same", "slower", "spread"])  # fmt: skip
def test_the_latency_goal_is_read_on_the_interval(sidecar: list[float], verdict: str) -> None:
    real = bench_module("sidecar_real")
    direct = [20.0, 21.0, 22.0] * 20
    ratio, low, high = real.median_ratio(sidecar, direct)
    assert low <= ratio <= high
    assert real.verdict(low, high) == verdict
    assert real.median_ratio(sidecar, direct) == (ratio, low, high)  # seeded: the same samples, the same interval


@pytest.mark.real_peers
@pytest.mark.timeout(600)
def test_real_peer_capacity_bench_runs_tiny(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """``--real --capacity N --floor``: N workers' load through the sidecar, the Go proxy and the floor relay;
    every request answered as Kueue expects (the bench fails on any other answer), the figures there and
    positive."""
    require_peers()
    argv = [sys.executable, str(ROOT / "bench" / "sidecar.py"), "--real", "--capacity", "2", "--seconds", "2",
            "--rounds", "1", "--floor", "--json"]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=540, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    r = json.loads(proc.stdout)
    assert r["workers"] == 2 and r["offered"] == 30 and r["python"] == platform.python_version()
    assert r["cpu"] == bench_module("sidecar_capacity").cpu_model() and r["cpu"]
    for side in ("sidecar", "goproxy", "floor"):
        (window,) = r[side]["rounds"]
        assert window["requests"] > 0 and window["errors"] == 0 and window["watch_events"] > 0, side
        # Kueue's reads of every kind were sent and answered within the window (its writes may fall outside it)
        assert set(window["by_kind_p50_ms"]) >= {"workload GET", "metadata GET", "transformed GET", "GET 404"}
        assert r[side]["cpu_per_request_ms"] > 0 and r[side]["workers_per_core"] > 0
        # one round: the interval over the rounds is that round's figure
        (figure,) = r[side]["workers_per_core_by_round"]
        assert r[side]["workers_per_core_interval"] == pytest.approx([figure, figure])
    bench_module("sidecar_capacity").report(r)
    table = capsys.readouterr().out
    assert "one sidecar core serves" in table and "95% interval over the rounds" in table and "the Go proxy" in table
    assert "sidecar workers per core, round by round" in table and "floor workers per core" in table
    assert "the floor relay (two TLS legs, bytes copied, nothing parsed)" in table
    # its --json output pools (--pool-capacity): twice the same run is that run's figures over twice the rounds
    output = tmp_path / "capacity.json"
    output.write_text(proc.stdout)
    pooled = bench_module("sidecar_capacity").pool([output, output])
    assert pooled["rounds"] == 2
    for side in ("sidecar", "goproxy", "floor"):
        for key in ("cpu_per_request_ms", "net_cpu_per_request_ms", "workers_per_core", "idle_ms_per_s"):
            assert pooled[side][key] == pytest.approx(r[side][key]), (side, key)


def test_the_capacity_load_is_kueues_mix() -> None:
    """A simulated worker's job is the mix the ``--real`` run counts through the sidecar's ``/metrics`` (21-22
    requests, a fifth of them transformed), creations before the reads and deletions after them."""
    capacity = bench_module("sidecar_capacity")
    jobs = [capacity.job("ns1", j) for j in range(2)]
    assert capacity.PER_JOB == 21.5
    for calls in jobs:
        transformed = [c for c in calls if c.kind.startswith("transformed")]
        assert 0.18 <= len(transformed) / len(calls) <= 0.25
        assert [c.method for c in calls[:3]] == ["GET", "POST", "POST"] and calls[0].expect == 404
        assert [c.method for c in calls[-2:]] == ["DELETE", "DELETE"]
        assert all("/namespaces/ns1/" in c.path for c in calls)
        assert {c.client for c in calls} == {0, 1, 2}  # Workloads, the job kind, metadata-only reads
    assert capacity.job("ns1", 0) == jobs[0]  # seeded: the same order every run


def _rounds(ms_per_request: list[float]) -> list[dict[str, float]]:
    """Rounds of 3,000 requests costing the sidecar these CPU ms each."""
    return [{"requests": 3000, "cpu_s": 3000 * ms / 1000} for ms in ms_per_request]


@pytest.mark.parametrize(("ms", "verdict"), [
    ([0.50, 0.51, 0.52, 0.50, 0.51, 0.52], "ok"),  # 128-133 workers per core, tight
    ([0.80, 0.81, 0.82, 0.80, 0.81, 0.82], "MISSED"),  # 81-83, tight
    ([0.50, 0.80, 0.55, 0.75], "unresolved: more --rounds"),  # 83-133: the interval spans 100
], ids=["above", "below", "spread"])  # fmt: skip
def test_the_capacity_goal_is_read_on_the_interval_over_rounds(ms: list[float], verdict: str) -> None:
    capacity = bench_module("sidecar_capacity")
    low, high = capacity.workers_interval(_rounds(ms))
    figures = [1000 / (capacity.RATE * m) for m in ms]
    assert min(figures) <= low <= high <= max(figures)
    assert capacity.goal_verdict(low, high) == verdict
    assert capacity.workers_interval(_rounds(ms)) == (low, high)  # seeded: the same rounds, the same interval


def _capacity_output(
    ms: dict[str, list[float]], workers: int = 20, python: str = "3.11.7", cpu: str = "AMD EPYC"
) -> dict[str, Any]:
    """A ``--capacity --json`` output whose rounds cost each side these CPU ms a request (30 s, 9,000 requests)."""
    def side(costs: list[float]) -> dict[str, Any]:
        rounds = [{"requests": 9000, "cpu_s": 9000 * m / 1000, "window_s": 30.0, "p50_ms": 4.0, "p99_ms": 90.0,
                   "by_kind_p50_ms": {"workload GET": 3.0}} for m in costs]  # fmt: skip
        return {"rounds": rounds, "idle_ms_per_s": 5.0}

    return {"kueue": "v0.19.2", "workers": workers, "seconds": 30.0, "rounds": len(ms["sidecar"]), "cpus": 2,
            "loadavg": 2.0, "python": python, "cpu": cpu, **{name: side(costs) for name, costs in ms.items()}}  # fmt: skip


def test_capacity_runs_pool_into_one_table(tmp_path: Path) -> None:
    """``--pool-capacity``: the rounds of several --capacity --json outputs as one run's, the goal read on the
    pooled interval: two runs at 0.60 and 0.70 ms a request pool to 0.65 ms, 103 workers per core."""
    runs = [tmp_path / "run1.json", tmp_path / "run2.json"]
    runs[0].write_text(json.dumps(_capacity_output({"sidecar": [0.60] * 4, "goproxy": [0.50] * 4})))
    runs[1].write_text(json.dumps(_capacity_output({"sidecar": [0.70] * 4, "goproxy": [0.50] * 4})))
    argv = [sys.executable, str(ROOT / "bench" / "sidecar.py"), "--real", "--pool-capacity", *map(str, runs)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert f"pooled from {runs[0]}, {runs[1]}" in proc.stdout
    assert "8 rounds of 30s a side, alternating; Kueue v0.19.2; the sidecar on Python 3.11.7; CPU: AMD EPYC" in (
        proc.stdout
    )
    assert "one sidecar core serves 1000 / (0.650 ms x 15/s) = 103 workers" in proc.stdout
    assert "the Go proxy 133; sidecar/Go CPU per request 1.30x" in proc.stdout
    pooled = bench_module("sidecar_capacity").pool(runs)
    low, high = pooled["sidecar"]["workers_per_core_interval"]
    assert 1000 / (15 * 0.70) <= low < 100 < high <= 1000 / (15 * 0.60)  # each run's rounds in the resamples
    assert "floor" not in pooled and "the floor relay" not in proc.stdout  # (neither run measured it)


def test_the_floor_pools_when_every_run_measured_it(tmp_path: Path) -> None:
    """``--floor`` adds a third side; pooled runs keep it when each of them has it, and leave it out otherwise
    (what the goal is read on, the sidecar and the Go proxy, pools either way)."""
    capacity = bench_module("sidecar_capacity")
    with_floor = _capacity_output({"sidecar": [0.60] * 2, "goproxy": [0.50] * 2, "floor": [0.30] * 2})
    without = _capacity_output({"sidecar": [0.70] * 2, "goproxy": [0.50] * 2})
    paths = {name: tmp_path / f"{name}.json" for name in ("a", "b", "c")}
    for name, output in zip(paths, (with_floor, with_floor, without), strict=True):
        paths[name].write_text(json.dumps(output))
    both = capacity.pool([paths["a"], paths["b"]])
    assert capacity.sides(both) == ["sidecar", "goproxy", "floor"]
    assert both["floor"]["cpu_per_request_ms"] == pytest.approx(0.30)
    mixed = capacity.pool([paths["a"], paths["c"]])
    assert capacity.sides(mixed) == ["sidecar", "goproxy"]
    assert mixed["sidecar"]["cpu_per_request_ms"] == pytest.approx(0.65)


@pytest.mark.parametrize(("first", "second", "message"), [
    ("not json", None, "{first}:1:1: expected a --capacity --json output; found invalid JSON"),
    ('{"route": "direct"}\n{"route": "sidecar"}\n', None, "{first}:2:1: expected a --capacity --json output"),
    ('{"workers": 20}', None, "{first}: expected a --capacity --json output (kueue, workers, seconds, and the rounds"),
    (None, None, "{first}: cannot be read ("),
    ("run", "other-workers", "{second}: workers 10, where {first} has 20: rounds of different loads do not pool"),
    ("run", "other-python", "{second}: Python 3.13.0, where an earlier file has 3.11.7: the sidecar's CPU is the "
                            "interpreter's; rounds of different interpreters do not pool"),
    ("run", "other-cpu", "{second}: CPU Intel Xeon, where an earlier file has AMD EPYC: the figures are the "
                         "processor's; rounds of different processors do not pool"),
], ids=["not-json", "samples-file", "not-capacity", "no-file", "other-load", "other-python", "other-cpu"])  # fmt: skip
def test_pool_capacity_refuses_what_does_not_pool(
    tmp_path: Path, first: str | None, second: str | None, message: str
) -> None:
    outputs = {"run": _capacity_output({"sidecar": [0.6], "goproxy": [0.5]}),
               "other-workers": _capacity_output({"sidecar": [0.6], "goproxy": [0.5]}, workers=10),
               "other-python": _capacity_output({"sidecar": [0.6], "goproxy": [0.5]}, python="3.13.0"),
               "other-cpu": _capacity_output({"sidecar": [0.6], "goproxy": [0.5]}, cpu="Intel Xeon")}  # fmt: skip
    paths = [tmp_path / "first.json", tmp_path / "second.json"]
    for path, content in zip(paths, (first, second), strict=True):
        if content is not None:
            path.write_text(json.dumps(outputs[content]) if content in outputs else content)
    argv = [sys.executable, str(ROOT / "bench" / "sidecar.py"), "--real", "--pool-capacity", str(paths[0])]
    argv += [str(paths[1])] if second is not None else []
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    expected = "--pool-capacity: " + message.format(first=paths[0], second=paths[1])
    assert proc.returncode == 2 and expected in proc.stderr, proc.stderr


@pytest.mark.parametrize(("argv", "message"), [
    (["--capacity", "0"], "--capacity: expected 1 worker or more, got 0"),
    (["--capacity", "2", "--seconds", "0"], "--seconds: expected a positive number of seconds with --capacity N, got 0"),
    (["--seconds", "5"], "got 5 without --capacity"),
    (["--capacity", "2", "--rounds", "0"], "--rounds: expected 1 or more, got 0"),
    (["--jobs", "0"], "--jobs: expected 1 or more, got 0"),
    (["--requests", "-1"], "--requests: expected 1 or more, got -1"),
    (["--posts", "0"], "--posts: expected 1 or more, got 0"),
    (["--capacity", "2", "--samples", "x.jsonl"], "--samples: the end-to-end run's figures; --capacity and"),
    (["--pool", "a.jsonl", "--pool-capacity", "b.json"], "--pool and --pool-capacity: one at a time"),
    (["--floor"], "--floor: a third side of the --capacity N load; give --capacity N"),
], ids=["no-workers", "no-seconds", "seconds-alone", "no-rounds", "no-jobs", "no-requests", "no-posts",
        "samples-of-capacity", "two-pools", "floor-alone"])  # fmt: skip
def test_options_are_checked_before_anything_starts(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        bench_module("sidecar_real").main(["--real", *argv])
    assert exc.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.real_peers
@pytest.mark.timeout(120)
def test_the_bench_watch_resumes_when_the_server_ends_it(real_kube: Any) -> None:
    """A ``--real`` run is longer than a watch's ``timeoutSeconds`` (an hour): the bench's watch is resumed
    from the last resourceVersion, and an event after the server ended it is still seen. (A 1,000-job run
    failed at its 58th minute without this.) It starts from the list's resourceVersion: what was there
    before is no event, and a watch ended before its first event resumes from there too."""
    real = bench_module("sidecar_real")
    ns = "bench-watch-resume"
    real_kube.admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    real_kube.admin.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "old", "namespace": ns}})
    tls = real_kube.plane.admin_tls()
    watch = real.Watch(real_kube.url, tls, f"/api/v1/namespaces/{ns}/configmaps", server_timeout=1)
    time.sleep(3)  # ended by the server before any event, and resumed

    def named(name: str) -> Any:
        return lambda kind, obj: kind == "ADDED" and obj["metadata"]["name"] == name

    for name in ("before", "after"):
        real_kube.admin.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}})
        assert watch.seen(named(name), f"ConfigMap {name}") > 0
        time.sleep(3)  # the server ends the watch after 1 s; the bench resumes it
    assert watch.ended is None and watch.opened >= 3
    assert [(e[1], e[2]["metadata"]["name"]) for e in watch.events] == [("ADDED", "before"), ("ADDED", "after")]
