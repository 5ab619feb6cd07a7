"""What the Kueue beside the sidecar is configured with, read from the manager cluster.

Kueue's Configuration lives in the ConfigMap ``kueue-manager-config`` (key
``controller_manager_config.yaml``); its version is the tag of the ``manager`` container's
image in the ``kueue-controller-manager`` Deployment, whose arguments may also set
``--feature-gates``. :func:`read_kueue` reads what it can (RBAC may forbid some of it) and
says what it could not; :func:`findings` compares that with the policies and the
sidecar's configuration:

* a policy whose kind Kueue's ``multiKueue.externalFrameworks`` names at another version
  (Kueue creates copies at that version: the sidecar refuses them, reads pass through);
* a policy whose kind is not in ``externalFrameworks`` (Kueue never sends it);
* a policy for a kind Kueue adapts natively *and* whose integration is enabled in
  ``integrations.frameworks`` (Kueue's own adapter sends that kind, not the generic one);
* the workload identifier Kueue writes (annotation, label, label without the
  over-63-characters fallback), from its version and ``WorkloadIdentifierAnnotations``;
* sidecar ports that collide with Kueue's own in the same pod.

The facts follow Kueue's code, v0.19.2: cmd/kueue/main.go (adapters: the enabled
integrations' own plus the external frameworks), pkg/config/validation.go (an external
framework may not name a GVK whose built-in integration is enabled),
apis/config/v1beta2/defaults.go (ports, default integrations), pkg/features/kube_features.go
(gate defaults per version), pkg/controller/jobframework/utils.go (where the prebuilt
workload name goes).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import aiohttp

from mkpolicy.errors import InputError
from mkpolicy.kube.client import ApiError, KubeClient
from mkpolicy.kube.rest import resource_path
from mkpolicy.policy import GVK
from mkpolicy.sidecar.config import SidecarConfig
from mkpolicy.sidecar.logs import plain_error

#: Seconds each read may take (an unreachable manager must not hold up the sidecar's start).
READ_TIMEOUT = 10.0
#: The key of Kueue's ConfigMap holding its Configuration.
CONFIG_KEY = "controller_manager_config.yaml"

#: Integration name -> the GVK of its built-in MultiKueue adapter (pkg/controller/jobs/*:
#: the integrations registered with a MultiKueueAdapter, and that adapter's GVK()).
NATIVE_ADAPTERS: dict[str, GVK] = {
    "batch/job": GVK("batch", "v1", "Job"),
    "jobset.x-k8s.io/jobset": GVK("jobset.x-k8s.io", "v1alpha2", "JobSet"),
    "kubeflow.org/mpijob": GVK("kubeflow.org", "v2beta1", "MPIJob"),
    "kubeflow.org/pytorchjob": GVK("kubeflow.org", "v1", "PyTorchJob"),
    "kubeflow.org/tfjob": GVK("kubeflow.org", "v1", "TFJob"),
    "kubeflow.org/xgboostjob": GVK("kubeflow.org", "v1", "XGBoostJob"),
    "kubeflow.org/paddlejob": GVK("kubeflow.org", "v1", "PaddleJob"),
    "kubeflow.org/jaxjob": GVK("kubeflow.org", "v1", "JAXJob"),
    "trainer.kubeflow.org/trainjob": GVK("trainer.kubeflow.org", "v1alpha1", "TrainJob"),
    "ray.io/rayjob": GVK("ray.io", "v1", "RayJob"),
    "ray.io/raycluster": GVK("ray.io", "v1", "RayCluster"),
    "ray.io/rayservice": GVK("ray.io", "v1", "RayService"),
    "workload.codeflare.dev/appwrapper": GVK("workload.codeflare.dev", "v1beta2", "AppWrapper"),
    "leaderworkerset.x-k8s.io/leaderworkerset": GVK("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet"),
    "statefulset": GVK("apps", "v1", "StatefulSet"),
    "pod": GVK("", "v1", "Pod"),
}
#: Kueue's integrations when its Configuration names none (defaults.go).
DEFAULT_INTEGRATIONS = frozenset({"batch/job"})

#: Kueue's ports in its own pod (defaults.go; metrics were on 8080 before 0.10).
KUEUE_PORTS: dict[int, str] = {
    8080: "metrics (Kueue < 0.10)",
    8081: "health probes",
    8082: "visibility API",
    8443: "metrics",
    9443: "webhooks",
}

#: Feature gate -> ((since version, default), ...) from pkg/features/kube_features.go.
GATE_DEFAULTS: dict[str, tuple[tuple[tuple[int, int], bool], ...]] = {
    "MultiKueue": (((0, 6), False), ((0, 9), True)),
    "MultiKueueAdaptersForCustomJobs": (((0, 14), False), ((0, 15), True)),
    "WorkloadIdentifierAnnotations": (((0, 17), False), ((0, 18), True)),
    "MultiKueueManagerQuotaAutomation": (((0, 18), False),),
}

Version = tuple[int, int, int]
Identifier = Literal["annotation", "label", "label-only"]


def parse_version(text: str) -> Version | None:
    """``v0.19.2`` / ``0.19.2-rc.1`` / ``0.19`` -> (0, 19, 2); None when it is not a version."""
    match = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:[-+].*)?$", text.strip())
    if match is None:
        return None
    return int(match[1]), int(match[2]), int(match[3] or 0)


def version_of_image(image: str) -> Version | None:
    """The version in an image reference's tag (``registry.k8s.io/kueue/kueue:v0.19.2``), or None."""
    name = image.split("@", 1)[0]
    repo, _, tag = name.rpartition(":")
    if not repo or "/" in tag:
        return None
    return parse_version(tag)


