"""Print the JSON Schema of FrameworkPolicy documents (draft 2020-12), or of the
sidecar's configuration file (--kind SidecarConfig), or the SidecarConfig reference page
(--kind SidecarConfig --format markdown).

Editors use the schemas through a comment at the top of a file:

  # yaml-language-server: $schema=../schemas/frameworkpolicy.schema.json

The repository's schemas/frameworkpolicy.schema.json, schemas/sidecarconfig.schema.json
and docs/sidecar-config.md are these outputs, generated from the models; regenerate them
with:

  mkpolicy schema > schemas/frameworkpolicy.schema.json
  mkpolicy schema --kind SidecarConfig > schemas/sidecarconfig.schema.json
  mkpolicy schema --kind SidecarConfig --format markdown > docs/sidecar-config.md
"""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mkpolicy schema``."""
    parser.add_argument(
        "--kind", choices=["FrameworkPolicy", "SidecarConfig"], default="FrameworkPolicy", help="which document"
    )
    parser.add_argument(
        "--format",
        choices=["json-schema", "markdown"],
        default="json-schema",
        help="a JSON Schema, or the reference page (SidecarConfig only)",
    )


def run(args: argparse.Namespace) -> int:
    """Print the schema or the reference page."""
    import sys

    from mkpolicy.cli.common import EXIT_OK, EXIT_USAGE, error

    if args.kind == "FrameworkPolicy":
        if args.format != "json-schema":
            error("--format markdown: the FrameworkPolicy reference is docs/policy-format.md")
            return EXIT_USAGE
        from mkpolicy.policy.jsonschema import render

        sys.stdout.write(render())
        return EXIT_OK
    from mkpolicy.sidecar.config_reference import render_markdown, render_schema

    sys.stdout.write(render_markdown() if args.format == "markdown" else render_schema())
    return EXIT_OK
