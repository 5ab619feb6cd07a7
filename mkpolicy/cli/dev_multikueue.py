"""``mkpolicy dev multikueue`` and ``mkpolicy dev build-peers``: a local MultiKueue to try policies on."""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mkpolicy.cli.dev_serve import (
    crd_files,
    kubeconfig_dir,
    kubeconfig_dir_problem,
    kubeconfig_lines,
    until_interrupted,
)

if TYPE_CHECKING:
    from mkpolicy.testing.peers.sidecar import SidecarProcess

#: Where ``--real`` makes LocalQueue ``lq`` on every cluster (a namespace every cluster has).
QUEUE_NAMESPACE = "default"

MULTIKUEUE_DESCRIPTION = """\
Bring up a MultiKueue on this machine — a manager cluster and N worker clusters — write a
kubeconfig per cluster, and keep it running until interrupted (Ctrl-C, SIGTERM, or SIGHUP
when the terminal closes). Then point kubectl, your client or your own policy at it.

Two kinds of clusters:

  (default)  loopback API servers (mkpolicy's own, in this process): start in a second, with
             Kueue's MultiKueue objects configured on the manager (kueue-system Secrets,
             MultiKueueClusters, MultiKueueConfig, AdmissionCheck). No Kueue runs: use them
             to look at what the sidecar sends, or point your own tools at them.

  --real     the real thing: one etcd, one kube-apiserver per cluster and real Kueue on every
             cluster, built from the Go modules in the checkout's peers/ folder (the first
             run builds them: 10-20 minutes on 2 cores; then cached). MultiKueue is configured
             as in production: on the manager a ResourceFlavor, ClusterQueue "cq" with the
             MultiKueue AdmissionCheck "mk", MultiKueueConfig "mk", a MultiKueueCluster and
             its kubeconfig Secret per worker; on each worker the same flavor and ClusterQueue;
             on every cluster LocalQueue "lq" (to "cq") in namespace default. Kueue dispatches
             Workloads queued there to the workers, as it would across real clusters.

With --policies DIR, the mkpolicy sidecar runs between the manager and the workers
('mkpolicy sidecar --wire'): the MultiKueueCluster Secrets point at it and every object
of a policy's kind is transformed on its way to a worker and back. The manager must serve
each policy's kind (the bundled Tekton CRD, or --crd) for the policy to act: a policy
whose kind it does not serve stays pending (listed at start) while the others work.

Nobody plays Tekton (or your kind's controller): on the manager, create the job with
spec.managedBy: kueue.x-k8s.io/multikueue and its Workload (with a controller
ownerReference to the job, as a Kueue integration would); on the worker, write the
job's status and finish the Workload yourself (docs/testing.md shows each step).
"""

MULTIKUEUE_EPILOG = """\
examples:
  # real Kueue, two workers, the shipped Tekton policy in between
  mkpolicy dev multikueue --real --policies policies/ --kubeconfig-dir /tmp/mk
  kubectl --kubeconfig /tmp/mk/manager.kubeconfig get multikueueclusters,clusterqueues
  kubectl --kubeconfig /tmp/mk/worker1.kubeconfig get pipelineruns -A

  # your own kind: its CRD on every cluster, its policy in DIR
  mkpolicy dev multikueue --real --crd my-crd.yaml --framework MyJob.v1.example.com --policies DIR

  # the older Kueue the tests also run
  mkpolicy dev multikueue --real --kueue-version v0.17.1

Every process and file it made is removed when it stops, also after a failed start
(the failing component's log is quoted). Killed outright (kill -9), it leaves its files,
and a small guardian process stops its peers within seconds. Build the real peers ahead
of time with 'mkpolicy dev build-peers'. exit codes: 0 after an interrupt, 1 when a peer
cannot be built or started, 2 for a bad option.
"""


