"""``mkpolicy export deploy``: the manifests that install the sidecar, from the user's policies and SidecarConfig.

What it writes (every file generated; nothing for the user to edit)::

    DIR/kustomization.yaml        with --kueue: Kueue's manifests (a local copy) + the sidecar component
    DIR/sidecar/                  a kustomize Component for the manager cluster:
        kustomization.yaml          the policies ConfigMap (fixed name, hot reloaded), the config ConfigMap
        sidecar-container.yaml      the mkpolicy container appended to Kueue's Deployment (JSON patch):
                                    --wire, or with --no-wire --kubeconfig-dir (to wire by hand)
        sidecar-patch.yaml          its volumes (the policies volume optional) (strategic merge patch)
        rbac.yaml                   Kueue's and the sidecar's roles for the policies' kinds, bound to Kueue's SA
        sidecar.yaml                the SidecarConfig, as given
        policies/                   the policy files and the schema files they name
    DIR/workers/                  for every worker cluster: Kueue's role on the copies, bound to the
                                  identity of the worker kubeconfigs
    DIR/README.md                 how to apply it

Everything renders offline: the only resource that is not generated is the user's own
copy of Kueue's manifests. One ``kubectl apply --server-side -k`` creates the policies
ConfigMap with the Deployment, and its volume is optional, so a new install has no
order to respect and the pod never waits for a ConfigMap.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import yaml

from mkpolicy.cli.deploy_rbac import KUEUE_SERVICE_ACCOUNT, bindings, service_account, sidecar_roles
from mkpolicy.errors import Location, MkpolicyError
from mkpolicy.lint.export import Selected, kinds, kueue_roles
from mkpolicy.policy import FrameworkPolicy
from mkpolicy.sidecar.config import SidecarConfig
from mkpolicy.sidecar.permissions import wire_secret_name

#: kube-apiserver's limit on a ConfigMap's data, all values together (ValidateConfigMap).
CONFIGMAP_LIMIT = 1024 * 1024
#: Schemas under this prefix (relative to a policy) are the ones the image ships beside the policies.
IMAGE_SCHEMAS = "../schemas/"
#: Where the container reads its policies and configuration.
POLICIES_MOUNT = "/usr/share/mkpolicy/policies"
CONFIG_MOUNT = "/etc/mkpolicy/config"
#: Kueue's multikueue service account in its worker setup script (create-multikueue-kubeconfig.sh).
WORKER_SERVICE_ACCOUNT = "kueue-system/multikueue-sa"


class DeployError(MkpolicyError):
    """The manifests cannot be rendered from these policies and this configuration.

    ``problems`` lists each problem (itself when there is one).
    """

    def __init__(self, message: str, location: Location | None = None, problems: list[DeployError] | None = None):
        super().__init__(message, location)
        self.problems: list[DeployError] = problems or [self]


@dataclass(frozen=True)
class DeployOptions:
    """What ``export deploy`` takes besides the policies and the configuration."""

    config_path: str
    image: str
    wire: bool = True
    kueue: str | None = None
    prefix: str = "mkpolicy"
    kueue_service_account: str = KUEUE_SERVICE_ACCOUNT
    worker_service_account: str = WORKER_SERVICE_ACCOUNT


@dataclass
class Rendered:
    """The files to write (path relative to the output directory -> content) and notes for the user."""

    files: dict[str, str]
    notes: list[str]


def render(
    policies: list[FrameworkPolicy], selected: list[Selected], config: SidecarConfig, options: DeployOptions
) -> Rendered:
    """Every file of the output directory. Raises :class:`DeployError` listing what stops it."""
    found = kinds(selected)
    policy_files = policy_configmap_files(policies)
    wiring = options.wire
    if wiring:
        _check_wiring(config, options)
    ns = config.manager.namespace
    kueue_sa = service_account(options.kueue_service_account, ns)
    kueue_manager_role, kueue_worker_role = kueue_roles(selected, options.prefix)
    manager_roles = [kueue_manager_role, *sidecar_roles(config, found, options.prefix, wiring)]
    sidecar: dict[str, str] = {
        "kustomization.yaml": _dump(_component(config, options, sorted(policy_files))),
        "sidecar-container.yaml": _header("The mkpolicy container, after Kueue's (JSON patch).")
        + _dump([{"op": "add", "path": "/spec/template/spec/containers/-", "value": _container(config, options)}]),
        "sidecar-patch.yaml": _header("The sidecar's volumes on Kueue's Deployment (strategic merge patch).")
        + _dump(_pod_patch(config, options)),
        "rbac.yaml": _header(
            f"On the manager, for Kueue's service account {ns}/{options.kueue_service_account} (the sidecar "
            "runs under it).",
            f"{options.prefix}-manager: Kueue's reads and status writes of the policies' kinds;",
            f"{options.prefix}-sidecar: the sidecar's own (the manager's objects, Events, the workers' Secrets, "
            "Kueue's configuration)" + (f"; {options.prefix}-sidecar-wiring: --wire." if wiring else "."),
        )
        + _stream(manager_roles + bindings(manager_roles, kueue_sa)),
        "sidecar.yaml": _read(options.config_path),
    }
    files = {f"sidecar/{name}": text for name, text in sidecar.items()}
    files.update({f"sidecar/policies/{name}": text for name, text in policy_files.items()})
    worker_roles = [kueue_worker_role]
    worker_ns, _, worker_name = options.worker_service_account.partition("/")
    files["workers/kustomization.yaml"] = _dump(
        {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": ["rbac.yaml"]}
    )
    files["workers/rbac.yaml"] = _header(
        f"On every worker, for {options.worker_service_account}: the identity of the worker kubeconfigs",
        "(Kueue's create-multikueue-kubeconfig.sh). Kueue creates, reads and deletes the copies through the sidecar.",
    ) + _stream(worker_roles + bindings(worker_roles, service_account(worker_name, worker_ns)))
    if options.kueue is not None:
        files.update(_kueue_base(options.kueue))
    notes = _config_notes(config)
    files["README.md"] = _readme(options, notes)
    return Rendered(files, notes)


def policy_configmap_files(policies: list[FrameworkPolicy]) -> dict[str, str]:
    """The policies ConfigMap's files: each policy file and the schema files its policies name.

    The ConfigMap is flat: a schema must sit beside its policy (``schema: x.json``), except
    the image's own (``../schemas/...``). Its data must fit kube-apiserver's 1 MiB.
    """
    out: dict[str, str] = {}
    origin: dict[str, str] = {}
    problems: list[DeployError] = []

    def add(name: str, path: str, where: Location) -> None:
        text = _read(path)
        if name in out and out[name] != text:
            problems.append(
                DeployError(
                    f"two different files are called {name!r} ({origin[name]}, {path}): the policies "
                    "ConfigMap is flat; rename one",
                    where,
                )
            )
            return
        out[name], origin[name] = text, path

    for policy in policies:
        assert policy.file is not None
        add(os.path.basename(policy.file), policy.file, Location(policy.file))
        ref = policy.spec.schema_
        if ref is None or ref.startswith(IMAGE_SCHEMAS):
            continue
        where = policy.locate(("spec", "schema"))
        if "/" in ref or ref in (".", ".."):
            problems.append(
                DeployError(
                    f"spec.schema {ref!r} names a directory: the policies ConfigMap is flat; put the schema beside "
                    f"the policy and name it {os.path.basename(ref)!r}",
                    where,
                )
            )
            continue
        schema_file = policy.schema_file
        assert schema_file is not None
        if not os.path.isfile(schema_file):
            problems.append(DeployError(f"spec.schema {ref!r}: no such file ({schema_file})", where))
            continue
        add(ref, schema_file, where)
    size = sum(len(text.encode()) for text in out.values())
    if size > CONFIGMAP_LIMIT:
        biggest = max(out, key=lambda n: len(out[n].encode()))
        problems.append(
            DeployError(
                f"the policies ConfigMap would hold {size:,} bytes; kube-apiserver refuses a ConfigMap whose data "
                f"is over {CONFIGMAP_LIMIT:,} bytes (the largest file: {biggest}); trim the schemas "
                "('mkpolicy trim-schema')"
            )
        )
    if problems:
        raise _aggregate(problems)
    return out


def _check_wiring(config: SidecarConfig, options: DeployOptions) -> None:
    """Every Secret ``--wire`` rewrites must be known, for the RBAC to name it."""
    unknown = [w.name for w in config.workers if wire_secret_name(w) is None]
    if unknown:
        raise DeployError(
            f"worker(s) {', '.join(unknown)}: the kubeconfig is a file and no wireSecret is set, so the RBAC "
            "cannot name the Secret --wire rewrites; set wireSecret to the Secret the MultiKueueCluster names, "
            "or pass --no-wire (wire by hand)",
            Location(options.config_path),
        )


def _component(config: SidecarConfig, options: DeployOptions, policy_names: list[str]) -> dict[str, Any]:
    ns = config.manager.namespace
    target = {
        "group": "apps",
        "version": "v1",
        "kind": "Deployment",
        "name": config.kueue.deployment,
        "namespace": ns,
    }
    return {
        "apiVersion": "kustomize.config.k8s.io/v1alpha1",
        "kind": "Component",
        "resources": ["rbac.yaml"],
        "configMapGenerator": [
            {
                # a fixed name: updating it hot-reloads the policies without restarting Kueue
                "name": f"{options.prefix}-policies",
                "namespace": ns,
                "files": [f"policies/{name}" for name in policy_names],
                "options": {"disableNameSuffixHash": True},
            },
            {
                # hashed: a configuration change rolls the Deployment (the sidecar reads it at start)
                "name": f"{options.prefix}-sidecar-config",
                "namespace": ns,
                "files": ["sidecar.yaml"],
            },
        ],
        "patches": [
            {"path": "sidecar-container.yaml", "target": target},
            {"path": "sidecar-patch.yaml", "target": target},
        ],
    }


def _container(config: SidecarConfig, options: DeployOptions) -> dict[str, Any]:
    args = ["sidecar", f"--policies={POLICIES_MOUNT}", f"--config={CONFIG_MOUNT}/sidecar.yaml"]
    if options.wire:
        args.append("--wire")
    elif config.state.dir is not None:  # wiring by hand: copy the endpoints' kubeconfigs from here
        args.append(f"--kubeconfig-dir={config.state.dir}/kubeconfigs")
    mounts: list[dict[str, Any]] = [
        {"name": f"{options.prefix}-policies", "mountPath": POLICIES_MOUNT, "readOnly": True},
        {"name": f"{options.prefix}-config", "mountPath": CONFIG_MOUNT, "readOnly": True},
    ]
    if config.state.dir is not None:
        mounts.append({"name": f"{options.prefix}-state", "mountPath": config.state.dir})
    mounts.append({"name": f"{options.prefix}-tmp", "mountPath": "/tmp"})
    probe = {"httpGet": {"path": "/healthz", "port": "mkpolicy-ops"}}
    return {
        "name": "mkpolicy",
        "image": options.image,
        "imagePullPolicy": "IfNotPresent",
        "args": args,
        "ports": [{"name": "mkpolicy-ops", "containerPort": config.ops.port, "protocol": "TCP"}],
        # No readinessProbe on purpose: the pod's readiness also gates Kueue's webhook Service.
        # While not ready the sidecar answers Kueue's writes with 503 (Kueue retries).
        "livenessProbe": {**probe, "initialDelaySeconds": 5, "periodSeconds": 10},
        "startupProbe": {**probe, "periodSeconds": 2, "failureThreshold": 30},
        "resources": {"requests": {"cpu": "50m", "memory": "96Mi"}, "limits": {"cpu": "1", "memory": "256Mi"}},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": mounts,
    }


def _pod_patch(config: SidecarConfig, options: DeployOptions) -> dict[str, Any]:
    p = options.prefix
    volumes: list[dict[str, Any]] = [
        # optional: a pod never waits in ContainerCreating for it; the sidecar answers Kueue's
        # writes with 503 until policies appear, and the kubelet fills the volume when it exists
        {"name": f"{p}-policies", "configMap": {"name": f"{p}-policies", "optional": True}},
        {"name": f"{p}-config", "configMap": {"name": f"{p}-sidecar-config"}},
    ]
    if config.state.dir is not None:
        volumes.append({"name": f"{p}-state", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}})
    # TLS material is loaded through short-lived private files
    volumes.append({"name": f"{p}-tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}})
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": config.kueue.deployment, "namespace": config.manager.namespace},
        "spec": {
            "template": {
                "metadata": {"annotations": {"kubectl.kubernetes.io/default-container": "manager"}},
                "spec": {"volumes": volumes},
            }
        },
    }


def _kueue_base(source: str) -> dict[str, str]:
    """``DIR/kustomization.yaml`` over the user's copy of Kueue's manifests (copied into ``DIR/kueue/``:
    kustomize reads files only inside the kustomization's directory)."""
    if re.match(r"^[a-z][a-z0-9+.-]*://", source, re.IGNORECASE):
        raise DeployError(
            f"--kueue {source!r} is a URL: kustomize would fetch it at every build; download it first "
            "(e.g. curl -LO .../manifests.yaml) and pass the file",
            Location(source),
        )
    if not os.path.isfile(source):
        raise DeployError("--kueue: expected a file of Kueue's manifests (e.g. its release manifests.yaml)",
                          Location(source))  # fmt: skip
    text = _read(source)
    docs = [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
    if not any(d.get("kind") == "Deployment" for d in docs):
        raise DeployError("--kueue: expected Kueue's manifests with its Deployment; found no Deployment",
                          Location(source))  # fmt: skip
    base = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": ["manifests.yaml"]}
    top = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": ["kueue"],
        "components": ["sidecar"],
    }
    return {
        "kueue/manifests.yaml": text,
        "kueue/kustomization.yaml": _dump(base),
        "kustomization.yaml": _header("Kueue with the mkpolicy sidecar: kubectl apply --server-side -k .") + _dump(top),
    }


def _config_notes(config: SidecarConfig) -> list[str]:
    notes = []
    for worker in config.workers:
        if worker.kubeconfig.file is not None:
            notes.append(
                f"worker {worker.name} reads its kubeconfig from the file {worker.kubeconfig.file}: mount it into "
                "the mkpolicy container yourself (e.g. a Secret volume), or use kubeconfig.secret"
            )
    if config.manager.kubeconfig is not None:
        notes.append("manager.kubeconfig is set: in Kueue's pod the sidecar should use its service account (null)")
    return notes


def _readme(options: DeployOptions, notes: Iterable[str]) -> str:
    apply = (
        "kubectl apply --server-side -k .           # Kueue, the sidecar, its RBAC, policies and config"
        if options.kueue is not None
        else "# add ./sidecar to the components of the kustomization that installs Kueue, then:\n"
        "kubectl apply --server-side -k <that kustomization>"
    )
    lines = [
        "# Generated by `mkpolicy export deploy`; regenerate it instead of editing it.",
        "",
        "On the manager cluster (one apply: no order to respect, the policies volume is optional):",
        "",
        "```sh",
        apply,
        "```",
        "",
        "On every worker cluster: `kubectl apply --server-side -k workers/`.",
        "",
        "Policy updates: run `mkpolicy export deploy` again and apply the same way (server-side: the",
        "policies ConfigMap may hold up to 1 MiB; a client-side `kubectl apply` fails from 256 KiB).",
        "The sidecar reloads them without a restart.",
    ]
    extra = list(notes)
    if extra:
        lines += ["", "Notes:", ""] + [f"* {n}" for n in extra]
    return "\n".join(lines) + "\n"


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def _header(*lines: str) -> str:
    return "".join(f"# {line}\n" for line in ("Generated by 'mkpolicy export deploy'.", *lines))


def _dump(value: Any) -> str:
    return str(yaml.safe_dump(value, sort_keys=False, default_flow_style=False))


def _stream(documents: list[dict[str, Any]]) -> str:
    return "---\n".join(_dump(d) for d in documents)


def _aggregate(problems: list[DeployError]) -> DeployError:
    if len(problems) == 1:
        return problems[0]
    return DeployError(f"{len(problems)} problems", problems[0].location, problems)
