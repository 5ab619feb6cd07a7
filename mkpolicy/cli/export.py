"""Print configuration for a set of policies.

kueue-config: the multiKueue.externalFrameworks entries of Kueue's Configuration.
rbac: a ClusterRole for the manager side (each GVK and its /status: get, list, watch,
      patch, update) and one for the workers' service account (each GVK: create,
      delete, get, list, watch; /status: get).

wire-contract: the sidecar's wire contract (what it forwards to a worker) as a Markdown
      table (docs/architecture.md holds it).

Policies that stock Kueue's generic adapter cannot carry (managedBy elsewhere than
/spec/managedBy, no status subresource) and kinds Kueue adapts natively are left out
with a comment saying why; --all keeps them. Exit code 0, 1 when a policy does not
load, 2 for unreadable paths.
"""

from __future__ import annotations

import argparse
import sys


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mkpolicy export``."""
    parser.add_argument("what", choices=("kueue-config", "rbac", "wire-contract"), help="what to print")
    parser.add_argument(
        "--policies", default="policies", metavar="DIR", help="policy file or directory (default: policies)"
    )
    parser.add_argument("--all", action="store_true", help="include policies stock Kueue cannot carry")
    parser.add_argument("--name-prefix", default="mkpolicy", help="prefix of the ClusterRole names (default: mkpolicy)")


def run(args: argparse.Namespace) -> int:
    """Print the requested configuration."""
    from mkpolicy.cli.common import EXIT_OK, report_policy_error
    from mkpolicy.errors import PolicyError
    from mkpolicy.lint.export import kueue_config, rbac, select
    from mkpolicy.policy import load

    if args.what == "wire-contract":
        from mkpolicy.sidecar.contract import render_markdown

        sys.stdout.write(render_markdown())
        return EXIT_OK
    try:
        policies = load(args.policies)
    except PolicyError as exc:
        return report_policy_error(exc)
    if args.what == "kueue-config":
        sys.stdout.write(kueue_config(policies, args.all))
    else:
        sys.stdout.write(rbac(policies, args.all, args.name_prefix))
    if all(s.skipped is not None for s in select(policies, args.all)):
        print("warning: no policy can be carried by stock Kueue; use --all to export them anyway", file=sys.stderr)
    return EXIT_OK
