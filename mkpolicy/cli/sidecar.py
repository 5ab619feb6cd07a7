"""Run mkpolicy on the wire between the Kueue manager and its workers (docs/architecture.md).

One HTTPS endpoint per worker cluster (TLS with a CA the sidecar generates, a bearer
token per worker); Kueue's MultiKueueCluster kubeconfig Secrets point at them.
Requests for the policies' kinds are transformed, everything else passes through.
Probes and Prometheus metrics are served on the ops port; logs are JSON on stderr.

--wire points the MultiKueueCluster Secrets at the sidecar once it listens (keeping
the original kubeconfigs; idempotent) and watches them: a Secret rewritten by a rotation
or GitOps is wired again, its new kubeconfig kept as the worker's real one. --unwire
restores them (the newest real kubeconfig) and exits.
--kubeconfig-dir writes each worker endpoint's kubeconfig (to wire by hand).
--check validates the configuration, the policies and the worker kubeconfigs (files, and
Secrets when the manager is reachable), reads Kueue's configuration from the manager
(ConfigMap kueue-manager-config, the Deployment's image for Kueue's version) and says
which valid policies the sidecar skips and why, which policy names another version than
Kueue's externalFrameworks entry, which ports collide with Kueue's in its pod, whether
each policy kind's CRD on the manager keeps its managedBy field (exit 2 when it prunes it:
mkpolicy export crd-patch) and how its status travels, and which workers Kueue reaches
without the sidecar (their MultiKueueCluster Secret points elsewhere), then exits.
--init-state DIR writes the CA, serving certificate and worker tokens to DIR and exits:
several Kueue replicas then share them (a Secret mounted as state.dir).

Exit codes: 0 clean shutdown, 1 invalid policies, 2 invalid configuration or kubeconfig.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mkpolicy.engine import Adapter
    from mkpolicy.kube.client import KubeClient
    from mkpolicy.sidecar.config import SidecarConfig


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mkpolicy sidecar``."""
    parser.add_argument("--policies", required=True, metavar="DIR", help="policy directory (hot reloaded)")
    parser.add_argument("--config", required=True, metavar="FILE", help="SidecarConfig YAML file")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--wire",
        action="store_true",
        help="point the MultiKueueCluster Secrets at the sidecar and keep them so (a rotated Secret is wired "
        "again, its new kubeconfig kept as the worker's real one)",
    )
    mode.add_argument("--unwire", action="store_true", help="restore the MultiKueueCluster Secrets, then exit")
    mode.add_argument("--check", action="store_true", help="validate config, policies and kubeconfig files, then exit")
    mode.add_argument("--init-state", metavar="DIR", help="write CA, certificate and tokens to DIR, then exit")
    parser.add_argument("--kubeconfig-dir", metavar="DIR", help="write <worker>.kubeconfig for each endpoint here")


