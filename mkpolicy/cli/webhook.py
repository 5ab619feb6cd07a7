"""Serve the admission of 'mkpolicy export admission' as admission webhooks (AdmissionReview v1),
for clusters without MutatingAdmissionPolicy: the same CEL, evaluated by mkpolicy.

POST /mutate: the default LocalQueue (read from the cluster with --kubeconfig or the pod's
service account), suspension at creation with the suspended-by-kueue marker, managedBy
(--managed-by); POST /validate: Kueue's job validation. Kueue's configuration is followed as in
'mkpolicy export admission' (--kueue-config...): the namespace's labels are read for
managedJobsNamespaceSelector. 'mkpolicy export admission --webhook
NAMESPACE/SERVICE --ca-bundle FILE' renders the webhook configurations that call it.

Exit codes: 0 clean shutdown (SIGTERM), 1 invalid policies, 2 bad arguments.
"""

from __future__ import annotations

import argparse

from mkpolicy.cli.common import add_kueue_config_arguments


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mkpolicy webhook``."""
    parser.add_argument("--policies", required=True, metavar="DIR", help="policy file or directory")
    parser.add_argument("--tls-cert", required=True, metavar="FILE", help="serving certificate (PEM)")
    parser.add_argument("--tls-key", required=True, metavar="FILE", help="its private key (PEM)")
    parser.add_argument("--address", default="0.0.0.0", help="listen address (default 0.0.0.0)")
    parser.add_argument("--port", type=int, default=9443, help="listen port (default 9443)")
    parser.add_argument(
        "--kubeconfig", metavar="FILE", help="to read default LocalQueues and namespaces (default: in-cluster)"
    )
    parser.add_argument("--no-default-queue", action="store_true", help="do not default the LocalQueue")
    parser.add_argument("--managed-by", action="store_true", help="set managedBy to MultiKueue at creation")
    parser.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    add_kueue_config_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Serve until SIGTERM."""
    import asyncio
    import signal
    import ssl

    from aiohttp import web

    from mkpolicy.cli.common import EXIT_OK, EXIT_USAGE, cluster_config, error, integration_adapters, kueue_config
    from mkpolicy.controller.webhook import AdmissionWebhook, server_tls
    from mkpolicy.engine.admission_policies import AdmissionOptions
    from mkpolicy.errors import MkpolicyError
    from mkpolicy.jsonlogs import setup_logging
    from mkpolicy.kube.client import KubeClient

    adapters = integration_adapters(args.policies, "serve")
    if isinstance(adapters, int):
        return adapters
    try:
        tls = server_tls(args.tls_cert, args.tls_key)
        kueue = kueue_config(args)
        # The cluster is read for default LocalQueues and namespace labels (managedJobsNamespaceSelector).
        reads = not args.no_default_queue or kueue.manage_jobs_without_queue_name or args.kubeconfig is not None
        config = cluster_config(args.kubeconfig) if reads else None
    except (MkpolicyError, OSError, ssl.SSLError) as exc:
        error(str(exc))
        return EXIT_USAGE
    setup_logging(args.log_level)
    options = AdmissionOptions(default_local_queue=not args.no_default_queue, managed_by=args.managed_by, kueue=kueue)

    async def serve() -> int:
        client = KubeClient(config, user_agent="mkpolicy-webhook") if config is not None else None
        webhook = AdmissionWebhook(adapters, options, client)
        runner = web.AppRunner(webhook.app(), access_log=None)
        await runner.setup()
        await web.TCPSite(runner, args.address, args.port, ssl_context=tls).start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        await runner.cleanup()
        if client is not None:
            await client.close()
        return EXIT_OK

    return asyncio.run(serve())