def configure(sub: Any) -> None:
    """Add ``multikueue`` and ``build-peers`` to ``mkpolicy dev``."""
    mk = sub.add_parser(
        "multikueue",
        help="run a manager and worker clusters with MultiKueue configured (--real: real Kueue)",
        description=MULTIKUEUE_DESCRIPTION,
        epilog=MULTIKUEUE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    mk.add_argument("--real", action="store_true", help="real etcd, kube-apiserver and Kueue (built on first use)")
    mk.add_argument("--workers", type=int, default=2, metavar="N", help="number of worker clusters (default 2)")
    mk.add_argument("--policies", metavar="DIR", help="run the mkpolicy sidecar in between, with these policies")
    mk.add_argument("--crd", action="append", default=[], metavar="FILE",
                    help="install the CRDs in FILE on every cluster; repeatable")  # fmt: skip
    mk.add_argument("--framework", action="append", default=[], metavar="KIND.VERSION.GROUP",
                    help="an external framework for Kueue's MultiKueue (default: PipelineRun.v1.tekton.dev); "
                    "repeatable")  # fmt: skip
    mk.add_argument("--kubeconfig-dir", metavar="DIR",
                    help="where to write manager.kubeconfig, worker1.kubeconfig, ... (default: a temporary folder, "
                    "removed at exit)")  # fmt: skip
    mk.add_argument("--kueue-version", metavar="V",
                    help="Kueue version with --real: one with a module in peers/ (default: the newest; "
                    "'mkpolicy dev build-peers' lists them)")  # fmt: skip
    bp = sub.add_parser(
        "build-peers",
        help="build etcd, kube-apiserver and Kueue from the peers/ Go modules into the cache",
        description="Build what the cache lacks: etcd, kube-apiserver and Kueue's manager (each Kueue version the "
        "tests run), from the checkout's peers/ Go modules, with CGO_ENABLED=0 -trimpath. Prints each "
        "binary's path. A cold build takes 10-20 minutes on 2 cores; cached binaries are reused.",
    )
    bp.add_argument("--kueue-version", action="append", default=[], metavar="V",
                    help="a Kueue version to build (default: every version the tests run); repeatable")  # fmt: skip


def build_peers(args: argparse.Namespace) -> int:
    """``mkpolicy dev build-peers``."""
    from mkpolicy.testing.peers import build

    argv: list[str] = []
    for version in args.kueue_version:
        argv += ["--kueue-version", version]
    return build.main(argv)


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def multikueue(args: argparse.Namespace) -> int:
    """``mkpolicy dev multikueue``."""
    from mkpolicy.cli.common import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, error
    from mkpolicy.errors import MkpolicyError

    if args.workers < 1:
        error(f"--workers must be at least 1, found {args.workers}")
        return EXIT_USAGE
    for path in [*args.crd, *([args.policies] if args.policies else [])]:
        if not Path(path).exists():
            error(f"{path}: no such file or directory")
            return EXIT_USAGE
    if args.real and args.kueue_version:
        from mkpolicy.testing.peers import build

        known = build.known_kueue_versions()
        if build.normalize_kueue_version(args.kueue_version) not in known:
            expected = ", ".join(known)
            error(f"--kueue-version {args.kueue_version}: no module for it in peers/; expected one of {expected}")
            return EXIT_USAGE
    problem = kubeconfig_dir_problem(args.kubeconfig_dir) if args.kubeconfig_dir else None
    if problem:
        error(problem)
        return EXIT_USAGE
    frameworks = args.framework or ["PipelineRun.v1.tekton.dev"]
    try:
        with kubeconfig_dir(args.kubeconfig_dir) as out:
            running = _real(args, frameworks, out) if args.real else _loopback(args, out)
            with running as lines:
                until_interrupted(lines)
            print("stopped", flush=True)
            return EXIT_OK
    except MkpolicyError as exc:
        print(exc.report(), file=sys.stderr)
        return EXIT_FINDINGS
    except OSError as exc:  # e.g. a kubeconfig that cannot be written (everything started is stopped by now)
        error(f"{exc.filename2 or exc.filename}: {exc.strerror}" if exc.filename else exc)  # (a rename: its target)
        return EXIT_FINDINGS
    except KeyboardInterrupt:
        return EXIT_OK


def _sidecar_lines(sidecar: SidecarProcess | None) -> list[str]:
    if sidecar is None:
        return []
    pending = [f"  pending (give its CRD with --crd): {p}" for p in sidecar.pending]
    return [f"sidecar between the manager and the workers: {sidecar.process.log}", *pending]


@contextlib.contextmanager
def _real(args: argparse.Namespace, frameworks: list[str], out: Path) -> Iterator[list[str]]:
    """Real peers up (stopped on exit); yields what to tell the user."""
    from mkpolicy.testing.peers.build import KUEUE_VERSION
    from mkpolicy.testing.peers.multikueue import CLUSTER_QUEUE, LOCAL_QUEUE, RealMultiKueue

    started = time.monotonic()
    mk = RealMultiKueue(args.workers, kueue_version=args.kueue_version or KUEUE_VERSION, frameworks=frameworks,
                        policies=Path(args.policies) if args.policies else None,
                        crds=[Path(c) for c in args.crd], kubeconfig_dir=out, pending_ok=True, log=_log)  # fmt: skip
    with mk:
        mk.local_queues(QUEUE_NAMESPACE)  # (jobs can be queued at once, as on a configured cluster)
        yield [f"MultiKueue on real peers (Kueue {mk.kueue_version}) up in {time.monotonic() - started:.0f}s; "
               f"logs in {mk.run_dir}",
               f"queue jobs in namespace {QUEUE_NAMESPACE}: LocalQueue {LOCAL_QUEUE} -> ClusterQueue {CLUSTER_QUEUE} "
               "on every cluster",
               *_sidecar_lines(mk.sidecar),
               *kubeconfig_lines(mk.kubeconfig_files)]  # fmt: skip


@contextlib.contextmanager
def _loopback(args: argparse.Namespace, out: Path) -> Iterator[list[str]]:
    """Loopback API servers with MultiKueue's objects, the sidecar with --policies (stopped on exit);
    yields what to tell the user."""
    from mkpolicy.testing.kueue.env import loopback_multikueue
    from mkpolicy.testing.peers.sidecar import SidecarProcess

    workers = [f"worker{i + 1}" for i in range(args.workers)]
    with loopback_multikueue(workers, crds=crd_files(args.crd)) as env:
        files = {name: srv.write_kubeconfig(out / f"{name}.kubeconfig")
                 for name, srv in [("manager", env.manager), *env.workers.items()]}  # fmt: skip
        sidecar = None
        state = tempfile.TemporaryDirectory(prefix="mkpolicy-sidecar-")
        try:
            if args.policies:
                sidecar = SidecarProcess(Path(state.name), env.manager, files["manager"], workers,
                                         Path(args.policies))  # fmt: skip
                sidecar.start(pending_ok=True)
            yield ["MultiKueue objects on loopback API servers (no Kueue runs; --real for real Kueue)",
                   *_sidecar_lines(sidecar),
                   *kubeconfig_lines(files)]  # fmt: skip
        finally:
            if sidecar is not None:
                sidecar.stop()
            state.cleanup()
