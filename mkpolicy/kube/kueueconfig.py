"""What ``mkpolicy controller``, ``mkpolicy export admission`` and ``mkpolicy webhook`` take from Kueue's
``Configuration`` (``config.kueue.x-k8s.io/v1beta1`` or ``v1beta2``, the ``controller_manager_config.yaml``
of Kueue's ConfigMap), with Kueue's defaults (``apis/config/v1beta2/defaults.go``, v0.17.1 and v0.19.2):

- ``namespace`` (default ``kueue-system``);
- ``manageJobsWithoutQueueName`` (default false);
- ``managedJobsNamespaceSelector`` (default: every namespace but ``kube-system`` and Kueue's own);
- ``integrations.labelKeysToCopy``; ``waitForPodsReady`` (v1beta2: present; v1beta1: ``enable``);
- ``featureGates``: ``ShortWorkloadNames``, ``PartialAdmission`` and
  ``ManagedJobsNamespaceSelectorAlwaysRespected`` (``pkg/features/kube_features.go``: beta and on
  since 0.15, GA and locked on in 0.19).

The Kueue version matters where jobframework differs between the releases mkpolicy follows
(v0.17.1 and v0.19.2): :meth:`KueueConfig.at_least` answers it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mkpolicy.errors import MkpolicyError
from mkpolicy.kube.labelselector import LabelSelector, excluding, parse

#: The Kueue releases whose jobframework mkpolicy follows (newest first).
KUEUE_VERSIONS = ("v0.19.2", "v0.17.1")
DEFAULT_KUEUE_VERSION = KUEUE_VERSIONS[0]
_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?$")
_GATE_DEFAULTS = {"ShortWorkloadNames": False, "PartialAdmission": True,
                  "ManagedJobsNamespaceSelectorAlwaysRespected": True}  # fmt: skip


def parse_version(text: str) -> tuple[int, int, int]:
    """``v0.19.2`` / ``0.19`` -> ``(0, 19, 2)``; :class:`MkpolicyError` when it is not a version."""
    found = _VERSION.match(text.strip())
    if found is None:
        raise MkpolicyError(f"Kueue version: expected vMAJOR.MINOR[.PATCH] (e.g. v0.19.2); found {text!r}")
    return int(found[1]), int(found[2]), int(found[3] or 0)


@dataclass(frozen=True)
class KueueConfig:
    """Kueue's configuration as far as an integration follows it."""

    version: str = DEFAULT_KUEUE_VERSION
    namespace: str = "kueue-system"
    manage_jobs_without_queue_name: bool = False
    #: None: Kueue's default (every namespace but kube-system and :attr:`namespace`).
    managed_jobs_namespace_selector: Mapping[str, Any] | None = None
    label_keys_to_copy: frozenset[str] = frozenset()
    wait_for_pods_ready: bool = False
    feature_gates: Mapping[str, bool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        parse_version(self.version)
        if self.managed_jobs_namespace_selector is not None:
            parse(self.managed_jobs_namespace_selector, "managedJobsNamespaceSelector")

    def at_least(self, major: int, minor: int) -> bool:
        """Whether the configured Kueue is ``major.minor`` or newer."""
        return parse_version(self.version)[:2] >= (major, minor)

    def gate(self, name: str) -> bool:
        """A feature gate's value: as configured, else Kueue's default for the version."""
        if name == "ManagedJobsNamespaceSelectorAlwaysRespected" and self.at_least(0, 19):
            return True  # GA and locked to its default in 0.19
        return bool(self.feature_gates.get(name, _GATE_DEFAULTS.get(name, False)))

    @property
    def selector(self) -> Mapping[str, Any]:
        """``managedJobsNamespaceSelector`` with Kueue's default applied."""
        if self.managed_jobs_namespace_selector is not None:
            return self.managed_jobs_namespace_selector
        return excluding(("kube-system", self.namespace))

    def namespace_selector(self) -> LabelSelector:
        """:attr:`selector`, parsed."""
        return parse(self.selector, "managedJobsNamespaceSelector")


def from_configuration(
    doc: Any, *, version: str = DEFAULT_KUEUE_VERSION, where: str = "Kueue configuration"
) -> KueueConfig:
    """A :class:`KueueConfig` from Kueue's ``Configuration`` document (a mapping); a clear error
    naming ``where`` when it is not one."""
    if not isinstance(doc, Mapping) or doc.get("kind") != "Configuration":
        found = doc.get("kind") if isinstance(doc, Mapping) else type(doc).__name__
        raise MkpolicyError(f"{where}: expected a Kueue Configuration (kind: Configuration); found {found!r}")
    api = str(doc.get("apiVersion") or "")
    if api not in ("config.kueue.x-k8s.io/v1beta1", "config.kueue.x-k8s.io/v1beta2"):
        raise MkpolicyError(f"{where}: expected apiVersion config.kueue.x-k8s.io/v1beta1 or v1beta2; found {api!r}")
    integrations = doc.get("integrations") or {}
    pods_ready = doc.get("waitForPodsReady")
    if api.endswith("v1beta1"):
        waits = isinstance(pods_ready, Mapping) and bool(pods_ready.get("enable"))
    else:
        waits = pods_ready is not None
    gates = doc.get("featureGates") or {}
    if not isinstance(gates, Mapping) or not all(isinstance(v, bool) for v in gates.values()):
        raise MkpolicyError(f"{where}: featureGates: expected a map of gate names to true/false; found {gates!r}")
    selector = doc.get("managedJobsNamespaceSelector")
    if selector is not None:
        parse(selector, f"{where}: managedJobsNamespaceSelector")
    return KueueConfig(
        version=version,
        namespace=str(doc.get("namespace") or "kueue-system"),
        manage_jobs_without_queue_name=bool(doc.get("manageJobsWithoutQueueName", False)),
        managed_jobs_namespace_selector=selector,
        label_keys_to_copy=frozenset(str(k) for k in integrations.get("labelKeysToCopy") or []),
        wait_for_pods_ready=waits,
        feature_gates={str(k): bool(v) for k, v in gates.items()},
    )


def load(path: str, *, version: str = DEFAULT_KUEUE_VERSION) -> KueueConfig:
    """Read Kueue's ``Configuration`` from a YAML file (the ConfigMap's ``controller_manager_config.yaml``,
    or the ConfigMap itself)."""
    import yaml

    try:
        with open(path, encoding="utf-8") as fh:
            doc = yaml.safe_load(fh)
    except OSError as exc:
        raise MkpolicyError(f"--kueue-config {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise MkpolicyError(f"--kueue-config {path}: not YAML: {exc}") from None
    if isinstance(doc, Mapping) and doc.get("kind") == "ConfigMap":
        text = (doc.get("data") or {}).get("controller_manager_config.yaml")
        if text is None:
            raise MkpolicyError(f"--kueue-config {path}: the ConfigMap has no data.controller_manager_config.yaml")
        doc = yaml.safe_load(text)
    return from_configuration(doc, version=version, where=f"--kueue-config {path}")
