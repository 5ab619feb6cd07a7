"""Shared helpers of the CLI commands: reading objects, printing results and errors."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any, TextIO

from mkpolicy.errors import InputError, MkpolicyError

if TYPE_CHECKING:
    from mkpolicy.engine import Adapter
    from mkpolicy.kube.rest import RestConfig

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2


def error(message: object, stream: TextIO | None = None) -> None:
    """Print an error line to stderr."""
    print(f"error: {message}", file=stream or sys.stderr)


def exit_code_for(exc: MkpolicyError) -> int:
    """2 for unreadable input, 1 for everything a policy author must fix."""
    problems = getattr(exc, "problems", [exc])
    return EXIT_USAGE if any(isinstance(p, InputError) for p in problems) else EXIT_FINDINGS


def report_policy_error(exc: MkpolicyError, stream: TextIO | None = None) -> int:
    """Print every problem of ``exc`` (one line each) and return the exit code it deserves."""
    for problem in getattr(exc, "problems", [exc]):
        print(problem.report(), file=stream or sys.stderr)
    return exit_code_for(exc)


def dump(value: Any, fmt: str) -> str:
    """Format ``value`` as ``yaml`` or ``json``."""
    if fmt == "json":
        return json.dumps(value, indent=2, sort_keys=False) + "\n"
    import yaml

    return str(yaml.safe_dump(value, sort_keys=False, default_flow_style=False, allow_unicode=True))


def integration_adapters(policies: str, what: str) -> list[Adapter] | int:
    """The checked adapters under ``policies`` when one has ``spec.integration``; else the exit
    code, the problems printed (``what``: what the command would do with them)."""
    from mkpolicy.check import CheckError, load_checked

    try:
        adapters = load_checked([policies])
    except CheckError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return EXIT_FINDINGS
    if not any(a.integration is not None for a in adapters):
        error(f"--policies {policies!r}: no policy has spec.integration; there is nothing to {what}")
        return EXIT_FINDINGS
    return adapters


def cluster_config(kubeconfig: str | None, context: str | None = None) -> RestConfig:
    """The cluster of ``kubeconfig`` (its context), or the pod's service account without one.
    Raises :class:`~mkpolicy.errors.MkpolicyError` when neither can be used."""
    from mkpolicy.kube.kubeconfig import load_kubeconfig, rest_config
    from mkpolicy.kube.rest import in_cluster_config

    if not kubeconfig:
        return in_cluster_config()
    base = os.path.dirname(os.path.abspath(kubeconfig))
    return rest_config(load_kubeconfig(kubeconfig), kubeconfig, kueue_rules=False, base_dir=base, context=context)


def add_kueue_config_arguments(parser: Any, *, workload: bool = False) -> None:
    """The options that say how Kueue is configured (``--kueue-config`` and what overrides it);
    ``workload``: also those that shape Workloads (the controller's)."""
    group = parser.add_argument_group("Kueue's configuration (give the same as the Kueue you run)")
    group.add_argument(
        "--kueue-config", metavar="FILE",
        help="Kueue's Configuration (controller_manager_config.yaml, or its ConfigMap): namespace, "
        "manageJobsWithoutQueueName, managedJobsNamespaceSelector"
        + (", integrations.labelKeysToCopy, waitForPodsReady, featureGates" if workload else ""),
    )  # fmt: skip
    group.add_argument(
        "--kueue-version", default=None, metavar="VERSION",
        help="the Kueue release to follow where its job framework differs: v0.19.2 (default) or v0.17.1",
    )  # fmt: skip
    group.add_argument(
        "--manage-jobs-without-queue-name", action="store_true", default=None,
        help="Kueue's manageJobsWithoutQueueName: also queue objects without a queue-name label in the "
        "namespaces managedJobsNamespaceSelector selects",
    )  # fmt: skip
    group.add_argument(
        "--managed-jobs-namespace-selector", metavar="SELECTOR",
        help="Kueue's managedJobsNamespaceSelector as JSON or YAML, e.g. "
        "'{matchLabels: {kueue-managed: \"true\"}}' (default: every namespace but kube-system and Kueue's)",
    )  # fmt: skip


def kueue_config(args: Any) -> Any:
    """The :class:`~mkpolicy.kube.kueueconfig.KueueConfig` of ``--kueue-config`` and the options that
    override it; :class:`MkpolicyError` when one is malformed."""
    import dataclasses

    import yaml

    from mkpolicy.kube import kueueconfig

    version = args.kueue_version or kueueconfig.DEFAULT_KUEUE_VERSION
    if args.kueue_version and kueueconfig.parse_version(version)[:2] not in {
        kueueconfig.parse_version(v)[:2] for v in kueueconfig.KUEUE_VERSIONS
    }:
        known = ", ".join(kueueconfig.KUEUE_VERSIONS)
        raise MkpolicyError(f"--kueue-version: expected a release mkpolicy follows ({known}); found {version!r}")
    config = (
        kueueconfig.load(args.kueue_config, version=version)
        if args.kueue_config
        else kueueconfig.KueueConfig(version=version)
    )
    changes: dict[str, Any] = {}
    if args.manage_jobs_without_queue_name:
        changes["manage_jobs_without_queue_name"] = True
    if args.managed_jobs_namespace_selector is not None:
        try:
            selector = yaml.safe_load(args.managed_jobs_namespace_selector)
        except yaml.YAMLError as exc:
            raise MkpolicyError(f"--managed-jobs-namespace-selector: expected JSON or YAML; {exc}") from None
        from mkpolicy.kube.labelselector import parse

        parse(selector, "--managed-jobs-namespace-selector")
        changes["managed_jobs_namespace_selector"] = selector
    return dataclasses.replace(config, **changes) if changes else config
