"""Scaffold a FrameworkPolicy for a job kind: the policy, its test suite and example
objects (the manager's object and the worker's copy with a status), ready to pass
'mkpolicy lint' and 'mkpolicy test'.

With --crd the CRD, trimmed to what the policy needs (mkpolicy trim-schema), is written
beside the policy as DIR/<name>.schema.json and named in spec.schema: CEL is type-checked
against it, and the directory deploys as it is (a policies ConfigMap is flat, and the
schema resolves in it). The managedBy field is looked up in the CRD (/spec/managedBy,
another managedBy string field, or none: managedBy: null), and the example object fills
the CRD's required fields.

Files: DIR/<name>.yaml, DIR/<name>.test.yaml, DIR/examples/<name>.yaml,
DIR/examples/<name>-worker.yaml (and DIR/<name>.schema.json with --crd), where <name>
is <group prefix>-<kind> (for PipelineRun.v1.tekton.dev: tekton-pipelinerun). When any
of them exists, init writes nothing and exits 2 naming them; --force overwrites them.
Exit code 0, 2 for bad arguments, existing files (without --force) or unwritable files.
"""

from __future__ import annotations

import argparse
import sys


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mkpolicy init``."""
    parser.add_argument("--framework", required=True, metavar="Kind.version.group", help="the job kind")
    parser.add_argument("--crd", metavar="FILE", help="the kind's CustomResourceDefinition (YAML or JSON)")
    parser.add_argument("--dir", default=".", metavar="DIR", help="where to write the files (default: .)")
    parser.add_argument(
        "--force",
        action="store_true",
        help="overwrite existing files (without it, init writes nothing when one exists)",
    )


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
    # The directory's files (not examples/) are what the sidecar's policies ConfigMap holds.
    print(f"deploy: kubectl -n kueue-system create configmap mkpolicy-policies --from-file={args.dir}/")
    return EXIT_OK