def _text(version: Version | None) -> str:
    return "unknown" if version is None else ".".join(map(str, version))


@dataclass
class KueueInfo:
    """What is known of the Kueue beside the sidecar; None: not known."""

    version: Version | None = None
    #: ``multiKueue.externalFrameworks`` names, parsed (None: the Configuration was not read).
    external_frameworks: tuple[GVK, ...] | None = None
    #: ``integrations.frameworks`` (Kueue's default when the Configuration names none).
    integrations: frozenset[str] | None = None
    #: Feature gates set explicitly (Configuration ``featureGates`` or ``--feature-gates``).
    gates: dict[str, bool] = field(default_factory=dict)
    origin: str | None = None
    #: Kueue's ports in the pod, from its Configuration (else its defaults).
    ports: dict[int, str] = field(default_factory=lambda: dict(KUEUE_PORTS))
    #: What could not be read, and why.
    unread: list[str] = field(default_factory=list)

    def gate(self, name: str) -> bool | None:
        """A feature gate: set explicitly, else the default of Kueue's version (None: unknown)."""
        if name in self.gates:
            return self.gates[name]
        if self.version is None:
            return None
        enabled: bool | None = None
        for since, default in GATE_DEFAULTS.get(name, ()):
            if self.version[:2] >= since:
                enabled = default
        return enabled if enabled is not None else False

    def identifier(self) -> Identifier | None:
        """Where this Kueue writes the prebuilt workload name on a worker copy (None: unknown).

        ``annotation`` with ``WorkloadIdentifierAnnotations`` on; otherwise a label, falling
        back to the annotation for names longer than 63 characters only from 0.18.5 and
        0.19.1 on (``label``); before that always the label (``label-only``).
        """
        gate = self.gate("WorkloadIdentifierAnnotations")
        if gate:
            return "annotation"
        if self.version is None:
            return None
        minor, patch = self.version[1], self.version[2]
        fallback = self.version[0] > 0 or minor >= 20 or (minor == 19 and patch >= 1) or (minor == 18 and patch >= 5)
        return "label" if fallback else "label-only"

    def native_integration(self, gvk: GVK) -> str | None:
        """The enabled integration whose built-in adapter carries ``gvk`` (Kueue refuses it as external).

        With Kueue's Configuration unread, every integration counts as enabled: transforming
        what a built-in adapter sends would change that adapter's behaviour.
        """
        for name, native in NATIVE_ADAPTERS.items():
            if native == gvk and (self.integrations is None or name in self.integrations):
                return name
        return None

    def describe(self) -> str:
        """One line: version, gates that matter, external frameworks."""
        parts = [f"Kueue {_text(self.version)}"]
        identifier = self.identifier()
        if identifier is not None:
            parts.append(f"workload identifier: {identifier}")
        if self.external_frameworks is not None:
            names = ", ".join(str(g) for g in self.external_frameworks) or "none"
            parts.append(f"externalFrameworks: {names}")
        return "; ".join(parts)


