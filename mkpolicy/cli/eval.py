"""Evaluate one CEL expression in the Kubernetes dialect and print the result as JSON.

Variables come from --var NAME=VALUE, where VALUE is a YAML or JSON file (a
Kubernetes object, say) or an inline JSON value. With --schema NAME=FILE (a CRD or an
OpenAPI v3 schema) the expression is also type-checked against the schema of that
variable; type errors are printed as warnings.

The variables a policy sees on the wire are bound as the engine binds them:
workloadName (--workload-name, default ""), origin (--origin, default multikueue),
cluster (--cluster, default ""), now (--now RFC3339, default the current time: UTC,
whole seconds, as in a create or sync) and workload and params (null unless given with
--var). A --var of the same name takes precedence. Errors are printed with their line and
column in the expression. Exit code 0 on success, 1 when the expression fails to
parse, compile or evaluate, 2 for unusable input.

examples:
  mkpolicy eval '1 + 2'
  mkpolicy eval 'object.spec.?taskRunTemplate.?serviceAccountName.orValue("default")' --var object=run.yaml
  mkpolicy eval 'params.replicas * 2' --var 'params={"replicas": 3}'
  mkpolicy eval 'object.spec.tasks.map(t, t.name)' --var object=run.yaml --schema object=crd.yaml --cost
  mkpolicy eval '{"mkpolicy.io/dispatched-to": cluster, "at": string(now)}' --cluster worker1
"""

from __future__ import annotations

