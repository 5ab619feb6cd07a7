"""Lint FrameworkPolicy files: document errors, CEL syntax and types against the framework's
schema, managedBy, what patches write against the schema, patches that break invariants,
cost, unused variables, and format features stock Kueue's generic adapter cannot honour.

Each finding has a stable rule ID (MKP101...), documented in docs/lint-rules.md, and the
position of the offending token in the YAML file. The errors are exactly what 'mkpolicy
validate', 'mkpolicy sidecar --check' and the sidecar refuse (one checker). Silence rules
with --disable (this report only), or per policy with the annotation
lint.mkpolicy.io/disable: "MKP401, MKP405" (everywhere; not the rules the engine enforces).

Exit code 0 when nothing at or above --fail-on was found, 1 when something was, 2 for
unreadable paths and usage errors.
"""

from __future__ import annotations

import argparse
import sys

FORMATS = ("text", "json", "sarif", "github")


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mkpolicy lint``."""
    parser.add_argument("paths", nargs="*", metavar="PATH", help="policy files or directories (searched recursively)")
    parser.add_argument("-f", "--format", choices=FORMATS, default="text", help="report format (default: text)")
    parser.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE instead of stdout")
    parser.add_argument(
        "--fail-on",
        choices=("error", "warning"),
        default="error",
        help="exit 1 when a finding at least this severe is reported (default: error)",
    )
    parser.add_argument(
        "--disable",
        action="append",
        default=[],
        metavar="RULES",
        help="comma-separated rule IDs not to report (repeatable), e.g. --disable MKP401,MKP405",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="no summary line on stderr")
    parser.add_argument("--list-rules", action="store_true", help="print the rule catalog and exit")


def run(args: argparse.Namespace) -> int:
    """Lint ``args.paths`` and print the report."""
    from mkpolicy.check.rules import RULES
    from mkpolicy.cli.common import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, error

    if args.list_rules:
        for rule in RULES.values():
            print(f"{rule.id}  {rule.severity:<7}  {rule.name:<28}  {rule.summary}")
        return EXIT_OK
    if not args.paths:
        error("lint needs at least one PATH (a policy file or directory)")
        return EXIT_USAGE
    disable = {token.strip().upper() for value in args.disable for token in value.split(",") if token.strip()}
    unknown = sorted(disable - RULES.keys())
    if unknown:
        error(f"--disable: unknown rule ID(s) {', '.join(unknown)}; see 'mkpolicy lint --list-rules'")
        return EXIT_USAGE

    from mkpolicy.check import check_paths
    from mkpolicy.lint.formats import render, summary

    result = check_paths(args.paths, disable)
    report = render(result, args.format)
    if args.output:
        try:
            with open(args.output, "w", encoding="utf-8") as fh:
                fh.write(report)
        except OSError as exc:
            error(f"cannot write {args.output}: {exc.strerror or exc}")
            return EXIT_USAGE
    else:
        sys.stdout.write(report)
    if args.format != "github":
        for problem in result.input_errors:
            print(problem.report(), file=sys.stderr)
    if not args.quiet:
        print(summary(result), file=sys.stderr)
    if result.input_errors:
        return EXIT_USAGE
    return EXIT_FINDINGS if result.fails(args.fail_on) else EXIT_OK