def parse_configuration(text: str, source: str, info: KueueInfo) -> None:
    """Read Kueue's Configuration YAML into ``info`` (external frameworks, integrations, gates, origin, ports)."""
    from mkpolicy import yamldata

    try:
        docs = yamldata.load_all(text, source)
    except InputError as exc:
        info.unread.append(f"{source}: {exc.message}")
        return
    doc = docs[0] if docs else None
    if not isinstance(doc, dict):
        info.unread.append(f"{source}: expected a Kueue Configuration mapping")
        return
    multikueue = _section(doc, "multiKueue")
    frameworks: list[GVK] = []
    for entry in multikueue.get("externalFrameworks") or []:
        name = entry.get("name") if isinstance(entry, dict) else None
        gvk = _kind_version_group(name) if isinstance(name, str) else None
        if gvk is None:
            info.unread.append(f"{source}: multiKueue.externalFrameworks entry {name!r} is not Kind.version.group")
        else:
            frameworks.append(gvk)
    info.external_frameworks = tuple(frameworks)
    integrations = _section(doc, "integrations")
    names = [n for n in integrations.get("frameworks") or [] if isinstance(n, str)]
    info.integrations = frozenset(names) if names else DEFAULT_INTEGRATIONS
    gates = doc.get("featureGates")
    if isinstance(gates, dict):
        info.gates.update({str(k): bool(v) for k, v in gates.items() if isinstance(v, bool)})
    if isinstance(multikueue.get("origin"), str):
        info.origin = multikueue["origin"]
    ports = dict(KUEUE_PORTS)
    for section, key, what in (
        ("health", "healthProbeBindAddress", "health probes"),
        ("metrics", "bindAddress", "metrics"),
    ):
        port = _port_of(_section(doc, section).get(key))
        if port is not None:
            ports[port] = what
    webhook = _section(doc, "webhook")
    if isinstance(webhook.get("port"), int):
        ports[webhook["port"]] = "webhooks"
    info.ports = ports


