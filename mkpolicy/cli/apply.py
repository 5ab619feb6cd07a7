"""Dry run of a policy on one object, as the engine (and the sidecar) would run it.

--phase create prints the worker copy built from the manager's object (-f).
--phase sync prints the JSON merge patch for the manager's status subresource, computed
from the manager's object (-f) and the worker's object (--worker-object); "null" when
nothing would be written. -o diff prints a unified diff against the input instead.

When the policy names its framework's schema (spec.schema), what the API server would
refuse of the result (a worker copy or status write that breaks the CRD schema, where the
manager's object did not) is printed as a warning on stderr.

--policy takes a policy file or a directory; the policy whose framework matches the
object's apiVersion and kind is used. Exit code 0 on success, 1 when the object is not
managed or a patch fails, 2 for unreadable input or bad arguments.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mkpolicy apply``."""
    parser.add_argument("--policy", required=True, metavar="PATH", help="policy file or directory")
    parser.add_argument("--phase", required=True, choices=["create", "sync"], help="create or sync")
    parser.add_argument(
        "-f", "--filename", required=True, metavar="OBJECT", help="the manager's object (YAML or JSON; '-' for stdin)"
    )
    parser.add_argument("--worker-object", metavar="FILE", help="the worker's object (sync only)")
    parser.add_argument(
        "--workload-name", default=None, help="prebuilt workload name (default: <kind>-<name>, lower case)"
    )
    parser.add_argument("--origin", default="multikueue", help="MultiKueue origin (default: multikueue)")
    parser.add_argument("--cluster", default="worker1", help="worker cluster name (default: worker1)")
    parser.add_argument(
        "--identifier",
        choices=["annotation", "label"],
        default="annotation",
        help="where the workload name goes: annotation (Kueue >= 0.18) or label",
    )
    parser.add_argument("--workload", metavar="FILE", help="the Workload object, visible to CEL as workload")
    parser.add_argument("-o", "--output", choices=["yaml", "json", "diff"], default="yaml", help="output format")


def run(args: argparse.Namespace) -> int:
    """Run one create or sync."""
    from mkpolicy.check import check_loaded
    from mkpolicy.cli.common import (
        EXIT_FINDINGS,
        EXIT_OK,
        EXIT_USAGE,
        dump,
        error,
        report_policy_error,
    )
    from mkpolicy.engine import Context, compile
    from mkpolicy.engine.admission import refusals
    from mkpolicy.errors import MkpolicyError, NotManagedError, PolicyError
    from mkpolicy.jsonvalues import apply_merge_patch, json_equal
    from mkpolicy.policy import load
    from mkpolicy.yamldata import load_object as read_object

    if args.phase == "sync" and not args.worker_object:
        error("--phase sync needs --worker-object (the worker's copy, with its status)")
        return EXIT_USAGE
    try:
        obj = read_object(args.filename)
        worker = read_object(args.worker_object) if args.worker_object else None
        workload = read_object(args.workload) if args.workload else None
        policies = load(args.policy)
    except PolicyError as exc:
        return report_policy_error(exc)
    matching = [
        p for p in policies if p.spec.gvk.api_version == obj.get("apiVersion") and p.spec.gvk.kind == obj.get("kind")
    ]
    if not matching:
        frameworks = ", ".join(p.spec.framework for p in policies)
        error(
            f"no policy for apiVersion {obj.get('apiVersion')!r}, kind {obj.get('kind')!r} "
            f"(policies found for: {frameworks})"
        )
        return EXIT_USAGE
    policy = matching[0]
    # A dry run of a policy the sidecar would refuse must say so: same checker, same lines.
    findings, _, compiled = check_loaded(policy)
    for finding in findings:
        if finding.severity == "error":
            print(f"{finding.report()} [the sidecar and 'mkpolicy validate' refuse this policy]", file=sys.stderr)
    name = str((obj.get("metadata") or {}).get("name", "object"))
    ctx = Context(
        workload_name=args.workload_name or f"{str(obj.get('kind', '')).lower()}-{name}",
        origin=args.origin,
        cluster=args.cluster,
        workload=workload,
        identifier=args.identifier,
    )
    ignored: list[MkpolicyError] = []
    result: dict[str, Any] | None
    try:
        # The checker's adapter; when the engine refused the policy, compile() raises its error.
        adapter = compiled if compiled is not None else compile(policy)
        if args.phase == "create":
            result = adapter.create(obj, ctx, ignored)
            before, after = obj, result
        else:
            assert worker is not None
            patch = adapter.sync(obj, worker, ctx, ignored)
            result, before, after = patch, obj, apply_merge_patch(obj, patch) if patch is not None else obj
    except NotManagedError as exc:
        error(f"not managed by policy {policy.name}: {exc.reason}")
        return EXIT_FINDINGS
    except MkpolicyError as exc:
        print(exc.report(), file=sys.stderr)
        return EXIT_FINDINGS
    for skipped in ignored:
        print(skipped.report("warning") + " (skipped: failurePolicy Ignore)", file=sys.stderr)
    for refused in refusals(adapter, obj, args.phase, result):
        print(f"warning: {refused}", file=sys.stderr)
    if args.output == "diff":
        import difflib

        old = dump(before, "yaml").splitlines(keepends=True)
        new = dump(after, "yaml").splitlines(keepends=True)
        label = "worker copy" if args.phase == "create" else "manager after status patch"
        sys.stdout.writelines(difflib.unified_diff(old, new, fromfile=args.filename, tofile=label))
        if args.phase == "sync" and (result is None or json_equal(before, after)):
            print("# no status change", file=sys.stderr)
    else:
        sys.stdout.write(dump(result, args.output))
    return EXIT_OK
