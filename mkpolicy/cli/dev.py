"""Developer tools: run mkpolicy's test infrastructure by hand.

  apiserver    a loopback Kubernetes API server (TLS, bearer token) to point kubectl,
               the kubernetes Python client or the sidecar at
  multikueue   a manager and worker clusters with MultiKueue configured (--real: real
               etcd, kube-apiserver and Kueue), optionally the sidecar in between
  build-peers  build the real peers (etcd, kube-apiserver, Kueue) from the peers/ Go modules

Run 'mkpolicy dev TOOL --help' for the options of a tool.
"""

from __future__ import annotations

import argparse
import sys

APISERVER_DESCRIPTION = """\
Serve a loopback Kubernetes API server on 127.0.0.1 until interrupted (Ctrl-C,
SIGTERM or SIGHUP), and write a kubeconfig for it: HTTPS with a CA generated at
start, a bearer token, the CA embedded as data (the shape Kueue accepts for
MultiKueue clusters).

It serves Namespaces, ConfigMaps, Secrets, Leases, batch/v1 Jobs and
CustomResourceDefinitions, plus every CRD given with --crd or --bundled, with
Kubernetes semantics: resourceVersion and 409 conflicts, the status subresource,
merge/JSON patches, label and field selectors, paginated lists, watches (with
resume and 410 Gone), finalizers and garbage collection. Objects live in memory and
are gone when the server stops. What it does not implement is listed in
docs/apiserver.md (no server-side apply, no controllers, no conversion webhooks).
"""

APISERVER_EPILOG = """\
examples:
  # Kueue and Tekton CRDs, a fixed port, a kubeconfig for kubectl or the sidecar
  mkpolicy dev apiserver --bundled --port 6443 --kubeconfig-out /tmp/worker1.kubeconfig
  KUBECONFIG=/tmp/worker1.kubeconfig kubectl get pipelineruns -A

  # your own CRDs (files with one or more CRD documents, or directories of them)
  mkpolicy dev apiserver --crd config/crds/ --crd extra.yaml --kubeconfig-out kc.yaml

  # from Python
  import kubernetes
  client = kubernetes.config.new_client_from_config("/tmp/worker1.kubeconfig")

exit codes: 0 after an interrupt, 2 for a bad option, CRD file or a port in use.
In tests, use mkpolicy.testing.ApiServer (or the pytest fixtures in
mkpolicy.testing.fixtures) instead: it starts in well under a second and can inject faults.
"""


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``dev`` tools as sub-subcommands."""
    parser.set_defaults(_dev_parser=parser)
    sub = parser.add_subparsers(dest="dev_command", metavar="TOOL")
    ap = sub.add_parser(
        "apiserver",
        help="serve a loopback Kubernetes API server and write its kubeconfig",
        description=APISERVER_DESCRIPTION,
        epilog=APISERVER_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--kubeconfig-out",
        required=True,
        metavar="FILE",
        help="where to write the kubeconfig (mode 0600; it holds the token)",
    )
    ap.add_argument("--port", type=int, default=0, metavar="N", help="TCP port (default: 0, any free port)")
    ap.add_argument(
        "--crd",
        action="append",
        default=[],
        metavar="FILE",
        help="serve the CRDs in FILE (YAML, several documents allowed) or in every *.yaml/*.yml of a directory; "
        "repeatable",
    )
    ap.add_argument(
        "--bundled",
        action="store_true",
        help="serve the CRDs shipped with mkpolicy: Kueue (Workload, MultiKueueCluster, MultiKueueConfig, "
        "AdmissionCheck, ClusterQueue, LocalQueue, ResourceFlavor) and Tekton PipelineRun",
    )
    ap.add_argument("--name", default="loopback", help="cluster, user and context name in the kubeconfig")
    ap.add_argument("--token", help="the bearer token clients must send (default: a random one)")
    ap.add_argument(
        "--namespace",
        action="append",
        default=[],
        metavar="NAME",
        help="create this namespace at start (besides default, kube-system, kube-public, kube-node-lease); repeatable",
    )
    from mkpolicy.cli import dev_multikueue

    dev_multikueue.configure(sub)


def run(args: argparse.Namespace) -> int:
    """Dispatch to the tool named on the command line."""
    if args.dev_command is None:
        args._dev_parser.print_help(sys.stderr)
        return 2
    if args.dev_command in ("multikueue", "build-peers"):
        from mkpolicy.cli import dev_multikueue

        return dev_multikueue.multikueue(args) if args.dev_command == "multikueue" else dev_multikueue.build_peers(args)
    return _apiserver(args)


def _apiserver(args: argparse.Namespace) -> int:
    from mkpolicy.cli.common import EXIT_OK, EXIT_USAGE, error
    from mkpolicy.cli.dev_serve import crd_files, until_interrupted
    from mkpolicy.errors import MkpolicyError
    from mkpolicy.testing.apiserver import DEFAULT_NAMESPACES, ApiServer

    if not 0 <= args.port <= 65535:
        error(f"--port must be between 0 and 65535, found {args.port}")
        return EXIT_USAGE
    try:
        server = ApiServer(
            args.name,
            crds=crd_files(args.crd),
            bundled=args.bundled,
            port=args.port,
            token=args.token,
            namespaces=(*DEFAULT_NAMESPACES, *args.namespace),
        )
    except MkpolicyError as exc:
        print(exc.report(), file=sys.stderr)
        return EXIT_USAGE
    except FileNotFoundError as exc:
        error(exc)
        return EXIT_USAGE
    try:
        server.start()
    except OSError as exc:
        error(f"cannot listen on 127.0.0.1:{args.port}: {exc.strerror or exc}")
        return EXIT_USAGE
    try:
        try:
            server.write_kubeconfig(args.kubeconfig_out)
        except OSError as exc:
            error(f"cannot write the kubeconfig to {args.kubeconfig_out}: {exc.strerror or exc}")
            return EXIT_USAGE
        kinds = sorted(f"{rt.kind}.{rt.group or 'core'}" for rt in server.resource_types())
        until_interrupted([
            f"serving {server.url} (cluster {server.name!r}); kubeconfig: {args.kubeconfig_out}",
            f"resources: {', '.join(kinds)}",
        ])  # fmt: skip
    finally:
        server.stop()
    print("stopped", flush=True)
    return EXIT_OK
