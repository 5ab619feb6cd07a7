"""``mkpolicy sidecar --check``: the worker kubeconfigs, Kueue's configuration and the policies, reported.

The report is built first (:class:`CheckReport`), then printed as text or JSON. It fails
(exit 1) on an error finding: a policy whose kind the manager does not serve, a kind
Kueue dispatches while the policy meant for it is not active; exit 2 when a worker
kubeconfig is refused or a permission the sidecar or Kueue needs is missing (reviewed with
SelfSubjectAccessReviews, :mod:`mkpolicy.sidecar.access`). With ``strict`` every warning
fails too, and so does anything it could not check (a worker whose Secret needs the
manager connection, Kueue's configuration). The report ends with the wire contract in
force (:mod:`mkpolicy.sidecar.contract`).
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Literal

import aiohttp

if TYPE_CHECKING:
    from mkpolicy.engine import Adapter
    from mkpolicy.kube.client import KubeClient
    from mkpolicy.kube.rest import RestConfig
    from mkpolicy.sidecar.config import SidecarConfig
    from mkpolicy.sidecar.contract import Contract
    from mkpolicy.sidecar.kueueconfig import Finding, KueueInfo


@dataclass
class WorkerLine:
    """One worker: ``ok``, ``error`` (kubeconfig refused) or ``unchecked``."""

    name: str
    status: Literal["ok", "error", "unchecked"]
    message: str


@dataclass
class PolicyLine:
    """One valid policy: ``ok`` (carried), ``skipped`` (stock Kueue cannot carry it) or ``pending``."""

    name: str
    kind: str
    status: Literal["ok", "skipped", "pending"]
    reason: str = ""


@dataclass
class CheckReport:
    """What ``--check`` found."""

    workers: list[WorkerLine] = field(default_factory=list)
    kueue: str = ""
    unread: list[str] = field(default_factory=list)
    policies: list[PolicyLine] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    #: ``rbac <cluster>: ok ...`` for each cluster that has every permission.
    access: list[str] = field(default_factory=list)
    #: A permission the sidecar or Kueue needs is missing (an ``error: rbac ...`` finding).
    denied: bool = False
    #: The wire contract in force, as lines.
    contract: list[str] = field(default_factory=list)
    #: A policy kind's CRD on the manager prunes its managedBy field: Kueue never dispatches it.
    crd_errors: list[str] = field(default_factory=list)
    #: How each policy kind's status travels, CRDs not checked.
    notes: list[str] = field(default_factory=list)

    def exit_code(self, strict: bool) -> int:
        """0 clean; 2 a worker refused or a permission missing; 1 an error finding (with ``strict``:
        a warning or anything unchecked)."""
        if self.denied or self.crd_errors or any(w.status == "error" for w in self.workers):
            return 2
        levels = {f.level for f in self.findings}
        if "error" in levels:
            return 1
        if strict and ("warning" in levels or self.unread or any(w.status == "unchecked" for w in self.workers)):
            return 1
        return 0

    def text(self) -> tuple[str, str]:
        """(stdout, stderr) of the text report."""
        out: list[str] = []
        err: list[str] = []
        for w in self.workers:
            if w.status == "unchecked":
                out.append(f"worker {w.name}: not checked ({w.message})")
            else:
                (err if w.status == "error" else out).append(f"worker {w.name}: {w.status}: {w.message}")
        out.append(f"kueue: {self.kueue}")
        out.extend(f"kueue: not read: {u}" for u in self.unread)
        for p in self.policies:
            if p.status == "ok":
                out.append(f"policy {p.name}: ok ({p.kind})")
            elif p.status == "skipped":  # valid, but the sidecar will not use it
                out.append(f"policy {p.name}: skipped ({p.kind}): stock Kueue cannot carry it: {p.reason}")
            else:
                out.append(f"policy {p.name}: pending ({p.kind}): {p.reason}")
        err.extend(self.crd_errors)
        out.extend(self.notes)
        out.extend(self.access)
        out.extend(f"{f.level}: {f.message}" for f in self.findings)
        out.extend(self.contract)
        return "\n".join(out) + "\n", "".join(line + "\n" for line in err)

    def json(self, strict: bool) -> str:
        """The report as one JSON document (``exitCode`` included)."""
        doc = {
            "workers": [asdict(w) for w in self.workers],
            "kueue": {"description": self.kueue, "unread": self.unread},
            "policies": [asdict(p) for p in self.policies],
            "findings": [asdict(f) for f in self.findings],
            "crdErrors": self.crd_errors,
            "notes": self.notes,
            "rbac": self.access,
            "contract": self.contract,
            "strict": strict,
            "exitCode": self.exit_code(strict),
        }
        return json.dumps(doc, indent=2) + "\n"


async def build_report(config: SidecarConfig, adapters: list[Adapter]) -> CheckReport:
    """Read what can be read (the manager, the workers) and compare it with the policies."""
    from mkpolicy.errors import MkpolicyError
    from mkpolicy.kube.client import KubeClient
    from mkpolicy.sidecar import manager_rest_config
    from mkpolicy.sidecar.access import check_access
    from mkpolicy.sidecar.kueueconfig import KueueInfo, configured, read_kueue

    report = CheckReport()
    manager: KubeClient | None = None
    try:
        try:
            manager = KubeClient(manager_rest_config(config), user_agent="mkpolicy-sidecar-check", timeout=10)
            kueue = await read_kueue(manager, config)
        except MkpolicyError as exc:  # no manager connection (not in a pod, no kubeconfig)
            manager = None
            kueue = configured(KueueInfo(unread=[f"no manager connection: {exc.message}"]), config)
        reachable = await _workers(report, config, manager)
        carried = await _policies(report, config, adapters, kueue, manager)
        if manager is not None:
            await _manager_checks(report, config, manager, carried)
        if manager is not None:  # RBAC, with SelfSubjectAccessReviews (a client of its own)
            found, report.access = await check_access(config, manager.config, reachable, [a.gvk for a in carried])
            report.denied = any(f.level == "error" for f in found)
            report.findings += found
    finally:
        if manager is not None:
            await manager.close()
    report.kueue = kueue.describe()
    report.unread = list(kueue.unread)
    contract = contract_in_force(config, kueue, carried)
    watched = contract.kueue_watches
    report.contract = [
        *contract.lines(),
        f"  watches per client address: {config.limits.watch_limit(len(watched))} (limits.maxWatchesPerAddress; "
        f"Kueue watches {len(watched)} kinds: {', '.join(watched)})",
    ]
    return report


def contract_in_force(config: SidecarConfig, kueue: KueueInfo, adapters: list[Adapter]) -> Contract:
    """The wire contract the sidecar would hold to (the policies' resources guessed from their kinds,
    as apimachinery guesses them; the sidecar itself uses the manager's discovery)."""
    from mkpolicy.kube.client import ResourceInfo
    from mkpolicy.sidecar.contract import build, guess_resource
    from mkpolicy.sidecar.policies import Entry, PolicySet

    entries = tuple(
        Entry(a, ResourceInfo(a.gvk.group, a.gvk.version, a.gvk.kind, guess_resource(a.gvk.kind), True))
        for a in adapters
    )
    return build(kueue, PolicySet(entries, "check"), config.wire.allow, config.wire.allow_paths)


async def _workers(report: CheckReport, config: SidecarConfig, manager: KubeClient | None) -> dict[str, RestConfig]:
    """Each worker's kubeconfig checked; the accepted ones (for the RBAC review)."""
    from mkpolicy.sidecar.metrics import Metrics
    from mkpolicy.sidecar.workers import WorkerLink

    metrics = Metrics()
    reachable: dict[str, RestConfig] = {}
    for worker in config.workers:
        link = WorkerLink(worker, config.manager.namespace, frozenset, metrics)
        if worker.kubeconfig.secret is not None and manager is None:
            report.workers.append(WorkerLine(worker.name, "unchecked", f"{link.source}; no manager connection"))
            continue
        await link.load(manager)
        await link.upstream.close()
        if link.problem is None:
            report.workers.append(WorkerLine(worker.name, "ok", link.source))
            reachable[worker.name] = link.upstream.config
        else:
            report.workers.append(WorkerLine(worker.name, "error", link.problem))
    return reachable


async def _policies(
    report: CheckReport,
    config: SidecarConfig,
    adapters: list[Adapter],
    kueue: KueueInfo,
    manager: KubeClient | None,
) -> list[Adapter]:
    """The policies reported (and the findings about them); the ones the sidecar carries."""
    from mkpolicy.kube.client import ApiError
    from mkpolicy.sidecar.kueueconfig import Finding, policy_findings, port_findings, sidecar_ports, stranded_kinds
    from mkpolicy.sidecar.logs import plain_error
    from mkpolicy.sidecar.policies import PENDING, split_wire

    carried, skipped = split_wire(adapters, kueue)
    pending: list[Adapter] = []
    for adapter in carried:
        if manager is not None:
            try:
                await manager.discover(adapter.gvk.group, adapter.gvk.version, adapter.gvk.kind)
            except ApiError as exc:
                if exc.status == 404:
                    pending.append(adapter)
                    reason = "the manager cluster does not serve this kind"
                    report.policies.append(PolicyLine(adapter.name, str(adapter.gvk), "pending", reason))
                    continue
                kueue.unread.append(f"discovery of {adapter.gvk}: {plain_error(exc)}")
            except (TimeoutError, OSError, aiohttp.ClientError) as exc:
                kueue.unread.append(f"discovery of {adapter.gvk}: {plain_error(exc)}")
        report.policies.append(PolicyLine(adapter.name, str(adapter.gvk), "ok"))
    for adapter, reason in skipped:
        report.policies.append(PolicyLine(adapter.name, str(adapter.gvk), "skipped", reason))
    if manager is None and carried:
        kueue.unread.append("whether the manager cluster serves the policies' kinds (no manager connection)")
    inactive = [(a.name, a.gvk, PENDING) for a in pending]
    inactive += [(a.name, a.gvk, f"which the sidecar skips ({why})") for a, why in skipped]
    carried_kinds = [(a.name, a.gvk) for a in carried if a not in pending]
    findings: list[Finding] = [
        Finding(
            "error",
            f"policy {a.name} ({a.gvk}): the manager cluster does not serve this kind: the sidecar refuses its "
            "creations until it does (install the CRD, or fix the policy's framework)",
        )
        for a in pending
    ]
    pending_kinds = [(a.name, a.gvk) for a in pending]
    findings += policy_findings(kueue, carried_kinds, stranded_kinds(kueue, carried_kinds, inactive), pending_kinds)
    findings += port_findings(kueue, sidecar_ports(config))
    if config.shutdown.grace_period_seconds >= 10:
        findings.append(
            Finding(
                "warning",
                f"shutdown.gracePeriodSeconds {config.shutdown.grace_period_seconds:g} is not below Kueue's "
                "terminationGracePeriodSeconds (10): the kubelet kills the pod before the sidecar drains",
            )
        )
    if config.state.dir is None:
        findings.append(
            Finding("warning", "state.dir is null: a new CA and tokens at every start; Kueue's kubeconfigs go stale")
        )
    report.findings = findings
    return [a for a in carried if a not in pending]


async def _manager_checks(
    report: CheckReport, config: SidecarConfig, manager: KubeClient, carried: list[Adapter]
) -> None:
    """What the manager says about each carried policy's CRD (managedBy pruned: an error; how its status
    travels: a note), and which workers Kueue reaches without the sidecar (:mod:`mkpolicy.sidecar.manager_checks`)."""
    from mkpolicy.kube.client import ApiError
    from mkpolicy.sidecar.endpoints import endpoint_url
    from mkpolicy.sidecar.kueueconfig import Finding
    from mkpolicy.sidecar.logs import plain_error
    from mkpolicy.sidecar.manager_checks import bypass_state, crd_report

    writes_status = False
    for adapter in carried:
        try:
            info = await manager.discover(adapter.gvk.group, adapter.gvk.version, adapter.gvk.kind)
            crd = await crd_report(manager, adapter, info)
        except (ApiError, aiohttp.ClientError, OSError, TimeoutError) as exc:
            report.notes.append(f"policy {adapter.name}: CRD not checked: {plain_error(exc)}")
            continue
        if crd.problem is not None:
            report.crd_errors.append(f"policy {adapter.name}: error ({adapter.gvk}): {crd.problem}")
        if crd.note:
            report.notes.append(f"policy {adapter.name}: {crd.note}")
            writes_status = True
    endpoints = frozenset(endpoint_url(config.listen.address, port) for port in config.worker_ports() if port)
    for worker in config.workers:
        try:
            state, why = await bypass_state(manager, worker, config.manager.namespace, endpoints)
        except (ApiError, aiohttp.ClientError, OSError, TimeoutError) as exc:
            report.findings.append(
                Finding("warning", f"worker {worker.name}: cannot tell how Kueue reaches it: {plain_error(exc)}")
            )
            continue
        if state == "bypassed":
            # Before the first --wire this is expected; afterwards it means untransformed copies and, for a
            # kind without a status subresource, a Workload that never finishes.
            impact = "; a kind without a status subresource would never finish" if writes_status else ""
            report.findings.append(Finding("warning", f"worker {worker.name}: {why}{impact}"))


def print_report(report: CheckReport, output: str, strict: bool) -> int:
    """Print ``report`` as ``text`` or ``json``; the exit code."""
    if output == "json":
        sys.stdout.write(report.json(strict))
    else:
        out, err = report.text()
        sys.stdout.write(out)
        sys.stderr.write(err)
    return report.exit_code(strict)
