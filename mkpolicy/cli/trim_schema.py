"""Write a CustomResourceDefinition (or a bare OpenAPI v3 schema) trimmed to what a
policy needs, small enough for the policies ConfigMap (1 MiB for all its files).

The output keeps the framework's version only, with its schema minus descriptions,
examples and titles: validation ('mkpolicy test' checks worker copies against it), CEL
type checking and ApplyConfiguration merges see exactly what they saw in the original.
Other versions, printer columns and conversion settings are dropped. A bare schema loses
its documentation keywords only. The output is
compact JSON (it loads faster than YAML); name it in the policy's spec.schema and put it
in the same ConfigMap as the policy, e.g.:

  mkpolicy trim-schema crds/trainingrun.yaml --framework TrainingRun.v1.ml.example.com \\
      -o my-policies/trainingrun.schema.json

Lint (MKP109) says when a schema is too big to deploy. Exit code 0, 2 for unreadable
input or a CRD of another kind.
"""

from __future__ import annotations

import argparse
import sys


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mkpolicy trim-schema``."""
    parser.add_argument("crd", metavar="CRD", help="the kind's CustomResourceDefinition or OpenAPI schema (YAML, JSON)")
    parser.add_argument("--framework", required=True, metavar="Kind.version.group", help="the policy's framework")
    parser.add_argument("-o", "--output", metavar="FILE", help="write here (default: standard output)")


def run(args: argparse.Namespace) -> int:
    """Trim the CRD and write it."""
    import json

    from mkpolicy.cli.common import EXIT_OK, EXIT_USAGE, error
    from mkpolicy.errors import MkpolicyError
    from mkpolicy.lint.scaffold import crd_schema
    from mkpolicy.policy import parse_gvk
    from mkpolicy.structural import read_schema_document
    from mkpolicy.structural.trim import trim_crd, trim_schema

    try:
        gvk = parse_gvk(args.framework)
    except ValueError as exc:
        error(f"--framework: {exc}")
        return EXIT_USAGE
    try:
        document = read_schema_document(args.crd)
        if isinstance(document, dict) and document.get("kind") == "CustomResourceDefinition":
            crd_schema(document, gvk, args.crd)  # the framework's CRD, serving its version
            trimmed = trim_crd(document, gvk.version, args.crd)
        else:
            trimmed = trim_schema(document)
        text = json.dumps(trimmed, separators=(",", ":")) + "\n"
    except MkpolicyError as exc:
        print(exc.report(), file=sys.stderr)
        return EXIT_USAGE
    if args.output is None:
        sys.stdout.write(text)
        return EXIT_OK
    try:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        error(f"cannot write {args.output}: {exc.strerror or exc}")
        return EXIT_USAGE
    print(f"wrote {args.output} ({len(text.encode()):,} bytes)", file=sys.stderr)
    return EXIT_OK
