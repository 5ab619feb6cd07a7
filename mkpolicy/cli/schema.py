"""Print the JSON Schema of FrameworkPolicy documents (draft 2020-12).

Editors use it through the comment at the top of a policy file:

  # yaml-language-server: $schema=../schemas/frameworkpolicy.schema.json

The repository's schemas/frameworkpolicy.schema.json is this output.
"""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mkpolicy schema`` (none)."""


def run(args: argparse.Namespace) -> int:
    """Print the schema."""
    import sys

    from mkpolicy.policy.jsonschema import render

    sys.stdout.write(render())
    return 0
