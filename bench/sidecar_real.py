"""``bench/sidecar.py --real``: the sidecar against real peers, measured side by side in one run.

One MultiKueue on the peers built in the cache (``mkpolicy dev build-peers``): one manager
Kueue and three workers, each reached by its own route: worker1 directly, worker2 through the
Go proxy below (its Secret rewired to it), worker3 through the sidecar. Each route has a
ClusterQueue of its own on the manager whose MultiKueue AdmissionCheck dispatches to that
worker only. Then:

* **the wire**, on the sidecar's worker: GETs and POSTs to the real worker
  kube-apiserver, request by request in rounds, *direct* (the worker's own credentials),
  through the **Go proxy** (``peers/goproxy``: ``httputil.ReverseProxy``, TLS on both legs,
  the bearer token swapped for the worker's credentials, the proxy a user would otherwise
  write) and through **mkpolicy**: a pass-through GET of a Workload (Kueue's), a
  transformed GET of a PipelineRun copy (its status rewritten by the Tekton policy from a
  live manager read) and the POST that creates a copy (the policy's ``create``); p50 is
  the best round's, p99 over all rounds;
* **Kueue end to end**, ``--jobs`` jobs on each route, in turn, from the one manager Kueue: the
  test plays the Tekton integration (the manager's Workload) and Tekton on the worker (status
  writes), everything else is real Kueue. Times are taken from watches the bench holds on
  the API servers (event arrival, monotonic clock): *dispatch*, the worker's Workload
  admitted -> the copy created on the worker (and from the manager's quota reservation);
  *status*, the worker's PipelineRun status written -> the manager's status written (once
  per job: a second write soon after waits for Kueue's batch period). The goals are on the
  medians: the mean moves with how many copies Kueue happened to create at once. The routes
  share the manager's Kueue, API server and etcd, so what differs is the route and the
  worker's own (identical) API server and Kueue; the Go proxy's column is what any proxy in
  between costs Kueue. (Before, each route had a MultiKueue of its own, and two of them
  differed by about 5 ms with nothing else different, more than the sidecar adds.
  Switching one MultiKueue's route instead, by pointing its MultiKueueCluster at another
  Secret, made Kueue v0.19.2 take ~190 ms for a status write-back whichever the route);
* **the sidecar's CPU** while Kueue drives the jobs: its process's CPU time over the
  Workload reconciles of the manager's MultiKueue controller for the sidecar's jobs
  (``Reconcile Workload`` lines of Kueue's log, V(2), in the sidecar route's namespace) and
  over the requests it answered (its ``/metrics``); the Go proxy's over its route's.

Workers per sidecar core at Kueue's client limits: Kueue builds each worker's client from
the kubeconfig alone (``multikueuecluster.go`` ``clientcmd.RESTConfigFromKubeConfig``:
QPS 0), so each REST client controller-runtime makes per kind gets client-go's default
token bucket, 5 QPS burst 10 (``client-go/rest/config.go`` ``RESTClientFor``;
``controller-runtime/pkg/client/client_rest_resources.go`` one client per kind). A worker's
traffic to the sidecar is at most 3 such clients (Workloads, the job kind, metadata-only
reads), 15 requests/s sustained: one core serves 1000 / (15 x CPU ms per request) workers.
This run's requests come at Kueue's pace for a few jobs, each waking an idle event loop, which
costs more than a request under load: ``--capacity N`` (``bench/sidecar_capacity.py``)
measures the goal as stated, N workers at those limits through one sidecar.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as _dt
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Self, TextIO

import yaml
from sidecar import ORIGIN, PREBUILT, Side, cpu_seconds, keep_round, manager_run, pct, timed, worker_status

from mkpolicy.testing.kueue.simulate import workload_name
from mkpolicy.testing.peers import build
from mkpolicy.testing.peers.goproxy import GoProxy
from mkpolicy.testing.peers.multikueue import (
    KUEUE_API,
    KUEUE_NAMESPACE,
    LOCAL_QUEUE,
    RealMultiKueue,
    ensure_metrics_cert,
)
from mkpolicy.testing.peers.processes import Process, free_port, wait_until
from mkpolicy.testing.peers.sidecar import READY_TIMEOUT, http_ok

ROOT = Path(__file__).resolve().parent.parent
#: Kueue's remote clients: client-go's default token bucket per REST client, and the clients a worker gets.
CLIENT_QPS, CLIENT_BURST, CLIENTS_PER_WORKER = 5, 10, 3
#: POSTs per side before the measured ones.
POST_WARMUP = 5
#: Kueue delays a reconcile a worker's watch event asks for by this much (constants.UpdatesBatchPeriod, used
#: as eventsBatchPeriod in admissionchecks/multikueue/workload.go): a copy is created at once when a
#: manager-side event reconciles the Workload after the worker admitted it, else about 1 s later.
BATCH_MS = 1000
#: At least this many requests for a CPU-per-request figure (/proc counts CPU time in 10 ms ticks).
CPU_REQUESTS = 200
#: Seconds the sidecar's idle CPU (no job running) is measured over; the idle rate is scaled to the whole
#: Kueue window (minutes). In /proc/<pid>/stat's 10 ms ticks 5 s left the net figures +-30% apart, and 15 s
#: was still one to three ticks: ``cpu_seconds`` counts nanoseconds where the kernel has them.
IDLE_S = 15.0
#: The worker of a MultiKueue of one (``multikueue_alone``).
WORKER = "worker1"
#: The routes of the end-to-end figures and the worker each reaches: Kueue talks to one directly, to one
#: through the Go proxy, to one through the sidecar.
ROUTES = {"direct": "worker1", "goproxy": "worker2", "sidecar": "worker3"}
SIDES = tuple(ROUTES)
TIMEOUT = 120.0
#: Kueue's end-to-end latencies with the sidecar: within +10% of direct (the median).
GOAL_RATIO = 1.10


def log(line: str) -> None:
    print(f"[bench] {line}", file=sys.stderr, flush=True)


# -- watches: when each event arrived ----------------------------------------------------------------------
class Watch:
    """A watch on one API server's collection in a thread; ``seen(pred)`` waits for an event matching
    ``pred`` and answers the monotonic time it arrived. The server ends a watch after its
    ``timeoutSeconds`` (``server_timeout``, an hour): it is resumed from the last resourceVersion seen
    (bookmarks keep that current), so a run longer than that misses no event. It starts from the
    collection's resourceVersion as a list answers it (list, then watch, as client-go's reflector does),
    so even a watch ended before its first event resumes where it was."""

    def __init__(self, url: str, tls: Any, path: str, server_timeout: int = 3600) -> None:
        self.url, self.tls, self.path, self.server_timeout = url, tls, path, server_timeout
        #: Times the watch was opened (resumed: more than once).
        self.opened = 0
        with self._get("limit=1", TIMEOUT) as listed:
            self.resource_version: str = json.load(listed)["metadata"]["resourceVersion"]
        self.response = self._open(self.resource_version)
        self.events: list[tuple[float, str, dict[str, Any]]] = []
        #: Why the watch ended for good (the server stopped, an ERROR event), or None.
        self.ended: str | None = None
        self.changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _open(self, resource_version: str) -> Any:
        query = f"watch=true&allowWatchBookmarks=true&timeoutSeconds={self.server_timeout}"
        response = self._get(f"{query}&resourceVersion={resource_version}", self.server_timeout + TIMEOUT)
        self.opened += 1
        return response

    def _get(self, query: str, timeout: float) -> Any:
        """The collection's answer to ``query`` (its headers in). 429 is retried: the server's watch cache
        for a new CRD may still be initializing."""
        request = urllib.request.Request(f"{self.url}{self.path}?{query}")
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                return urllib.request.urlopen(request, context=self.tls, timeout=timeout)
            except urllib.error.HTTPError as exc:
                if exc.code != 429 or time.monotonic() > deadline:
                    raise
                time.sleep(float(exc.headers.get("Retry-After") or 1))

    def _read(self) -> None:
        try:
            while True:
                for line in self.response:
                    event = json.loads(line)
                    if event["type"] == "ERROR":  # e.g. 410: the resourceVersion resumed from is gone
                        self._end(f"the watch failed: {event['object'].get('message')}")
                        return
                    self.resource_version = event["object"]["metadata"].get("resourceVersion") or self.resource_version
                    if event["type"] != "BOOKMARK":
                        with self.changed:
                            self.events.append((time.monotonic(), event["type"], event["object"]))
                            self.changed.notify_all()
                self.response = self._open(self.resource_version)  # the server ended it (timeoutSeconds): resume
        except Exception as exc:  # the server stopped at the end of the bench
            self._end(f"{type(exc).__name__}: {exc}")

    def _end(self, why: str) -> None:
        with self.changed:
            self.ended = why
            self.changed.notify_all()

    def seen(self, pred: Callable[[str, dict[str, Any]], bool], what: str, after: int = 0) -> float:
        """The arrival time of the first event (from index ``after``) matching ``pred``."""
        deadline = time.monotonic() + TIMEOUT
        with self.changed:
            while True:
                for at, kind, obj in self.events[after:]:
                    if pred(kind, obj):
                        return at
                if self.ended is not None:
                    raise SystemExit(f"bench: the watch on {self.path} ended ({self.ended}) before: {what}")
                if not self.changed.wait(max(0.0, deadline - time.monotonic())):
                    raise SystemExit(f"bench: no event within {TIMEOUT:.0f}s on {self.path}: {what}")


def median_ratio(a: list[float], b: list[float], resamples: int = 2000) -> tuple[float, float, float]:
    """``median(a) / median(b)`` and its 95% bootstrap interval (each side resampled with replacement;
    seeded, so the same samples give the same interval)."""
    rng = random.Random(0)
    ratios = [
        statistics.median(rng.choices(a, k=len(a))) / statistics.median(rng.choices(b, k=len(b)))
        for _ in range(resamples)
    ]
    return statistics.median(a) / statistics.median(b), *middle_95(ratios)


def middle_95(resampled: list[float]) -> tuple[float, float]:
    """The 95% percentile interval of bootstrap figures: their 2.5th and 97.5th percentiles."""
    ordered = sorted(resampled)
    return ordered[len(ordered) // 40], ordered[len(ordered) - 1 - len(ordered) // 40]


def verdict(low: float, high: float, goal: float = GOAL_RATIO) -> str:
    """A ratio's goal read on its 95% interval: met when all of it is within, missed when none is."""
    if high <= goal:
        return "ok"
    if low > goal:
        return "MISSED"
    return "unresolved: more --jobs"


