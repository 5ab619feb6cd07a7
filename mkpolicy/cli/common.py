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
