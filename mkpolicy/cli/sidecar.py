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
mkpolicy export crd-patch) and how its status travels, which workers Kueue reaches
without the sidecar (their MultiKueueCluster Secret points elsewhere), then
verifies with SelfSubjectAccessReviews on the manager and every worker the RBAC the sidecar
and Kueue's requests need for the policy kinds (each missing permission with the cluster,
verb and resource), prints the wire contract in force (every request shape forwarded to a
worker; anything else is answered 403, see wire.allow), then exits. It fails (exit 1) when
a policy's kind is not served by the manager, or when Kueue dispatches a kind whose policy
is not active (a policy names a kind close to it: a typo); the running sidecar refuses
creations of such kinds. --strict also fails on every warning and on what it could not
check; --output json prints the report as JSON.
--init-state DIR writes the CA, serving certificate and worker tokens to DIR and exits:
several Kueue replicas then share them (a Secret mounted as state.dir).

Exit codes: 0 clean shutdown (--check: nothing wrong), 1 invalid policies (--check: an error
finding; with --strict a warning too), 2 invalid configuration or kubeconfig (--check: also
a missing permission).
"""

from __future__ import annotations

import argparse
import sys


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
    parser.add_argument(
        "--strict",
        action="store_true",
        help="with --check: fail on any warning, and on whatever could not be checked (workers, Kueue's configuration)",
    )
    parser.add_argument(
        "-o", "--output", choices=("text", "json"), default="text", help="with --check: the report's format"
    )


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
        from mkpolicy.cli.sidecar_check import build_report, print_report

        return print_report(asyncio.run(build_report(config, adapters)), args.output, args.strict)

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
