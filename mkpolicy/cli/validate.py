"""Check FrameworkPolicy files: YAML syntax, fields, framework GVKs, schemas and CEL.

Every policy is loaded and compiled exactly as the engine and the sidecar would; each
problem is printed as FILE:LINE:COLUMN: error: MESSAGE. Exit code 0 when every policy
is valid, 1 when a policy has problems, 2 when a path cannot be read.
"""

from __future__ import annotations

import argparse
import sys


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mkpolicy validate``."""
    parser.add_argument("paths", nargs="+", metavar="PATH", help="policy files or directories (searched recursively)")
    parser.add_argument("-q", "--quiet", action="store_true", help="print problems only")


def run(args: argparse.Namespace) -> int:
    """Validate and compile every policy under ``args.paths``."""
    from mkpolicy.cli.common import EXIT_FINDINGS, EXIT_OK, report_policy_error
    from mkpolicy.engine import compile
    from mkpolicy.errors import MkpolicyError, PolicyError
    from mkpolicy.policy import load

    try:
        policies = load(args.paths)
    except PolicyError as exc:
        return report_policy_error(exc, sys.stdout)
    failed = 0
    for policy in policies:
        try:
            compile(policy)
        except MkpolicyError as exc:
            failed += 1
            print(exc.report())
            continue
        if not args.quiet:
            print(f"{policy.file}: ok: {policy.name} ({policy.spec.framework})")
    return EXIT_FINDINGS if failed else EXIT_OK
