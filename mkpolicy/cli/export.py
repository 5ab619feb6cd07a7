"""Print configuration for a set of policies.

kueue-config: the multiKueue.externalFrameworks entries of Kueue's Configuration.
rbac: a ClusterRole for the manager side (each GVK and its /status: get, list, watch,
      patch, update) and one for the workers' service account (each GVK: create,
      delete, get, list, watch; /status: get).
controller-rbac: the ClusterRoles of mkpolicy controller for the policies with
      spec.integration, and the read access Kueue's service account needs on their kinds.
admission: for each policy with spec.integration, the MutatingAdmissionPolicies and
      ValidatingAdmissionPolicies (and bindings) of Kueue's job webhook: the default
      LocalQueue, suspension at creation (marked suspended-by-kueue), managedBy
      (--managed-by), Kueue's job validation.

Policies that stock Kueue's generic adapter cannot carry (managedBy elsewhere than
/spec/managedBy, no status subresource) and kinds Kueue adapts natively are left out
with a comment saying why; --all keeps them. Exit code 0, 1 when a policy does not
load, 2 for unreadable paths.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mkpolicy export``."""
    parser.add_argument("what", choices=("kueue-config", "rbac", "admission", "controller-rbac"), help="what to print")
    parser.add_argument(
        "--policies", default="policies", metavar="DIR", help="policy file or directory (default: policies)"
    )
    parser.add_argument("--all", action="store_true", help="include policies stock Kueue cannot carry")
    parser.add_argument(
        "--name-prefix", default="mkpolicy", help="prefix of the ClusterRole or policy names (default: mkpolicy)"
    )
    admission = parser.add_argument_group("admission")
    admission.add_argument(
        "--map-version",
        choices=("v1", "v1beta1"),
        default="v1",
        help="MutatingAdmissionPolicy API version: v1 (Kubernetes 1.36+, default) or v1beta1 (1.34/1.35 with "
        "the MutatingAdmissionPolicy feature gate)",
    )
    admission.add_argument(
        "--managed-by",
        action="store_true",
        help="also set each policy's managedBy field to its MultiKueue value at creation (a manager cluster "
        "whose queues all dispatch through MultiKueue)",
    )
    admission.add_argument("--no-default-queue", action="store_true", help="leave out the default-LocalQueue policies")
    admission.add_argument(
        "--webhook",
        metavar="NAMESPACE/SERVICE",
        help="render webhook configurations for 'mkpolicy webhook' behind this Service instead of admission "
        "policies (clusters without MutatingAdmissionPolicy)",
    )
    admission.add_argument("--ca-bundle", metavar="FILE", help="with --webhook: the CA certificate of its TLS (PEM)")
    admission.add_argument(
        "--namespace-label",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="bind only in namespaces with this label (Kueue's managedJobsNamespaceSelector; repeatable)",
    )


def run(args: argparse.Namespace) -> int:
    """Print the requested configuration."""
    from mkpolicy.cli.common import EXIT_OK, report_policy_error
    from mkpolicy.errors import PolicyError
    from mkpolicy.lint.export import kueue_config, rbac, select
    from mkpolicy.policy import load

    try:
        policies = load(args.policies)
    except PolicyError as exc:
        return report_policy_error(exc)
    if args.what == "admission":
        return _admission(args, policies)
    if args.what == "controller-rbac":
        from mkpolicy.lint.export import controller_rbac

        sys.stdout.write(controller_rbac(policies, args.name_prefix))
        return EXIT_OK
    if args.what == "kueue-config":
        sys.stdout.write(kueue_config(policies, args.all))
    else:
        sys.stdout.write(rbac(policies, args.all, args.name_prefix))
    if all(s.skipped is not None for s in select(policies, args.all)):
        print("warning: no policy can be carried by stock Kueue; use --all to export them anyway", file=sys.stderr)
    return EXIT_OK


def _admission(args: argparse.Namespace, policies: list[Any]) -> int:
    from mkpolicy.cli.common import EXIT_OK, EXIT_USAGE, report_policy_error
    from mkpolicy.engine.admission_policies import (
        AdmissionOptions,
        admission_manifests,
        render,
        webhook_configurations,
    )
    from mkpolicy.errors import PolicyError

    labels = {}
    for item in args.namespace_label:
        key, sep, value = item.partition("=")
        if not sep or not key:
            print(f"mkpolicy export: --namespace-label: expected KEY=VALUE; found {item!r}", file=sys.stderr)
            return EXIT_USAGE
        labels[key] = value
    options = AdmissionOptions(
        map_version=args.map_version,
        name_prefix=args.name_prefix,
        namespace_selector={"matchLabels": labels} if labels else None,
        default_local_queue=not args.no_default_queue,
        managed_by=args.managed_by,
        managed_owner_kinds=frozenset(p.spec.framework for p in policies if p.spec.integration is not None),
    )
    chosen = [p for p in sorted(policies, key=lambda p: p.name) if p.spec.integration is not None]
    header = ["Admission policies for kinds queued by mkpolicy controller (mkpolicy export admission)."]
    header += [
        f"left out: policy {p.name} ({p.spec.framework}): no spec.integration"
        for p in policies
        if p.spec.integration is None
    ]
    manifests = []
    try:
        if args.webhook:
            namespace, sep, service = args.webhook.partition("/")
            if not sep or not namespace or not service or not args.ca_bundle:
                print("mkpolicy export: --webhook NAMESPACE/SERVICE needs --ca-bundle FILE", file=sys.stderr)
                return EXIT_USAGE
            with open(args.ca_bundle, "rb") as fh:
                manifests = webhook_configurations(chosen, (namespace, service), fh.read(), options)
        else:
            for policy in chosen:
                manifests += admission_manifests(policy, options)
    except PolicyError as exc:
        return report_policy_error(exc)
    except OSError as exc:
        print(f"mkpolicy export: --ca-bundle {args.ca_bundle!r}: {exc.strerror}", file=sys.stderr)
        return EXIT_USAGE
    if not chosen:
        print("warning: no policy has spec.integration; nothing to export", file=sys.stderr)
    sys.stdout.write(render(manifests, header))
    return EXIT_OK