def run(args: argparse.Namespace) -> int:
    """Start the sidecar and serve until SIGTERM."""
    import asyncio
    import os

    from mkpolicy.cli.common import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, error
    from mkpolicy.errors import MkpolicyError
    from mkpolicy.kube.kubeconfig import KubeconfigError
    from mkpolicy.kube.rest import RestConfigError
    from mkpolicy.sidecar import ConfigError, ReloadError, Sidecar, load_config, setup_logging, unwire_all
    from mkpolicy.sidecar.policies import compile_directory

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return EXIT_USAGE
    if not os.path.isdir(args.policies):
        error(f"--policies {args.policies!r}: expected a directory of FrameworkPolicy files")
        return EXIT_USAGE
    setup_logging(config.logging.level)

    if args.init_state:
        from mkpolicy.sidecar.endpoints import certificate_hosts, load_or_create

        try:
            load_or_create(
                args.init_state,
                [w.name for w in config.workers],
                certificate_hosts(config.listen.address, config.listen.hosts),
            )
        except ConfigError as exc:
            print(exc.report(), file=sys.stderr)
            return EXIT_USAGE
        for name in sorted(os.listdir(args.init_state)):
            print(os.path.join(args.init_state, name))
        return EXIT_OK

    if args.check:
        try:
            adapters = compile_directory(args.policies)
        except ReloadError as exc:
            print(exc.message, file=sys.stderr)
            return EXIT_FINDINGS
        return asyncio.run(check(config, adapters))

    async def serve() -> int:
        if args.unwire:
            for name, unwired in (await unwire_all(config)).items():
                print(f"{name}: {unwired}")
            return EXIT_OK
        sidecar = Sidecar(config, args.policies)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        import signal

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await sidecar.start()
        try:
            if args.kubeconfig_dir:
                from mkpolicy.kube.kubeconfig import write_kubeconfig
                from mkpolicy.kube.secretfiles import private_dir

                private_dir(args.kubeconfig_dir)
                for worker in config.workers:
                    write_kubeconfig(
                        os.path.join(args.kubeconfig_dir, f"{worker.name}.kubeconfig"), sidecar.kubeconfig(worker.name)
                    )
            if args.wire:
                for name, wired in (await sidecar.wire()).items():
                    print(
                        f"{name}: wired ({wired})" if not wired.startswith("not ") else f"{name}: {wired}",
                        file=sys.stderr,
                    )
            await stop.wait()
        finally:
            await sidecar.stop()
        return EXIT_OK

    try:
        return asyncio.run(serve())
    except ReloadError as exc:
        print(exc.message, file=sys.stderr)
        return EXIT_FINDINGS
    except (ConfigError, KubeconfigError, RestConfigError) as exc:
        problems = getattr(exc, "violations", None) or [exc.message]
        for problem in problems:
            print(f"{exc.location.position() or args.config}: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    except MkpolicyError as exc:
        print(exc.report(), file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        from mkpolicy.sidecar.config import bind_error

        bind = bind_error(config, exc)
        print(f"{args.config}: error: {bind}" if bind else f"error: cannot start: {exc}", file=sys.stderr)
        return EXIT_USAGE


async def check(config: SidecarConfig, adapters: list[Adapter]) -> int:
    """``--check``: the worker kubeconfigs, Kueue's configuration and the policies, reported.

    Reads what it can from the manager (Kueue's ConfigMap and Deployment, Secret-held
    kubeconfigs); without a manager connection it says what it could not check. Exits 2
    when a worker kubeconfig is refused; warnings do not fail.
    """
    from mkpolicy.cli.common import EXIT_OK, EXIT_USAGE
    from mkpolicy.errors import MkpolicyError
    from mkpolicy.kube.client import KubeClient
    from mkpolicy.sidecar import manager_rest_config
    from mkpolicy.sidecar.kueueconfig import (
        Finding,
        KueueInfo,
        configured,
        policy_findings,
        port_findings,
        read_kueue,
        sidecar_ports,
    )
    from mkpolicy.sidecar.metrics import Metrics
    from mkpolicy.sidecar.policies import split_wire
    from mkpolicy.sidecar.workers import WorkerLink

    manager: KubeClient | None = None
    try:
        manager = KubeClient(manager_rest_config(config), user_agent="mkpolicy-sidecar-check", timeout=10)
        kueue = await read_kueue(manager, config)
    except MkpolicyError as exc:  # no manager connection (not in a pod, no kubeconfig)
        kueue = configured(KueueInfo(unread=[f"no manager connection: {exc.message}"]), config)
    failed = False
    try:
        metrics = Metrics()
        for worker in config.workers:
            link = WorkerLink(worker, config.manager.namespace, frozenset, metrics)
            if worker.kubeconfig.secret is not None and manager is None:
                print(f"worker {worker.name}: not checked ({link.source}; no manager connection)")
                continue
            await link.load(manager)
            await link.upstream.close()
            if link.problem is None:
                print(f"worker {worker.name}: ok: {link.source}")
            else:
                failed = True
                print(f"worker {worker.name}: error: {link.problem}", file=sys.stderr)
        carried, skipped = split_wire(adapters, kueue)
        reports = await _manager_reports(config, manager, carried)
    finally:
        if manager is not None:
            await manager.close()
    print(f"kueue: {kueue.describe()}")
    for unread in kueue.unread:
        print(f"kueue: not read: {unread}")
    for adapter in carried:
        problem, notes = reports.get(adapter.name, (None, []))
        if problem is not None:
            failed = True
            print(f"policy {adapter.name}: error ({adapter.gvk}): {problem}", file=sys.stderr)
        else:
            print(f"policy {adapter.name}: ok ({adapter.gvk})")
        for note in notes:
            print(f"policy {adapter.name}: {note}")
    for worker_line in reports.get("", (None, []))[1]:
        print(worker_line)
    for adapter, reason in skipped:  # valid, but the sidecar will not use them
        print(f"policy {adapter.name}: skipped ({adapter.gvk}): stock Kueue cannot carry it: {reason}")
    findings = policy_findings(kueue, [(a.name, a.gvk) for a in carried])
    findings += port_findings(kueue, sidecar_ports(config))
    if config.shutdown.grace_period_seconds >= 10:
        findings.append(
            Finding(
                "warning",
                f"shutdown.gracePeriodSeconds {config.shutdown.grace_period_seconds:g} is not below Kueue's "
                "terminationGracePeriodSeconds (10): the kubelet kills the pod before the sidecar drains",
            )
        )
    if config.state.dir is None:
        findings.append(
            Finding("warning", "state.dir is null: a new CA and tokens at every start; Kueue's kubeconfigs go stale")
        )
    for finding in findings:
        print(f"{finding.level}: {finding.message}")
    return EXIT_USAGE if failed else EXIT_OK


async def _manager_reports(
    config: SidecarConfig, manager: KubeClient | None, carried: list[Adapter]
) -> dict[str, tuple[str | None, list[str]]]:
    """What the manager says about each carried policy's CRD ({name: (error, notes)}), and under the key
    "" the lines about how Kueue reaches the workers (:mod:`mkpolicy.sidecar.manager_checks`)."""
    import aiohttp

    from mkpolicy.kube.client import ApiError
    from mkpolicy.sidecar.endpoints import endpoint_url
    from mkpolicy.sidecar.logs import plain_error
    from mkpolicy.sidecar.manager_checks import bypass_state, crd_report

    out: dict[str, tuple[str | None, list[str]]] = {}
    if manager is None:
        return {a.name: (None, ["CRD not checked (no manager connection)"]) for a in carried}
    writes_status = False
    for adapter in carried:
        try:
            info = await manager.discover(adapter.gvk.group, adapter.gvk.version, adapter.gvk.kind)
            report = await crd_report(manager, adapter, info)
        except (ApiError, aiohttp.ClientError, OSError, TimeoutError) as exc:
            out[adapter.name] = (None, [f"CRD not checked: {plain_error(exc)}"])
            continue
        out[adapter.name] = (report.problem, [report.note] if report.note else [])
        writes_status = writes_status or report.note is not None
    address = config.listen.address
    endpoints = frozenset(endpoint_url(address, port) for port in config.worker_ports() if port)
    lines: list[str] = []
    for worker in config.workers:
        try:
            state, why = await bypass_state(manager, worker, config.manager.namespace, endpoints)
        except (ApiError, aiohttp.ClientError, OSError, TimeoutError) as exc:
            lines.append(f"warning: worker {worker.name}: cannot tell how Kueue reaches it: {plain_error(exc)}")
            continue
        if state == "bypassed":
            # Before the first --wire this is expected; afterwards it means untransformed copies and, for a
            # kind without a status subresource, a Workload that never finishes.
            impact = "; a kind without a status subresource would never finish" if writes_status else ""
            lines.append(f"warning: worker {worker.name}: {why}{impact}")
    out[""] = (None, lines)
    return out