import argparse
from typing import Any


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mkpolicy eval``."""
    parser.add_argument("expression", metavar="EXPR", help="the CEL expression ('-' reads it from stdin)")
    parser.add_argument(
        "--var",
        action="append",
        default=[],
        metavar="NAME=FILE|JSON",
        help="bind variable NAME to the object in FILE (YAML or JSON) or to an inline JSON value; repeatable",
    )
    parser.add_argument(
        "--schema",
        action="append",
        default=[],
        metavar="NAME=FILE",
        help="type-check variable NAME against FILE (a CRD or an OpenAPI v3 schema); repeatable",
    )
    parser.add_argument("-o", "--output", choices=["json", "yaml"], default="json", help="result format")
    parser.add_argument("--workload-name", default="", metavar="NAME", help="workloadName (default: empty)")
    parser.add_argument("--origin", default=None, metavar="NAME", help="origin (default: multikueue)")
    parser.add_argument("--cluster", default="", metavar="NAME", help="cluster, the worker's name (default: empty)")
    parser.add_argument("--now", default=None, metavar="RFC3339", help="now (default: the current time, UTC)")
    parser.add_argument(
        "--cost", action="store_true", help="print the estimated (worst case) and actual cost to stderr"
    )


def run(args: argparse.Namespace) -> int:
    """Evaluate ``args.expression`` with the variables of ``args.var``."""
    import sys

    from mkpolicy.cel import PER_CALL_LIMIT, CelError, Environment, Program, estimate_cost, typecheck
    from mkpolicy.cel.convert import to_cel
    from mkpolicy.cel.errors import CelExpressionError
    from mkpolicy.cel.runtime import Budget
    from mkpolicy.cli.common import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, dump, error
    from mkpolicy.errors import MkpolicyError

    expression = sys.stdin.read() if args.expression == "-" else args.expression
    try:
        variables = {name: _load_value(name, value) for name, value in (_split(v, "--var") for v in args.var)}
        schemas = {name: _load_schema(path) for name, path in (_split(v, "--schema") for v in args.schema)}
    except MkpolicyError as exc:
        error(exc)
        return EXIT_USAGE
    try:
        wire = _wire_variables(args)
    except MkpolicyError as exc:
        error(exc)
        return EXIT_USAGE
    unknown = sorted(set(schemas) - set(variables))
    if unknown:
        error(f"--schema names variables that have no --var: {', '.join(unknown)}")
        return EXIT_USAGE
    try:
        program = Program(expression, Environment.of({*variables, *wire}))
    except CelExpressionError as exc:
        _report(exc, expression)
        return EXIT_FINDINGS
    if schemas:
        for problem in typecheck(program, schemas):
            _report(problem, expression, severity="warning")
    budget = Budget(PER_CALL_LIMIT)
    try:
        bound = {**wire, **{name: to_cel(value) for name, value in variables.items()}}
        result = program.evaluate(bound, budget=budget)
    except CelExpressionError as exc:
        _report(exc, expression)
        return EXIT_FINDINGS
    except CelError as exc:
        error(exc)
        return EXIT_FINDINGS
    if args.cost:
        estimate = estimate_cost(program, schemas)
        print(
            f"cost: actual {budget.used}, estimated worst case {estimate} (limit {PER_CALL_LIMIT})",
            file=sys.stderr,
        )
    output = _output(result)
    scalar = not isinstance(output, (dict, list))
    # YAML would end a scalar document with "...": scalars print as JSON either way.
    sys.stdout.write(dump(output, "json" if scalar else args.output))
    return EXIT_OK


def _wire_variables(args: argparse.Namespace) -> dict[str, Any]:
    """workloadName, origin, cluster, now, workload and params as a create or sync binds them."""
    import datetime as dt

    from mkpolicy.cel.values import Timestamp
    from mkpolicy.engine.context import DEFAULT_ORIGIN, Context
    from mkpolicy.errors import InputError

    now = None
    if args.now is not None:
        try:
            now = dt.datetime.fromisoformat(args.now.replace("Z", "+00:00"))
        except ValueError:
            raise InputError(f"--now: expected an RFC 3339 time (2026-11-26T10:00:00Z); found {args.now!r}") from None
        if now.tzinfo is None:
            raise InputError(f"--now: expected a time with a zone (Z or +01:00); found {args.now!r}")
    ctx = Context(args.workload_name, args.origin or DEFAULT_ORIGIN, args.cluster, now=now)
    return {
        "workloadName": ctx.workload_name,
        "origin": ctx.origin,
        "cluster": ctx.cluster,
        "now": Timestamp.from_datetime(ctx.timestamp()),
        "workload": None,
        "params": None,
    }


def _split(text: str, option: str) -> tuple[str, str]:
    from mkpolicy.errors import InputError

    name, sep, value = text.partition("=")
    if not sep or not name:
        raise InputError(f"{option} expects NAME=VALUE, got {text!r}")
    return name.strip(), value


def _load_value(name: str, value: str) -> Any:
    """A file (YAML or JSON) when VALUE names one, otherwise inline JSON."""
    import json
    import os

    from mkpolicy.errors import InputError, Location
    from mkpolicy.yamldata import load_file

    if os.path.isfile(value):
        try:
            docs = load_file(value)
        except InputError as exc:
            raise InputError(f"--var {name}: {exc.message}", exc.location) from None
        if len(docs) != 1:
            raise InputError(f"--var {name}: {value} holds {len(docs)} documents, expected one", Location(value))
        return docs[0]
    try:
        return json.loads(value)
    except RecursionError:
        raise InputError(f"--var {name}: the JSON value nests too deeply") from None
    except json.JSONDecodeError:
        hint = f"quote strings as JSON: --var '{name}=\"{value}\"'" if value else "give a file or a JSON value"
        raise InputError(f"--var {name}: {value!r} is neither a file nor JSON ({hint})") from None


def _load_schema(path: str) -> Any:
    from mkpolicy.structural import Schema

    return Schema.load(path)


def _output(value: Any) -> Any:
    """The JSON form of a CEL value (as Kubernetes would write it into an object)."""
    from mkpolicy.cel.convert import to_json
    from mkpolicy.cel.errors import EvalError
    from mkpolicy.cel.values import CelType, OpaqueValue, OptionalValue

    if isinstance(value, OptionalValue):
        return _output(value.value) if value.has_value else None
    if isinstance(value, CelType):
        return value.name
    if isinstance(value, OpaqueValue):
        try:
            return value.cel_string()
        except TypeError:
            return repr(value)
    if isinstance(value, list):
        return [_output(v) for v in value]
    if isinstance(value, dict):
        return {(k if isinstance(k, str) else str(k)): _output(v) for k, v in value.items()}
    try:
        return to_json(value)
    except EvalError:
        return repr(value)


def _report(exc: Any, expression: str, severity: str = "error") -> None:
    """``error: 1:5: message`` and the expression line with a caret under the column."""
    import sys

    line, column = exc.location.line, exc.location.column
    where = f"{line}:{column}: " if line is not None else ""
    print(f"{severity}: {where}{exc.message}", file=sys.stderr)
    if line is not None and column is not None:
        text = expression.splitlines()[line - 1] if expression.splitlines() else ""
        print(f"  {text}", file=sys.stderr)
        print(f"  {' ' * (column - 1)}^", file=sys.stderr)
