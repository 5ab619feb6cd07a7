"""``mkpolicy export``: Kueue configuration and RBAC for a set of policies.

* ``kueue-config``: the ``multiKueue.externalFrameworks`` entries of Kueue's
  Configuration, one per policy that stock Kueue's generic adapter can carry;
* ``rbac``: two ClusterRoles, one for the manager side (each GVK and its ``/status``:
  get, list, watch, patch, update) and one for the workers' service account (each GVK:
  create, delete, get, list, watch; ``/status``: get).

Policies stock Kueue cannot carry (a managedBy other than ``/spec/managedBy`` holding
``kueue.x-k8s.io/multikueue``, or no status subresource) and kinds Kueue adapts natively
are left out, each with a comment saying why; ``include_all`` keeps them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mkpolicy.lint.checks.schema import read_schema_document, schema_path
from mkpolicy.policy import DEFAULT_MANAGED_BY_PATH, GVK, MULTIKUEUE_CONTROLLER, FrameworkPolicy

#: (group, kind) of the job kinds Kueue integrates natively (its own MultiKueue adapters).
BUILTIN_KINDS = frozenset(
    {
        ("batch", "Job"),
        ("jobset.x-k8s.io", "JobSet"),
        ("kubeflow.org", "MPIJob"),
        ("kubeflow.org", "PyTorchJob"),
        ("kubeflow.org", "TFJob"),
        ("kubeflow.org", "XGBoostJob"),
        ("kubeflow.org", "PaddleJob"),
        ("kubeflow.org", "JAXJob"),
        ("trainer.kubeflow.org", "TrainJob"),
        ("ray.io", "RayJob"),
        ("ray.io", "RayCluster"),
        ("ray.io", "RayService"),
        ("workload.codeflare.dev", "AppWrapper"),
        ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"),
        ("apps", "StatefulSet"),
        ("apps", "Deployment"),
        ("", "Pod"),
    }
)

MANAGER_VERBS = ["get", "list", "watch", "patch", "update"]
WORKER_VERBS = ["create", "delete", "get", "list", "watch"]


@dataclass(frozen=True)
class Selected:
    """A policy and, when it is left out, why."""

    policy: FrameworkPolicy
    skipped: str | None


def select(policies: list[FrameworkPolicy], include_all: bool = False) -> list[Selected]:
    """Each policy with the reason it is left out (None: exported), sorted by framework."""
    out = []
    for policy in sorted(policies, key=lambda p: str(p.spec.gvk)):
        reason = None if include_all else skip_reason(policy)
        out.append(Selected(policy, reason))
    return out


def skip_reason(policy: FrameworkPolicy) -> str | None:
    """Why stock Kueue's generic adapter cannot carry ``policy`` (None when it can)."""
    spec = policy.spec
    gvk = spec.gvk
    if (gvk.group, gvk.kind) in BUILTIN_KINDS:
        return "Kueue adapts this kind natively"
    if spec.managed_by is None:
        return "managedBy: null; stock Kueue needs /spec/managedBy (controller mode only)"
    if spec.managed_by.path != DEFAULT_MANAGED_BY_PATH:
        return (
            f"managedBy at {spec.managed_by.path}; stock Kueue checks {DEFAULT_MANAGED_BY_PATH} (controller mode only)"
        )
    if spec.managed_by.value != MULTIKUEUE_CONTROLLER:
        return f"managedBy value {spec.managed_by.value!r}; stock Kueue needs {MULTIKUEUE_CONTROLLER!r}"
    if spec.sync.subresource == "none":
        return "no status subresource; stock Kueue writes status through it (controller mode only)"
    return None