def has_condition(obj: dict[str, Any], kind: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


class Jobs:
    """One route's namespace (its jobs queued to the route's ClusterQueue), its watches and the jobs run in it."""

    def __init__(self, mk: RealMultiKueue, route: str, sink: TextIO | None = None) -> None:
        self.mk = mk
        self.route = route
        self.worker = ROUTES[route]
        #: Where each job's figures are written as it ends (``--samples``), or None.
        self.sink = sink
        self.ns = mk.new_namespace(f"bench-e2e-{route}", manager_queue=route)
        tls = mk.plane.admin_tls()
        manager, worker = mk.manager.url, mk.workers[self.worker].url
        self.manager_wl = Watch(manager, tls, f"/apis/{KUEUE_API}/namespaces/{self.ns}/workloads")
        self.worker_wl = Watch(worker, tls, f"/apis/{KUEUE_API}/namespaces/{self.ns}/workloads")
        self.worker_pr = Watch(worker, tls, f"/apis/tekton.dev/v1/namespaces/{self.ns}/pipelineruns")
        self.manager_pr = Watch(manager, tls, f"/apis/tekton.dev/v1/namespaces/{self.ns}/pipelineruns")
        self.dispatch: list[float] = []
        self.dispatch_from_reserved: list[float] = []
        self.status: list[float] = []

    def run(self, i: int) -> None:
        """Submit job ``i``, time its dispatch and one status write-back, finish it."""
        name = f"job-{i:04d}"
        manager, worker = self.mk.manager.view(self.ns), self.mk.workers[self.worker].view(self.ns)
        obj = manager_run(i)
        obj["metadata"].update(namespace=self.ns, name=name)
        obj["metadata"].setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = LOCAL_QUEUE
        uid = manager.create(obj)["metadata"]["uid"]
        wl = workload_name("PipelineRun", name, uid, "tekton.dev")
        owner = {
            "apiVersion": "tekton.dev/v1",
            "kind": "PipelineRun",
            "name": name,
            "uid": uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
        pod = {
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
            }
        }
        manager.create(
            {
                "apiVersion": KUEUE_API,
                "kind": "Workload",
                "metadata": {"name": wl, "namespace": self.ns, "ownerReferences": [owner]},
                "spec": {"queueName": LOCAL_QUEUE, "podSets": [{"name": "main", "count": 1, "template": pod}]},
            }
        )

        def named(n: str, cond: str | None = None) -> Callable[[str, dict[str, Any]], bool]:
            return lambda kind, o: o["metadata"]["name"] == n and (cond is None or has_condition(o, cond))

        reserved = self.manager_wl.seen(named(wl, "QuotaReserved"), f"{wl} reserved on the manager")
        admitted = self.worker_wl.seen(named(wl, "QuotaReserved"), f"{wl} admitted on {self.worker}")
        created = self.worker_pr.seen(
            lambda kind, o: kind == "ADDED" and o["metadata"]["name"] == name, f"the copy of {name} on {self.worker}"
        )
        self.dispatch.append(created - admitted)
        self.dispatch_from_reserved.append(created - reserved)
        self.manager_wl.seen(named(wl, "Admitted"), f"{wl} admitted on the manager")
        self.status.append(self._status_written_back(i, name, worker))
        now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        finished = {
            "type": "Finished",
            "status": "True",
            "reason": "Succeeded",
            "message": "done",
            "lastTransitionTime": now,
        }
        worker.patch(
            KUEUE_API,
            "Workload",
            wl,
            [{"op": "add", "path": "/status/conditions/-", "value": finished}],
            namespace=self.ns,
            patch_type="json",
            subresource="status",
        )
        self.manager_wl.seen(named(wl, "Finished"), f"{wl} finished on the manager")
        if self.sink is not None:  # written as taken: a run that fails later keeps them
            sample = {key: round(getattr(self, key)[-1] * 1000, 1) for key in SAMPLED}
            self.sink.write(json.dumps({"route": self.route, "job": i, **sample}) + "\n")
            self.sink.flush()

    def _status_written_back(self, i: int, name: str, worker: Any) -> float:
        """One status write on the worker's copy of job ``i``: seconds until the manager's object has it."""
        mark = len(self.manager_pr.events)
        status = worker_status(i)
        message = status["conditions"][0]["message"]
        written = time.monotonic()
        worker.patch("tekton.dev/v1", "PipelineRun", name, {"status": status}, namespace=self.ns, subresource="status")

        def synced(kind: str, o: dict[str, Any]) -> bool:
            conditions = (o.get("status") or {}).get("conditions") or [{}]
            return bool(o["metadata"]["name"] == name and conditions[0].get("message") == message)

        return self.manager_pr.seen(synced, f"{name}'s status on the manager", mark) - written


# -- the wire: direct vs Go proxy vs mkpolicy --------------------------------------------------------------
def wired_side(mk: RealMultiKueue, worker: str = WORKER) -> Side:
    """The sidecar's endpoint for ``worker``, as Kueue reads it from the wired Secret."""
    secret = mk.manager.admin.get("v1", "Secret", f"{worker}-secret", KUEUE_NAMESPACE)
    kubeconfig = yaml.safe_load(base64.b64decode(secret["data"]["kubeconfig"]))
    cluster, user = kubeconfig["clusters"][0]["cluster"], kubeconfig["users"][0]["user"]
    return Side(cluster["server"], user["token"], base64.b64decode(cluster["certificate-authority-data"]).decode())


def copy_body(i: int, ns: str, suffix: str = "") -> dict[str, Any]:
    """Kueue's create of manager object ``i`` on the worker (external adapter: managedBy dropped, origin set)."""
    body = manager_run(i)
    body["spec"].pop("managedBy")
    body["metadata"].update(namespace=ns, name=body["metadata"]["name"] + suffix)
    body["metadata"].setdefault("labels", {})[ORIGIN] = "multikueue"
    body["metadata"].setdefault("annotations", {})[PREBUILT] = f"wl-{i}"
    return body


async def wire(mk: RealMultiKueue, proxy: GoProxy, ns: str, requests: int, rounds: int, posts: int) -> dict[str, Any]:
    """p50/p99 (ms) of pass-through GET, transformed GET and POST per side, to the sidecar route's worker."""
    import aiohttp

    worker_name = ROUTES["sidecar"]
    worker = mk.workers[worker_name]
    assert mk.sidecar is not None and mk.sidecar.process.pid is not None
    pid = mk.sidecar.process.pid
    direct = Side(worker.url, "", mk.plane.pki.ca.cert_pem.decode())
    direct.headers.pop("Authorization")
    direct.ssl = mk.plane.admin_tls()
    go = Side(proxy.url, proxy.token, proxy.ca.cert_pem.decode())
    sides = {"direct": direct, "go": go, "mkpolicy": wired_side(mk, worker_name)}
    pt = f"/apis/{KUEUE_API}/namespaces/{ns}/workloads/pending"
    tr = f"/apis/tekton.dev/v1/namespaces/{ns}/pipelineruns/run-00000"
    posts_path = f"/apis/tekton.dev/v1/namespaces/{ns}/pipelineruns"
    results: dict[str, Any] = {}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=8)) as session:
        await timed(session, sides["mkpolicy"], "POST", posts_path, copy_body(0, ns))  # the copy, transformed
        worker.admin.patch(
            "tekton.dev/v1",
            "PipelineRun",
            "run-00000",
            {"status": worker_status(0)},
            namespace=ns,
            subresource="status",
        )
        kinds = [(f"{what}_{side}", sides[side], path) for what, path in (("pt", pt), ("tr", tr)) for side in sides]
        for _, side, path in kinds:  # warm up connections and the evaluator
            for _ in range(20):
                await timed(session, side, "GET", path)
        samples: dict[str, list[float]] = {key: [] for key, _, _ in kinds}
        best: dict[str, float] = {}
        for _ in range(rounds):
            got: dict[str, list[float]] = {key: [] for key in samples}
            for _ in range(max(1, requests // rounds)):
                for key, side, path in kinds:
                    got[key].append(await timed(session, side, "GET", path))
            keep_round(got, samples, best)
        for key, values in samples.items():
            results[key] = {"p50": best[key], "p99": pct(values, 0.99)}
        post: dict[str, list[float]] = {side: [] for side in sides}
        for i in range(1, POST_WARMUP + posts + 1):
            for side_name, side in sides.items():
                suffix = "" if side_name == "mkpolicy" else f"-{side_name}"
                took = await timed(session, side, "POST", posts_path, copy_body(i, ns, suffix))
                if i > POST_WARMUP:
                    post[side_name].append(took)
        for side_name, values in post.items():
            results[f"post_{side_name}"] = {"p50": pct(values, 0.5), "p99": pct(values, 0.99)}
        alone = max(requests, CPU_REQUESTS)
        for key, path in (("cpu_pt_ms", pt), ("cpu_tr_ms", tr)):  # the sidecar's CPU per request, alone
            before = cpu_seconds(pid)
            for _ in range(alone):
                await timed(session, sides["mkpolicy"], "GET", path)
            results[key] = (cpu_seconds(pid) - before) / alone * 1000
    return results


def seed_wire(mk: RealMultiKueue, posts: int) -> str:
    """The wire's namespace: manager PipelineRuns (no Workload: Kueue leaves them alone), a pending Workload
    on the sidecar route's worker."""
    ns = mk.new_namespace("bench-wire")
    for i in range(POST_WARMUP + posts + 1):
        obj = manager_run(i)
        obj["metadata"]["namespace"] = ns
        mk.manager.admin.create(obj)
    pod = {"spec": {"containers": [{"name": "c", "image": "x"}]}}
    mk.workers[ROUTES["sidecar"]].admin.create(
        {
            "apiVersion": KUEUE_API,
            "kind": "Workload",
            "metadata": {"name": "pending", "namespace": ns},
            "spec": {"queueName": "none", "podSets": [{"name": "main", "count": 1, "template": pod}]},
        }
    )
    return ns


# -- the sidecar's own counters ----------------------------------------------------------------------------
def sidecar_mix(mk: RealMultiKueue) -> dict[str, float]:
    """Requests the sidecar answered so far by policy (empty: passed through), verb and code."""
    from prometheus_client.parser import text_string_to_metric_families

    assert mk.sidecar is not None
    with urllib.request.urlopen(f"http://127.0.0.1:{mk.sidecar.ops_port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    mix: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "mkpolicy_sidecar_requests_total":
                labels = sample.labels
                key = f"{labels['verb']} {labels['code']} {labels['policy'] or 'pass-through'}"
                mix[key] = mix.get(key, 0.0) + sample.value
    return mix


def reconciles(mk: RealMultiKueue, ns: str) -> int:
    """``Reconcile Workload`` lines of Workloads in ``ns`` in the manager Kueue's log so far (multikueue
    ``workload.go``, V(2); controller-runtime's logger names the request's namespace)."""
    mark = f'"namespace":"{ns}"'.encode()
    lines = mk.kueues["manager"].process.log.read_bytes().splitlines()
    return sum(1 for line in lines if b'"Reconcile Workload"' in line and mark in line)


def multikueue(kueue_version: str, policies: Path, workers: int = 1) -> RealMultiKueue:
    """A MultiKueue of ``workers`` (not started), the sidecar as configured by default in front of the last."""
    # the sidecar as configured by default: no request log (logging.requestLog is opt-in)
    return RealMultiKueue(workers, kueue_version=kueue_version, policies=policies, request_log=False,
                          sidecar_workers=[f"worker{workers}"], log=log)  # fmt: skip


def bench_policies(tmp: Path) -> Path:
    """The Tekton policy (and the schemas it names) in ``tmp``."""
    policies = tmp / "policies"
    policies.mkdir()
    shutil.copy(ROOT / "policies" / "tekton-pipelinerun.yaml", policies)
    shutil.copytree(ROOT / "schemas", tmp / "schemas")
    return policies


@contextlib.contextmanager
def multikueue_alone(kueue_version: str, tmp: Path) -> Iterator[RealMultiKueue]:
    """One MultiKueue with the sidecar, started; stopped at the end."""
    mk = multikueue(kueue_version, bench_policies(tmp))
    ensure_metrics_cert(mk.plane.pki.serving.cert_pem, mk.plane.pki.serving.key_pem)
    try:
        mk.start()
        yield mk
    finally:
        mk.stop()


class SecondSidecar:
    """Another sidecar process beside the ``--real`` one (``--against``, ``--capacity``): that one's configuration
    (manager, Kueue's version) with ``ports``' workers (name -> port), each the real worker API server, and an
    ops port of its own; ``edit`` changes the configuration further, ``src`` runs another checkout's mkpolicy.
    Started and ready (its ``/readyz``) on entering, stopped on leaving, also when it never got ready."""

    def __init__(
        self,
        mk: RealMultiKueue,
        folder: Path,
        name: str,
        ports: dict[str, int],
        edit: Callable[[dict[str, Any]], None] | None = None,
        src: Path | None = None,
    ) -> None:
        assert mk.sidecar is not None and mk.policies is not None
        folder.mkdir(parents=True)
        kubeconfig = folder / "worker.kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(mk.workers[WORKER].kubeconfig(cluster=WORKER)))
        config = yaml.safe_load(mk.sidecar.config_file.read_text())
        self.ops_port = free_port()
        config["ops"]["port"] = self.ops_port
        config["workers"] = [{"name": n, "port": p, "kubeconfig": {"file": str(kubeconfig)}} for n, p in ports.items()]
        if edit is not None:
            edit(config)
        (folder / "config.yaml").write_text(yaml.safe_dump(config))
        argv = [sys.executable, "-m", "mkpolicy", "sidecar", "--policies", str(mk.policies),
                "--config", str(folder / "config.yaml")]  # fmt: skip
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        if src is not None:  # (run in SRC: ``-m`` puts the working directory first on the path)
            env["PYTHONPATH"] = str(src)
        self.process = Process(name, argv, folder / "sidecar.log", env=env, cwd=src)

    def __enter__(self) -> Self:
        self.process.start()
        try:
            wait_until(self.process, lambda: http_ok(f"http://127.0.0.1:{self.ops_port}/readyz"),
                       f"the {self.process.name}'s /readyz", READY_TIMEOUT)  # fmt: skip
        except BaseException:
            self.process.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.stop()


def established(port: int) -> bool:
    """Whether a TCP connection to 127.0.0.1:``port`` is established (from ``/proc/net/tcp``)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[1].endswith(f":{port:04X}") and fields[3] == "01":
                return True
    return False


def go_proxy(mk: RealMultiKueue, worker: str, folder: Path) -> GoProxy:
    """The Go proxy for ``worker``, with the worker's admin credentials (not started)."""
    pki = mk.plane.pki
    return GoProxy(folder, mk.workers[worker].url, pki.ca.cert_pem, client_cert=(pki.admin.cert_pem, pki.admin.key_pem))


@contextlib.contextmanager
def go_proxied(mk: RealMultiKueue, worker: str, folder: Path) -> Iterator[GoProxy]:
    """The Go proxy between ``mk``'s Kueue and ``worker``: the worker's Secret rewired to it, Kueue connected."""
    with go_proxy(mk, worker, folder) as proxy:
        ca = base64.b64encode(proxy.ca.cert_pem).decode()
        mk.write_worker_secret(worker, {
            "apiVersion": "v1", "kind": "Config", "current-context": worker,
            "clusters": [{"name": worker, "cluster": {"server": proxy.url, "certificate-authority-data": ca}}],
            "users": [{"name": "kueue", "user": {"token": proxy.token}}],
            "contexts": [{"name": worker, "context": {"cluster": worker, "user": "kueue"}}],
        })  # fmt: skip
        # Kueue reconnects when the kubeconfig changes (its watches through the proxy)
        deadline = time.monotonic() + TIMEOUT
        while not established(proxy.port):
            if time.monotonic() > deadline:
                raise SystemExit(f"bench: Kueue did not connect to the Go proxy within {TIMEOUT:.0f}s")
            time.sleep(0.2)
        mk.wait_active()
        yield proxy


@contextlib.contextmanager
def routed(kueue_version: str, tmp: Path) -> Iterator[tuple[RealMultiKueue, GoProxy]]:
    """The MultiKueue of :data:`ROUTES`, started, each route's ClusterQueue made, and the Go proxy of its
    route; stopped at the end."""
    mk = multikueue(kueue_version, bench_policies(tmp), workers=len(ROUTES))
    assert mk.sidecar_workers == [ROUTES["sidecar"]]
    ensure_metrics_cert(mk.plane.pki.serving.cert_pem, mk.plane.pki.serving.key_pem)
    try:
        mk.start()
        with go_proxied(mk, ROUTES["goproxy"], tmp / "goproxy-e2e") as proxy:
            for route, worker in ROUTES.items():
                mk.add_route(route, [worker])
            yield mk, proxy
    finally:
        mk.stop()


#: The end-to-end figures taken per job and route (seconds in ``Jobs``, ms in results and ``--samples``).
SAMPLED = ("dispatch", "dispatch_from_reserved", "status")


def end_to_end(samples: dict[str, dict[str, list[float]]], unit: float = 1000) -> dict[str, Any]:
    """Each route's figures in ms from its samples (route -> figure -> values; ``unit``: ms in a value's unit,
    1000 for seconds) and the goals' ratios: the Go proxy's and the sidecar's medians over direct's, with
    their 95% intervals."""
    results: dict[str, Any] = {}
    for name, figures in samples.items():
        for key in SAMPLED:
            values = figures[key]
            results[f"{key}_{name}"] = {
                "mean": statistics.mean(values) * unit,
                "p50": statistics.median(values) * unit,
                "max": max(values) * unit,
                "samples": [round(v * unit, 1) for v in values],
            }
    for key in ("dispatch", "status"):
        for name in ("goproxy", "sidecar"):
            ratio, low, high = median_ratio(samples[name][key], samples["direct"][key])
            results[f"{key}_{name}_ratio"] = {"p50": ratio, "low": low, "high": high}
    return results


def pool(files: list[Path]) -> dict[str, Any]:
    """The end-to-end figures of ``--samples`` files taken together. ValueError naming the file and line of
    the first sample that is not one, or when a route has none."""
    samples: dict[str, dict[str, list[float]]] = {route: {key: [] for key in SAMPLED} for route in ROUTES}
    for path in files:
        try:
            text = path.read_text()
        except OSError as exc:
            raise ValueError(f"{path}: cannot be read ({exc.strerror or exc})") from None
        for number, line in enumerate(text.splitlines(), 1):
            try:
                sample = json.loads(line)
                figures = samples[sample["route"]]
                values = [float(sample[key]) for key in SAMPLED]
            except (ValueError, KeyError, TypeError):
                raise ValueError(
                    f"{path}:{number}: expected a --samples line, a JSON object with route ({', '.join(ROUTES)}) "
                    f"and {', '.join(SAMPLED)} in ms; found {line[:80]!r}"
                ) from None
            for key, value in zip(SAMPLED, values, strict=True):
                figures[key].append(value)
    empty = [route for route, figures in samples.items() if not figures["status"]]
    if empty:
        raise ValueError(f"no samples of the {', '.join(empty)} route in {', '.join(map(str, files))}")
    return {"files": [str(f) for f in files], "jobs": min(len(f["status"]) for f in samples.values()),
            **end_to_end(samples, unit=1)}  # fmt: skip


def run(
    jobs: int, requests: int, rounds: int, posts: int, kueue_version: str, samples: TextIO | None = None
) -> dict[str, Any]:
    """Everything above, in one run; the figures (each job's also to ``samples`` as it ends, when given)."""
    build.ensure([*build.all_peers([kueue_version]), build.goproxy()], log=log)
    tmp = Path(tempfile.mkdtemp(prefix="mkpolicy-bench-real-"))
    results: dict[str, Any] = {"kueue": kueue_version, "jobs": jobs}
    try:
        started = time.monotonic()
        with routed(kueue_version, tmp) as (mk, e2e_proxy):
            results["bringup_s"] = time.monotonic() - started
            ns = seed_wire(mk, posts)
            with go_proxy(mk, ROUTES["sidecar"], tmp / "goproxy") as proxy:
                log(f"the wire: {requests} GETs per side and kind, {posts} POSTs per side")
                results.update(asyncio.run(wire(mk, proxy, ns, requests, rounds, posts)))
            sides = {route: Jobs(mk, route, samples) for route in ROUTES}
            assert mk.sidecar is not None and mk.sidecar.process.pid is not None
            pid = mk.sidecar.process.pid
            idle0 = cpu_seconds(pid)
            time.sleep(IDLE_S)  # the sidecar's own background (reloads, manager watch) with no job running
            idle_rate = (cpu_seconds(pid) - idle0) / IDLE_S
            wired_ns, go_ns = sides["sidecar"].ns, sides["goproxy"].ns
            mix0, rec0 = sidecar_mix(mk), reconciles(mk, wired_ns)
            cpu0, t0 = cpu_seconds(pid), time.monotonic()
            # the Go proxy's CPU over its route's reconciles: what a proxy in Go costs the same work
            assert e2e_proxy.process.pid is not None
            go_pid = e2e_proxy.process.pid
            go_cpu0, go_rec0 = cpu_seconds(go_pid), reconciles(mk, go_ns)
            log(f"Kueue end to end: {jobs} jobs per route, alternating")
            for i in range(jobs):
                for route in SIDES[i % len(SIDES) :] + SIDES[: i % len(SIDES)]:  # each route first in turn
                    sides[route].run(i)
            cpu, window = cpu_seconds(pid) - cpu0, time.monotonic() - t0
            net = max(0.0, cpu - idle_rate * window)
            mix = {key: n - mix0.get(key, 0.0) for key, n in sidecar_mix(mk).items()}
            served, reconciled = sum(mix.values()), reconciles(mk, wired_ns) - rec0
            go_cpu, go_reconciled = cpu_seconds(go_pid) - go_cpu0, reconciles(mk, go_ns) - go_rec0
            results.update(end_to_end({name: {key: getattr(side, key) for key in SAMPLED}
                                       for name, side in sides.items()}))  # fmt: skip
            results.update(
                sidecar_cpu_s=cpu,
                sidecar_idle_cpu_s=idle_rate * window,
                window_s=window,
                sidecar_requests=served,
                reconciles=reconciled,
                cpu_per_reconcile_ms=cpu / max(reconciled, 1) * 1000,
                net_cpu_per_reconcile_ms=net / max(reconciled, 1) * 1000,
                cpu_per_request_ms=net / max(served, 1) * 1000,
                goproxy_cpu_per_reconcile_ms=go_cpu / max(go_reconciled, 1) * 1000,
                mix_per_job={key: round(n / jobs, 2) for key, n in sorted(mix.items()) if n},
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    # at the limits, a worker's requests cost what Kueue's requests cost here (the background excluded)
    per_worker_ms = results["cpu_per_request_ms"] * CLIENT_QPS * CLIENTS_PER_WORKER  # CPU ms per second
    results["workers_per_core"] = 1000 / per_worker_ms if per_worker_ms else float("inf")
    results.update(loadavg=os.getloadavg()[0], cpus=os.cpu_count())
    return results


def report(r: dict[str, Any]) -> None:
    """The table: each measure direct, Go proxy, mkpolicy, ratios, goals."""
    print(
        f"real peers: kube-apiserver {build.KUBE_VERSION}, Kueue {r['kueue']}, etcd {build.ETCD_VERSION}; "
        f"bring-up {r['bringup_s']:.0f}s"
    )
    print(
        f"{'the wire (ms)':28} {'direct':>8} {'Go proxy':>9} {'mkpolicy':>9} {'Go/direct':>10} {'mkp/direct':>11} "
        f"{'mkp/Go':>7}"
    )
    for label, key in (("pass-through GET", "pt"), ("transformed GET", "tr"), ("transformed POST", "post")):
        for q in ("p50", "p99"):
            d, g, m = (r[f"{key}_{side}"][q] for side in ("direct", "go", "mkpolicy"))
            print(f"{label + ' ' + q:28} {d:8.2f} {g:9.2f} {m:9.2f} {g / d:9.2f}x {m / d:10.2f}x {m / g:6.2f}x")
    print()
    report_end_to_end(r)
    # the goal on the figure without the idle background: that background (reloads) goes by the second, and
    # the window also holds the other MultiKueues' jobs
    ok = r["net_cpu_per_reconcile_ms"] <= 2
    print(
        f"\nsidecar CPU: {r['sidecar_cpu_s'] * 1000:.0f} ms in {r['window_s']:.0f}s over {r['reconciles']} Workload "
        f"reconciles = {r['cpu_per_reconcile_ms']:.2f} ms per reconcile all counted; without its idle background "
        f"({r['sidecar_idle_cpu_s'] * 1000:.0f} ms) {r['net_cpu_per_reconcile_ms']:.2f} ms per reconcile (goal <= 2 "
        f"ms: {'ok' if ok else 'MISSED'}), {r['cpu_per_request_ms']:.2f} ms per request ({r['sidecar_requests']:.0f} "
        "requests)"
    )
    # (the Go proxy counts no requests: Kueue's same work is taken as the sidecar's requests per reconcile)
    per_request = r["goproxy_cpu_per_reconcile_ms"] * r["reconciles"] / max(r["sidecar_requests"], 1)
    go_workers = 1000 / (per_request * CLIENT_QPS * CLIENTS_PER_WORKER) if per_request else float("inf")
    print(
        f"the Go proxy's CPU per reconcile of its route (Kueue's same work, nothing transformed): "
        f"{r['goproxy_cpu_per_reconcile_ms']:.2f} ms, about {per_request:.2f} ms per request: {go_workers:.0f} workers "
        "per core"
    )
    mix = ", ".join(f"{n:g} {key}" for key, n in r["mix_per_job"].items())
    print(f"Kueue's requests through the sidecar per job (verb, code, policy): {mix}")
    print(
        f"sidecar CPU per request alone: pass-through GET {r['cpu_pt_ms']:.2f} ms, transformed GET "
        f"{r['cpu_tr_ms']:.2f} ms"
    )
    # not the goal's reading: here each request wakes an idle event loop; --capacity loads it as the goal says
    print(
        f"workers per sidecar core at Kueue's client limits ({CLIENTS_PER_WORKER} clients x {CLIENT_QPS} QPS, "
        f"burst {CLIENT_BURST}, per worker), at this run's pace: 1000 / ({r['cpu_per_request_ms']:.2f} ms x "
        f"{CLIENT_QPS * CLIENTS_PER_WORKER}/s) = {r['workers_per_core']:.0f} (a request every "
        f"{r['window_s'] / max(r['sidecar_requests'], 1) * 1000:.0f} ms; the goal, >= 100, is measured under "
        "that load by --capacity N)"
    )
    print(f"(load average {r['loadavg']:.1f} on {r['cpus']} CPUs)")


def report_end_to_end(r: dict[str, Any]) -> None:
    """The end-to-end table: dispatch and status write-back per route, the goals read on their intervals."""
    print(
        f"Kueue end to end, {r['jobs']} jobs per route, one manager Kueue (ms)\n"
        f"{'':40} {'direct':>9} {'Go proxy':>9} {'sidecar':>9} {'Go/direct':>10} {'mkp/direct':>11}   goal"
    )
    for label, key in (
        ("dispatch: admitted -> copy created", "dispatch"),
        ("  (from the manager's reservation)", "dispatch_from_reserved"),
        ("status: worker -> manager written", "status"),
    ):
        for q in ("mean", "p50", "max"):
            a, g, b = (r[f"{key}_{side}"][q] for side in SIDES)
            # the median: the mean moves with how many copies Kueue made at once, which is chance
            judged = ""
            if key != "dispatch_from_reserved" and q == "p50":  # the goal, read on the ratio's 95% interval
                go, mk = r[f"{key}_goproxy_ratio"], r[f"{key}_sidecar_ratio"]
                judged = (
                    f"<= {GOAL_RATIO:.2f}x  {verdict(mk['low'], mk['high'])} "
                    f"(95%: sidecar {mk['low']:.2f}-{mk['high']:.2f}x, Go proxy {go['low']:.2f}-{go['high']:.2f}x)"
                )
            print(f"{label + ' ' + q:40} {a:9.0f} {g:9.0f} {b:9.0f} {g / a:9.2f}x {b / a:10.2f}x   {judged}")
        for name in SIDES:
            fast = [v for v in r[f"{key}_{name}"]["samples"] if v < BATCH_MS / 2]
            slow = [v for v in r[f"{key}_{name}"]["samples"] if v >= BATCH_MS / 2]
            print(
                f"    {name}: {len(fast)} at once (median {statistics.median(fast or [0]):.0f}), {len(slow)} after "
                f"Kueue's {BATCH_MS} ms batch period (median {statistics.median(slow or [0]):.0f})"
            )


def print_run(prefix: str, run: Callable[[Path], dict[str, Any]], report: Callable[[dict[str, Any]], None],
              as_json: bool) -> int:  # fmt: skip
    """``run(tmp)`` in a temporary folder named ``prefix...`` (removed afterwards); its figures printed as JSON,
    or as ``report`` prints them."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        results = run(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if as_json:
        print(json.dumps(results, indent=2))
    else:
        report(results)
    return 0


def main(argv: list[str]) -> int:
    """``bench/sidecar.py --real [--jobs N] [--requests N] [--rounds N] [--posts N] [--kueue-version V] [--json]
    [--against SRC | --capacity N [--seconds S] [--floor] | --pool FILE... | --pool-capacity FILE...]``."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="bench/sidecar.py --real", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--real", action="store_true", required=True)
    parser.add_argument("--jobs", type=int, default=20, help="jobs per route (alternating)")
    parser.add_argument("--requests", type=int, default=1000, help="GETs per side and kind (all rounds)")
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="rounds of interleaved GETs (best p50 kept); with --capacity: rounds a side, alternating (the goal is "
        "read on the interval over them)",
    )
    parser.add_argument("--posts", type=int, default=200, help="POSTs per side")
    parser.add_argument("--kueue-version", default=build.KUEUE_VERSION)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument(
        "--against",
        metavar="SRC",
        help="instead: this checkout's sidecar and the one of the mkpolicy package in SRC (e.g. main: "
        "git archive main mkpolicy | tar -x -C SRC), Kueue's requests kind by kind, --requests of each "
        "(bench/sidecar_versus.py)",
    )
    parser.add_argument(
        "--capacity",
        metavar="N",
        type=int,
        help="instead: N workers at Kueue's client limits (15 requests/s each, Kueue's mix) through one sidecar "
        "and then the Go proxy, --rounds of --seconds each: CPU per request under load, workers per core "
        "(bench/sidecar_capacity.py)",
    )
    parser.add_argument("--seconds", type=float, help="with --capacity: seconds measured a round (default 30)")
    parser.add_argument(
        "--floor",
        action="store_true",
        help="with --capacity: the same load through a third side, the floor relay (the least any Python TLS relay "
        "does: two TLS legs, bytes copied, nothing parsed): what Python costs before mkpolicy does anything",
    )
    parser.add_argument(
        "--samples",
        metavar="FILE",
        type=Path,
        help="append each job's end-to-end figures to FILE as it ends (JSON lines: route, job, dispatch, "
        "dispatch_from_reserved, status, in ms): a run that fails keeps what it measured; --pool reads them",
    )
    parser.add_argument(
        "--pool",
        metavar="FILE",
        type=Path,
        nargs="+",
        help="instead: nothing is run; the end-to-end figures of these --samples files taken together, the "
        "goals read on the pooled intervals",
    )
    parser.add_argument(
        "--pool-capacity",
        metavar="FILE",
        type=Path,
        nargs="+",
        help="instead: nothing is run; the rounds of these --capacity --json outputs (the same load: Kueue "
        "version, workers, seconds) taken together, the goal read on the pooled interval",
    )
    args = parser.parse_args(argv)
    if args.pool and args.pool_capacity:
        parser.error("--pool and --pool-capacity: one at a time (end-to-end samples, or capacity runs)")
    if args.pool or args.pool_capacity:  # nothing run: files read together
        import sidecar_capacity

        option, read, show = (
            ("--pool", pool, report_end_to_end)
            if args.pool
            else ("--pool-capacity", sidecar_capacity.pool, sidecar_capacity.report)
        )
        try:
            pooled = read(args.pool or args.pool_capacity)
        except ValueError as exc:
            parser.error(f"{option}: {exc}")
        if args.json:
            print(json.dumps(pooled, indent=2))
        else:
            print(f"pooled from {', '.join(pooled['files'])}")
            show(pooled)
        return 0
    if args.samples is not None and (args.capacity is not None or args.against):
        parser.error("--samples: the end-to-end run's figures; --capacity and --against take no samples")
    for option in ("jobs", "requests", "rounds", "posts"):  # (each is a count the figures are taken over)
        if getattr(args, option) < 1:
            parser.error(f"--{option}: expected 1 or more, got {getattr(args, option)}")
    if args.capacity is not None and args.capacity < 1:
        parser.error(f"--capacity: expected 1 worker or more, got {args.capacity}")
    if args.seconds is not None and (args.capacity is None or args.seconds <= 0):
        parser.error(f"--seconds: expected a positive number of seconds with --capacity N, got {args.seconds:g}"
                     + ("" if args.capacity is not None else " without --capacity"))  # fmt: skip
    if args.floor and args.capacity is None:
        parser.error("--floor: a third side of the --capacity N load; give --capacity N")
    if build.go_binary() is None:
        parser.error("--real needs a Go toolchain to build the peers ('go' is not on PATH)")
    if args.capacity is not None:
        import sidecar_capacity

        version = build.normalize_kueue_version(args.kueue_version)
        return sidecar_capacity.main(args.capacity, args.seconds or 30.0, args.rounds, version, args.json, args.floor)
    if args.against:
        import sidecar_versus

        build.ensure(build.all_peers([build.normalize_kueue_version(args.kueue_version)]), log=log)
        return sidecar_versus.main(
            args.against, args.requests, build.normalize_kueue_version(args.kueue_version), args.json
        )
    version = build.normalize_kueue_version(args.kueue_version)
    with open(args.samples, "a") if args.samples else contextlib.nullcontext() as samples:
        results = run(args.jobs, args.requests, args.rounds, args.posts, version, samples)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        report(results)
    return 0
