"""Explain what a policy does: how it decides an object is managed, what each variable
and patch reads (the fields, from the CEL syntax tree) and writes (JSONPatch paths and
ApplyConfiguration fields), phase by phase, and what its failure policy means.

POLICY is a policy file or a directory (every policy in it is explained). Exit code 0,
1 when a policy does not load, 2 for unreadable paths.
"""

from __future__ import annotations

import argparse
import sys


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mkpolicy explain``."""
    parser.add_argument("policies", nargs="+", metavar="POLICY", help="policy files or directories")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text", help="output format")


def run(args: argparse.Namespace) -> int:
    """Explain every policy under ``args.policies``."""
    import json

    from mkpolicy.cli.common import EXIT_OK, report_policy_error
    from mkpolicy.errors import PolicyError
    from mkpolicy.lint.explain import explain, render_text
    from mkpolicy.policy import load

    try:
        policies = load(args.policies)
    except PolicyError as exc:
        return report_policy_error(exc)
    infos = [explain(p) for p in policies]
    if args.output == "json":
        sys.stdout.write(json.dumps(infos if len(infos) > 1 else infos[0], indent=2) + "\n")
    else:
        sys.stdout.write("\n".join(render_text(info).rstrip("\n") + "\n" for info in infos))
    return EXIT_OK
