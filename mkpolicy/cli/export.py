"""Print configuration for a set of policies.

kueue-config: the multiKueue.externalFrameworks entries of Kueue's Configuration.
rbac: a ClusterRole for the manager side (each GVK and its /status: get, list, watch,
      patch, update) and one for the workers' service account (each GVK: create,
      delete, get, list, watch; /status: get).
crd-patch: the CRDs given with --crd (files, "-" for stdin) of the policies' kinds that
      would prune spec.managedBy (Argo's Workflow), with the field declared, to apply on
      the manager with server-side apply and its own field manager:
      kubectl get crd workflows.argoproj.io -o yaml | mkpolicy export crd-patch --crd - \
        | kubectl apply --server-side --force-conflicts --field-manager=mkpolicy-crd-patch -f -
argo-admission: the MutatingAdmissionPolicies the manager needs for Argo's Workflow
      (spec.managedBy from the label mkpolicy.io/managed-by: multikueue on CREATE, kept on
      UPDATE; an Argo controller instance id no manager controller serves).

Policies that stock Kueue's generic adapter cannot carry (managedBy elsewhere than
/spec/managedBy) and kinds Kueue adapts natively are left out with a comment saying why;
--all keeps them. Exit code 0, 1 when a policy does not load, 2 for unreadable paths.
"""

from __future__ import annotations

import argparse
import sys


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mkpolicy export``."""
    parser.add_argument("what", choices=("kueue-config", "rbac", "crd-patch", "argo-admission"), help="what to print")
    parser.add_argument(
        "--policies", default="policies", metavar="DIR", help="policy file or directory (default: policies)"
    )
    parser.add_argument("--all", action="store_true", help="include policies stock Kueue cannot carry")
    parser.add_argument("--name-prefix", default="mkpolicy", help="prefix of the ClusterRole names (default: mkpolicy)")
    parser.add_argument(
        "--crd",
        action="append",
        default=[],
        metavar="FILE",
        help="crd-patch: a file of CustomResourceDefinitions ('-': stdin; repeatable), e.g. the kind's release "
        "manifest or 'kubectl get crd NAME -o yaml'",
    )
    parser.add_argument(
        "--map-version",
        choices=("v1", "v1beta1"),
        default="v1",
        help="argo-admission: MutatingAdmissionPolicy API version (v1: Kubernetes 1.36+; v1beta1: 1.34/1.35 with "
        "the feature gate)",
    )
    parser.add_argument(
        "--instance-id",
        default="mkpolicy-multikueue",
        help="argo-admission: the Argo controller instance id set on the manager's Workflows; no Argo controller "
        "on the manager may serve it (default: mkpolicy-multikueue)",
    )


def run(args: argparse.Namespace) -> int:
    """Print the requested configuration."""
    from mkpolicy.cli.common import EXIT_OK, EXIT_USAGE, report_policy_error
    from mkpolicy.errors import PolicyError
    from mkpolicy.lint.export import crd_patch, kueue_config, rbac, select
    from mkpolicy.policy import load
    from mkpolicy.yamldata import load_file

    try:
        policies = load(args.policies)
    except PolicyError as exc:
        return report_policy_error(exc)
    if args.what == "crd-patch":
        if not args.crd:
            print("mkpolicy export crd-patch: expected --crd FILE (the CRDs to patch); found none", file=sys.stderr)
            return EXIT_USAGE
        try:
            crds = [doc for path in args.crd for doc in load_file(path)]
            text, notes = crd_patch(policies, crds)
        except PolicyError as exc:
            print(exc.report(), file=sys.stderr)
            return EXIT_USAGE
        sys.stdout.write(text)
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
        return EXIT_OK
    if args.what == "argo-admission":
        from mkpolicy.lint.argo_admission import ArgoAdmission, render

        try:
            sys.stdout.write(render(policies, ArgoAdmission(args.map_version, instance_id=args.instance_id)))
        except PolicyError as exc:
            return report_policy_error(exc)
        return EXIT_OK
    if args.what == "kueue-config":
        sys.stdout.write(kueue_config(policies, args.all))
    else:
        sys.stdout.write(rbac(policies, args.all, args.name_prefix))
    if all(s.skipped is not None for s in select(policies, args.all)):
        print("warning: no policy can be carried by stock Kueue; use --all to export them anyway", file=sys.stderr)
    return EXIT_OK
