"""Run policy test suites (docs/policy-tests.md).

PATH is a directory (searched recursively for *.test.yaml), a suite file, or a policy
file (its <stem>.test.yaml runs); the default is the current directory. Each case runs
the policy through the engine (create or sync) and compares the outcome with its
expectation: the worker copy, the status patch, "not managed" or an error.

--update-snapshots records the actual worker copies and status patches as the expected
ones (comments and formatting of the suite are kept). --junit writes a JUnit XML report.
--require-suites fails when a policy file under a PATH directory has no suite.
--output json prints the run as one JSON document (suites, cases, failures with their
messages and diffs, counts, the exit code) instead of the text report.

Exit code 0 when every case passed, 1 when a case failed or a suite is broken, 2 for
unreadable paths or no suites at all.
"""

from __future__ import annotations

import argparse
import os
import sys


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mkpolicy test``."""
    parser.add_argument("paths", nargs="*", metavar="PATH", help="suites, policies or directories (default: .)")
    parser.add_argument(
        "--update-snapshots", action="store_true", help="record actual worker copies and status patches"
    )
    parser.add_argument("--junit", metavar="FILE", help="write a JUnit XML report to FILE")
    parser.add_argument("-k", dest="name_filter", metavar="TEXT", help="only cases whose name contains TEXT")
    parser.add_argument(
        "--require-suites", action="store_true", help="fail when a policy under a PATH directory has no suite"
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="print failing cases only")
    parser.add_argument(
        "--color", choices=("auto", "always", "never"), default="auto", help="colour the report (default: auto)"
    )
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text", help="report format")


def run(args: argparse.Namespace) -> int:
    """Run the suites under ``args.paths``."""
    from mkpolicy.cli.common import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, error
    from mkpolicy.errors import MkpolicyError
    from mkpolicy.lint.suite.report import format_run, json_report, junit_xml, summary
    from mkpolicy.lint.suite.runner import run_paths
    from mkpolicy.lint.suite.snapshots import update_snapshots

    paths = args.paths or ["."]
    result = run_paths(paths, name_filter=args.name_filter, require_suites=args.require_suites)
    updated = 0
    if args.update_snapshots:
        try:
            updated = update_snapshots(result)
        except MkpolicyError as exc:
            print(exc.report(), file=sys.stderr)
            return EXIT_USAGE
    if args.junit:
        try:
            with open(args.junit, "w", encoding="utf-8") as fh:
                fh.write(junit_xml(result))
        except OSError as exc:
            error(f"cannot write {args.junit}: {exc.strerror or exc}")
            return EXIT_USAGE
    code = EXIT_OK if result.ok else EXIT_FINDINGS
    problem = None
    if result.input_errors or not result.suites:
        code = EXIT_USAGE
        if not result.suites and not result.input_errors:
            problem = "no test suites found"
    elif args.name_filter and not any(suite.cases for suite in result.suites):
        code, problem = EXIT_USAGE, f"-k {args.name_filter!r}: no case name contains it"
    if args.output == "json":
        sys.stdout.write(json_report(result, updated, code))
    else:
        color = args.color == "always" or (
            args.color == "auto" and sys.stdout.isatty() and "NO_COLOR" not in os.environ
        )
        sys.stdout.write(format_run(result, color=color, quiet=args.quiet))
        for file in result.uncovered:
            print(f"{file}: error: policy file has no test suite (expected a suite whose spec.policy names it)")
        for input_error in result.input_errors:
            print(input_error.report(), file=sys.stderr)
        print(summary(result, updated), file=sys.stderr if args.quiet else sys.stdout)
    if problem is not None:
        error(problem)
    return code