def plural(policy: FrameworkPolicy) -> str:
    """The resource name of the policy's kind: the CRD's ``spec.names.plural`` when
    ``spec.schema`` is a CRD of that kind, else Kubernetes' guess from the kind."""
    gvk = policy.spec.gvk
    if policy.spec.schema_:
        try:
            document = read_schema_document(schema_path(policy.file, policy.spec.schema_))
        except Exception:  # an unreadable schema is lint's business (MKP107); guess instead
            document = None
        if isinstance(document, dict) and document.get("kind") == "CustomResourceDefinition":
            spec = document.get("spec") or {}
            names = spec.get("names") or {}
            if spec.get("group") == gvk.group and names.get("kind") == gvk.kind and names.get("plural"):
                return str(names["plural"])
    return guess_plural(gvk.kind)


def guess_plural(kind: str) -> str:
    """Kubernetes' fallback for a kind's resource name: lower case, then English plural rules."""
    singular = kind.lower()
    if singular.endswith("s"):
        return singular + "es"
    if singular.endswith("y"):
        return singular[:-1] + "ies"
    return singular + "s"


def _header(lines: list[str], selected: list[Selected]) -> list[str]:
    out = [f"# {line}" if line else "#" for line in lines]
    for item in selected:
        if item.skipped is not None:
            out.append(f"# left out: {item.policy.spec.framework} (policy {item.policy.name}): {item.skipped}")
    return out


def _dump(value: Any) -> str:
    import yaml

    return str(yaml.safe_dump(value, sort_keys=False, default_flow_style=False))


def kueue_config(policies: list[FrameworkPolicy], include_all: bool = False) -> str:
    """The Kueue Configuration fragment listing the frameworks (YAML with comments)."""
    selected = select(policies, include_all)
    names = [str(s.policy.spec.gvk) for s in selected if s.skipped is None]
    header = _header(
        [
            "Kueue Configuration fragment, generated by 'mkpolicy export kueue-config'.",
            "Merge it into the Configuration of kueue-controller-manager (Kueue >= 0.14 with the",
            "feature gate MultiKueueAdaptersForCustomJobs).",
        ],
        selected,
    )
    body = {"multiKueue": {"externalFrameworks": [{"name": name} for name in names]}}
    return "\n".join(header) + "\n" + _dump(body)


def _rules(entries: list[tuple[GVK, str]], resources_of: Any, verbs: list[str]) -> list[dict[str, Any]]:
    by_group: dict[str, list[str]] = {}
    for gvk, resource in entries:
        for name in resources_of(resource):
            bucket = by_group.setdefault(gvk.group, [])
            if name not in bucket:
                bucket.append(name)
    return [{"apiGroups": [group], "resources": names, "verbs": list(verbs)} for group, names in by_group.items()]


def rbac(policies: list[FrameworkPolicy], include_all: bool = False, prefix: str = "mkpolicy") -> str:
    """The manager and worker ClusterRoles for the policies' frameworks (a YAML stream)."""
    selected = select(policies, include_all)
    entries = [(s.policy.spec.gvk, plural(s.policy)) for s in selected if s.skipped is None]
    labels = {"app.kubernetes.io/name": "mkpolicy", "app.kubernetes.io/managed-by": "mkpolicy-export"}
    manager = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": f"{prefix}-manager", "labels": {**labels, "app.kubernetes.io/component": "manager"}},
        "rules": _rules(entries, lambda r: [r, f"{r}/status"], MANAGER_VERBS),
    }
    worker_rules = _rules(entries, lambda r: [r], WORKER_VERBS) + _rules(entries, lambda r: [f"{r}/status"], ["get"])
    worker = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": f"{prefix}-worker", "labels": {**labels, "app.kubernetes.io/component": "worker"}},
        "rules": worker_rules,
    }
    header = _header(
        [
            "RBAC for the frameworks of the policies, generated by 'mkpolicy export rbac'.",
            f"{prefix}-manager: on the manager cluster, bind it to Kueue's service account",
            "  (kueue-system/kueue-controller-manager), which reads the jobs and writes their status.",
            f"{prefix}-worker: on every worker cluster, bind it to the service account that the",
            "  MultiKueueCluster's kubeconfig authenticates as, which creates and deletes the copies.",
        ],
        selected,
    )
    return "\n".join(header) + "\n---\n" + _dump(manager) + "---\n" + _dump(worker)
