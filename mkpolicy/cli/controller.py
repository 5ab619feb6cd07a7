"""Queue the kinds of the policies with spec.integration with Kueue: Kueue's job reconciler
(ReconcileGenericJob) driven by each policy's CEL, no Go (docs/integration.md).

For each such kind it creates the Workload of every queued object (a kueue.x-k8s.io/queue-name
label), starts the object when Kueue admits the Workload (the flavors' node labels and
tolerations injected), stops it on eviction and releases the quota once its pods are gone,
finishes the Workload when the object finishes, and adopts prebuilt Workloads on MultiKueue
workers. Reads go through watch caches; one instance at a time reconciles (a Lease).
Probes and Prometheus metrics are served on --ops-port; logs are JSON on stderr.

It follows Kueue's configuration as Kueue's job framework does: --kueue-config reads Kueue's
Configuration (namespace, manageJobsWithoutQueueName, managedJobsNamespaceSelector,
integrations.labelKeysToCopy, waitForPodsReady, featureGates); the options below override it.
Objects in namespaces managedJobsNamespaceSelector does not select are left alone (default:
every namespace but kube-system and Kueue's); objects without a queue-name label are queued
only with manageJobsWithoutQueueName. --kueue-version picks the Kueue release whose job
framework it follows where releases differ (v0.19.2, v0.17.1).

Exit codes: 0 clean shutdown (SIGTERM), 1 invalid policies, 2 bad arguments or kubeconfig,
3 the lease was lost (restart to campaign again).
"""

from __future__ import annotations

import argparse

from mkpolicy.cli.common import add_kueue_config_arguments


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mkpolicy controller``."""
    parser.add_argument("--policies", required=True, metavar="DIR", help="policy file or directory")
    parser.add_argument(
        "--kubeconfig", metavar="FILE", help="the cluster's kubeconfig (default: the pod's service account)"
    )
    parser.add_argument("--context", help="a kubeconfig context other than the current one")
    parser.add_argument("--ops-address", default="0.0.0.0", help="address of /healthz, /readyz, /metrics")
    parser.add_argument("--ops-port", type=int, default=8081, help="port of /healthz, /readyz, /metrics (default 8081)")
    parser.add_argument("--workers", type=int, default=4, help="jobs reconciled at once (default 4)")
    parser.add_argument("--lease-namespace", default="kueue-system", help="namespace of the leader Lease")
    parser.add_argument("--lease-name", default="mkpolicy-controller", help="name of the leader Lease")
    parser.add_argument("--no-leader-election", action="store_true", help="reconcile without holding the Lease")
    parser.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    add_kueue_config_arguments(parser, workload=True)
    parser.add_argument(
        "--label-keys-to-copy",
        default=None,
        metavar="K1,K2",
        help="Kueue's integrations.labelKeysToCopy (overrides --kueue-config)",
    )
    parser.add_argument(
        "--short-workload-names", action="store_true", help="Kueue's ShortWorkloadNames gate on (63-character names)"
    )
    parser.add_argument(
        "--no-partial-admission", action="store_true", help="Kueue's PartialAdmission gate off (minCount dropped)"
    )
    parser.add_argument(
        "--wait-for-pods-ready", action="store_true", help="Kueue's waitForPodsReady on: keep PodsReady up to date"
    )


def run(args: argparse.Namespace) -> int:
    """Run the controller until SIGTERM."""
    import asyncio
    import dataclasses
    import os
    import signal
    import socket

    from mkpolicy.cli.common import EXIT_OK, EXIT_USAGE, cluster_config, error, integration_adapters, kueue_config
    from mkpolicy.controller import Controller, ControllerOptions
    from mkpolicy.errors import MkpolicyError
    from mkpolicy.jsonlogs import setup_logging
    from mkpolicy.kube.client import KubeClient

    adapters = integration_adapters(args.policies, "run")
    if isinstance(adapters, int):
        return adapters
    try:
        options = ControllerOptions.from_kueue(kueue_config(args))
        config = cluster_config(args.kubeconfig, args.context)
    except MkpolicyError as exc:
        error(str(exc))
        return EXIT_USAGE
    setup_logging(args.log_level)
    workload = options.workload
    if args.label_keys_to_copy is not None:
        keys = frozenset(k for k in args.label_keys_to_copy.split(",") if k)
        workload = dataclasses.replace(workload, label_keys_to_copy=keys)
    if args.short_workload_names:
        workload = dataclasses.replace(workload, short_names=True)
    if args.no_partial_admission:
        workload = dataclasses.replace(workload, partial_admission=False)
    options = dataclasses.replace(
        options, workload=workload, wait_for_pods_ready=options.wait_for_pods_ready or args.wait_for_pods_ready
    )
    identity = f"{socket.gethostname()}_{os.getpid()}"

    async def serve() -> int:
        async with KubeClient(config, user_agent="mkpolicy-controller") as client:
            controller = Controller(
                adapters,
                client,
                identity=identity,
                lease_namespace=args.lease_namespace,
                lease_name=args.lease_name,
                options=options,
                workers=args.workers,
                leader_election=not args.no_leader_election,
            )
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)
            await controller.start(args.ops_address, args.ops_port)
            lost = asyncio.ensure_future(controller.elector.lost.wait()) if controller.elector else None
            waiting = [asyncio.ensure_future(stop.wait()), *([lost] if lost else [])]
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            for task in waiting:
                task.cancel()
            await controller.stop()
            return 3 if lost is not None and lost.done() and not lost.cancelled() else EXIT_OK

    try:
        return asyncio.run(serve())
    except MkpolicyError as exc:
        error(str(exc))
        return EXIT_USAGE
