"""Entry point of the ``mkpolicy`` command.

Subcommands live in their own modules (``mkpolicy.cli.<name>``) with two functions:
``configure(parser)`` adds arguments (cheap, no heavy imports) and ``run(args) -> int``
does the work, importing what it needs. ``mkpolicy --help`` therefore loads nothing
but argparse.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

#: (name, module, one-line help), in the order ``--help`` lists them.
COMMANDS: list[tuple[str, str, str]] = [
    ("validate", "mkpolicy.cli.validate", "check policies with every error rule of lint, as the sidecar loads them"),
    ("apply", "mkpolicy.cli.apply", "dry run: the worker copy (create) or status patch (sync) of an object"),
    ("lint", "mkpolicy.cli.lint", "lint policies: stable rule IDs, text/json/sarif/github reports"),
    ("test", "mkpolicy.cli.test", "run policy test suites (*.test.yaml); --update-snapshots, --junit"),
    ("init", "mkpolicy.cli.init", "scaffold a policy, its test suite and an example object"),
    ("explain", "mkpolicy.cli.explain", "what a policy does: per phase, the fields each patch reads and writes"),
    ("export", "mkpolicy.cli.export", "print Kueue configuration, RBAC, CRD patches or Argo's admission policies"),
    ("schema", "mkpolicy.cli.schema", "print the JSON Schema of FrameworkPolicy documents"),
    ("trim-schema", "mkpolicy.cli.trim_schema", "write a CRD trimmed to what a policy needs (fits a ConfigMap)"),
    ("eval", "mkpolicy.cli.eval", "evaluate a CEL expression against objects and print the result as JSON"),
    ("sidecar", "mkpolicy.cli.sidecar", "run the policies on the wire between the Kueue manager and its workers"),
    ("controller", "mkpolicy.cli.controller", "queue the kinds of policies with spec.integration with Kueue (no Go)"),
    ("webhook", "mkpolicy.cli.webhook", "serve the admission of 'export admission' as webhooks (clusters without MAP)"),
    ("demo", "mkpolicy.cli.demo", "MultiKueue + the sidecar end to end on loopback API servers, in seconds"),
    ("dev", "mkpolicy.cli.dev", "developer tools: a loopback API server, a local MultiKueue (real Kueue with --real)"),
    ("completion", "mkpolicy.cli.completion", "print a bash or zsh completion script"),
]

EPILOG = """\
examples:
  mkpolicy lint policies/                       # rules MKP1xx-MKP5xx, see docs/lint-rules.md
  mkpolicy test policies/                       # run the *.test.yaml suites next to the policies
  mkpolicy apply --policy policies/ --phase create -f examples/tekton/pipelinerun.yaml -o diff
  mkpolicy apply --policy policies/ --phase sync -f manager.yaml --worker-object worker.yaml
  mkpolicy eval 'object.spec.?managedBy.orValue("")' --var object=examples/tekton/pipelinerun.yaml
  mkpolicy init --framework PipelineRun.v1.tekton.dev --crd crd.yaml

exit codes: 0 success, 1 findings or a failing policy, 2 usage or input error.
Run 'mkpolicy COMMAND --help' for the options of a command.
"""


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (subcommand modules are imported, their work is not)."""
    parser = argparse.ArgumentParser(
        prog="mkpolicy",
        description="Declarative FrameworkPolicies for Kueue MultiKueue: author, lint, test and run "
        "CEL creation and sync patches for job kinds Kueue does not know natively.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version="%(prog)s 0.1.0")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name, help_text in COMMANDS:
        module = importlib.import_module(module_name)
        child = sub.add_parser(
            name,
            help=help_text,
            description=module.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.configure(child)
        child.set_defaults(_module=module_name)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    module = importlib.import_module(args._module)
    try:
        code: int = module.run(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
