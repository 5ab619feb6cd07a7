"""Check FrameworkPolicy files: YAML syntax, fields, framework GVKs, schemas and CEL.

Every policy is checked by every error-severity lint rule (docs/lint-rules.md) and
compiled exactly as the engine and the sidecar compile it: what this command accepts,
'mkpolicy sidecar' loads, and what it refuses, the sidecar refuses too, with the same
lines. Each problem is printed as FILE:LINE:COLUMN: error RULE MESSAGE; warnings are
only counted ('mkpolicy lint' shows them). --output json prints one JSON document
instead: the valid policies, the errors (as 'mkpolicy lint --format json' reports
findings), the input errors, the warning count and the exit code. Exit code 0 when every
policy is valid, 1 when a policy has errors, 2 when a path cannot be read.
"""

from __future__ import annotations

import argparse
import sys


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mkpolicy validate``."""
    parser.add_argument("paths", nargs="+", metavar="PATH", help="policy files or directories (searched recursively)")
    parser.add_argument("-q", "--quiet", action="store_true", help="print problems only")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text", help="report format")


def run(args: argparse.Namespace) -> int:
    """Check and compile every policy under ``args.paths``."""
    from mkpolicy.check import check
    from mkpolicy.cli.common import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE

    run = check(args.paths)
    result = run.result
    code = EXIT_USAGE if result.input_errors else EXIT_FINDINGS if result.count("error") else EXIT_OK
    if args.output == "json":
        import json

        from mkpolicy.lint.formats import format_json

        lint = json.loads(format_json(result))
        report = {
            "policies": [{"file": a.policy.file, "name": a.name, "framework": str(a.gvk)} for a in run.adapters],
            "errors": [f for f in lint["findings"] if f["severity"] == "error"],
            "inputErrors": lint["inputErrors"],
            "warnings": result.count("warning"),
            "exitCode": code,
        }
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
        return code
    for problem in result.input_errors:
        print(problem.report(), file=sys.stderr)
    for finding in result.findings:
        if finding.severity == "error":
            print(finding.report())
    if not args.quiet:
        for adapter in run.adapters:
            print(f"{adapter.policy.file}: ok: {adapter.name} ({adapter.gvk})")
        warnings = result.count("warning")
        if warnings:
            print(f"{warnings} warning{'s' * (warnings != 1)}: 'mkpolicy lint' shows them", file=sys.stderr)
    return code