def _section(doc: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = doc.get(key)
    return value if isinstance(value, dict) else {}


def _port_of(address: Any) -> int | None:
    if not isinstance(address, str) or ":" not in address:
        return None
    tail = address.rpartition(":")[2]
    return int(tail) if tail.isdigit() else None


def _kind_version_group(name: str) -> GVK | None:
    """``Kind.version.group`` as Kueue parses it (schema.ParseKindArg); the core group: ``Kind.version``."""
    parts = name.split(".", 2)
    if len(parts) < 2 or not all(parts[:2]):
        return None
    return GVK(parts[2] if len(parts) == 3 else "", parts[1], parts[0])


def parse_feature_gates(args: Iterable[str], info: KueueInfo) -> None:
    """``--feature-gates=A=true,B=false`` arguments of Kueue's container into ``info.gates``."""
    for arg in args:
        if not arg.startswith("--feature-gates="):
            continue
        for item in arg.split("=", 1)[1].split(","):
            key, _, value = item.partition("=")
            if value.strip().lower() in ("true", "false"):
                info.gates[key.strip()] = value.strip().lower() == "true"


def parse_deployment(deployment: Mapping[str, Any], info: KueueInfo) -> None:
    """Kueue's version (image tag of the ``manager`` container) and ``--feature-gates`` into ``info``."""
    spec = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    containers = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
    manager = next((c for c in containers if c.get("name") == "manager"), containers[0] if containers else None)
    if manager is None:
        info.unread.append("Kueue's Deployment has no containers")
        return
    version = version_of_image(str(manager.get("image") or ""))
    if version is not None:
        info.version = version
    else:
        info.unread.append(f"Kueue's version: image {manager.get('image')!r} has no version tag")
    parse_feature_gates([str(a) for a in (manager.get("args") or [])], info)


async def read_kueue(client: KubeClient, config: SidecarConfig) -> KueueInfo:
    """What the manager cluster says about Kueue; what cannot be read is listed in ``unread``.

    The sidecar's configuration stands in for what cannot be read (:func:`configured`).
    """
    info = KueueInfo()
    ns, cfg = config.manager.namespace, config.kueue
    where = f"ConfigMap {ns}/{cfg.config_map}"
    try:
        async with asyncio.timeout(READ_TIMEOUT):
            cm = await client.get(resource_path("", "v1", "configmaps", ns, cfg.config_map))
        text = (cm.get("data") or {}).get(CONFIG_KEY)
        if isinstance(text, str):
            parse_configuration(text, f"{where} key {CONFIG_KEY}", info)
        else:
            info.unread.append(f"{where} has no key {CONFIG_KEY}")
    except (ApiError, aiohttp.ClientError, OSError, TimeoutError) as exc:
        info.unread.append(f"cannot read {where}: {plain_error(exc)}")
    where = f"Deployment {ns}/{cfg.deployment}"
    try:
        async with asyncio.timeout(READ_TIMEOUT):
            deployment = await client.get(resource_path("apps", "v1", "deployments", ns, cfg.deployment))
        parse_deployment(deployment, info)
    except (ApiError, aiohttp.ClientError, OSError, TimeoutError) as exc:
        info.unread.append(f"cannot read {where}: {plain_error(exc)}")
    return configured(info, config)


def configured(info: KueueInfo, config: SidecarConfig) -> KueueInfo:
    """``info`` with the sidecar configuration's ``kueue.version`` and
    ``kueue.workloadIdentifierAnnotations`` standing in for what Kueue's own objects did not say."""
    cfg = config.kueue
    if info.version is None and cfg.version is not None:
        info.version = parse_version(cfg.version)
    gate = "WorkloadIdentifierAnnotations"
    if gate not in info.gates and cfg.workload_identifier_annotations is not None:
        info.gates[gate] = cfg.workload_identifier_annotations
    return info


@dataclass(frozen=True)
class Finding:
    """Something ``--check`` and the start report say: ``error`` (``--check`` fails), ``warning`` or ``info``."""

    level: Literal["error", "warning", "info"]
    message: str


def policy_findings(info: KueueInfo, policies: Iterable[tuple[str, GVK]]) -> list[Finding]:
    """How the policies (name, GVK) meet Kueue's configuration."""
    out: list[Finding] = []
    external = info.external_frameworks
    gate = info.gate("MultiKueueAdaptersForCustomJobs")
    if gate is False and external:
        out.append(
            Finding(
                "warning",
                f"Kueue {_text(info.version)} runs with MultiKueueAdaptersForCustomJobs off: it ignores "
                "multiKueue.externalFrameworks, and no policy kind travels through the sidecar",
            )
        )
    for name, gvk in policies:
        native = info.native_integration(gvk)
        if native is not None:
            out.append(
                Finding(
                    "info",
                    f"policy {name} ({gvk}): skipped, Kueue's integration {native} is enabled and its own "
                    "adapter sends this kind",
                )
            )
            continue
        if external is None:
            continue
        same_kind = [g for g in external if (g.group, g.kind) == (gvk.group, gvk.kind)]
        if gvk in same_kind:
            continue
        if same_kind:
            found = ", ".join(str(g) for g in same_kind)
            out.append(
                Finding(
                    "warning",
                    f"policy {name} ({gvk}): version mismatch, Kueue's multiKueue.externalFrameworks names {found}: "
                    f"Kueue creates {gvk.kind} copies at that version, which the sidecar refuses (an Event on the "
                    "job says so) while reads and watches pass through; make the policy's framework and Kueue's "
                    "entry name the same version",
                )
            )
        else:
            out.append(
                Finding(
                    "warning",
                    f"policy {name} ({gvk}): not in Kueue's multiKueue.externalFrameworks: Kueue does not "
                    f"dispatch {gvk.kind} objects, the policy is never used",
                )
            )
    if external:
        covered = {(g.group, g.kind) for _, g in policies}
        for gvk in external:
            if (gvk.group, gvk.kind) not in covered:
                out.append(
                    Finding(
                        "info",
                        f"Kueue's external framework {gvk} has no policy: its copies travel as Kueue makes them",
                    )
                )
    return out


def port_findings(info: KueueInfo, ports: Mapping[str, int]) -> list[Finding]:
    """Sidecar ports (what -> port) that Kueue uses in the same pod."""
    return [
        Finding(
            "warning",
            f"{what} port {port} is Kueue's {info.ports[port]} port in the same pod: one of them cannot listen",
        )
        for what, port in ports.items()
        if port in info.ports
    ]


def sidecar_ports(config: SidecarConfig) -> dict[str, int]:
    """The sidecar's listening ports by what they serve (ephemeral ones left out)."""
    out = {f"worker {w.name} endpoint": p for w, p in zip(config.workers, config.worker_ports(), strict=True) if p}
    if config.ops.port:
        out["ops"] = config.ops.port
    return out


__all__ = [
    "NATIVE_ADAPTERS",
    "Finding",
    "KueueInfo",
    "configured",
    "parse_configuration",
    "parse_deployment",
    "policy_findings",
    "port_findings",
    "read_kueue",
    "sidecar_ports",
    "version_of_image",
]
