"""Scaffold a FrameworkPolicy for a job kind: the policy, its test suite and example
objects (the manager's object and the worker's copy with a status), ready to pass
'mkpolicy lint' and 'mkpolicy test'.

With --crd the policy names the CRD as its schema (CEL is type-checked against it), the
managedBy field is looked up in it (/spec/managedBy, another managedBy string field, or
none: managedBy: null), and the example object fills the CRD's required fields.

Files: DIR/<name>.yaml, DIR/<name>.test.yaml, DIR/examples/<name>.yaml and
DIR/examples/<name>-worker.yaml, where <name> is <group prefix>-<kind> (for
PipelineRun.v1.tekton.dev: tekton-pipelinerun). Existing files are kept unless --force.
Exit code 0, 2 for bad arguments or unwritable files.
"""

from __future__ import annotations

import argparse
import sys


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mkpolicy init``."""
    parser.add_argument("--framework", required=True, metavar="Kind.version.group", help="the job kind")
    parser.add_argument("--crd", metavar="FILE", help="the kind's CustomResourceDefinition (YAML or JSON)")
    parser.add_argument("--dir", default=".", metavar="DIR", help="where to write the files (default: .)")
    parser.add_argument("--force", action="store_true", help="overwrite existing files")


def run(args: argparse.Namespace) -> int:
    """Write the scaffold."""
    from mkpolicy.cli.common import EXIT_OK, EXIT_USAGE, error
    from mkpolicy.errors import MkpolicyError
    from mkpolicy.lint.scaffold import scaffold, write

    try:
        files = write(scaffold(args.framework, args.dir, args.crd), force=args.force)
    except ValueError as exc:
        error(f"--framework: {exc}")
        return EXIT_USAGE
    except MkpolicyError as exc:
        print(exc.report(), file=sys.stderr)
        return EXIT_USAGE
    for path in files:
        print(f"created {path}")
    print(f"next: mkpolicy lint {args.dir} && mkpolicy test {args.dir}")
    return EXIT_OK
