"""Print configuration for a set of policies, or write the manifests that deploy the sidecar.

kueue-config: the multiKueue.externalFrameworks entries of Kueue's Configuration.
rbac: a ClusterRole for the manager side (each GVK and its /status: get, list, watch,
      update, patch), one for the workers' service account (each GVK: get, list, watch,
      create, delete; /status: get) and the sidecar's own (the manager's objects of each
      GVK, Events; with --config also the workers' Secrets and Kueue's configuration in
      its namespace, and what --wire rewrites).
deploy: writes to -o DIR a kustomize component for Kueue's Deployment (the sidecar
      container, its volumes, the policies and config ConfigMaps, every role above,
      bound), the workers' RBAC, and with --kueue a kustomization over a local copy of
      Kueue's manifests. It renders offline: `kubectl apply --server-side -k DIR`.

wire-contract: the sidecar's wire contract (what it forwards to a worker) as a Markdown
      table (docs/architecture.md holds it).
controller-rbac: the ClusterRoles of mkpolicy controller for the policies with
      spec.integration, and the read access Kueue's service account needs on their kinds.
admission: for each policy with spec.integration, the MutatingAdmissionPolicies and
      ValidatingAdmissionPolicies (and bindings) of Kueue's job webhook: the default
      LocalQueue, suspension at creation (marked suspended-by-kueue), managedBy
      (--managed-by), Kueue's job validation; with --webhook, the webhook configurations
      calling 'mkpolicy webhook' instead. They follow Kueue's configuration (--kueue-config,
      --kueue-version, --manage-jobs-without-queue-name, --managed-jobs-namespace-selector):
      the default LocalQueue only where managedJobsNamespaceSelector selects (Kueue 0.19),
      and with manageJobsWithoutQueueName objects without a queue name suspended there too.
      An expression kube-apiserver's admission CEL refuses (cel.bind: MKP607) is an error.

crd-patch: the CRDs given with --crd (files, "-" for stdin) of the policies' kinds that
      would prune spec.managedBy (Argo's Workflow), with the field declared, to apply on
      the manager with server-side apply and its own field manager:
      kubectl get crd workflows.argoproj.io -o yaml | mkpolicy export crd-patch --crd - \
        | kubectl apply --server-side --force-conflicts --field-manager=mkpolicy-crd-patch -f -
argo-admission: the MutatingAdmissionPolicies the manager needs for Argo's Workflow
      (spec.managedBy from the label mkpolicy.io/managed-by: multikueue on CREATE, kept on
      UPDATE; an Argo controller instance id no manager controller serves).


Policies that stock Kueue's generic adapter cannot carry (managedBy elsewhere than
/spec/managedBy) and kinds Kueue adapts natively are left out
of the roles with a comment saying why; --all keeps them. Exit code 0, 1 when a policy
does not load, 2 for unreadable paths, an invalid --config or what deploy cannot render.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from typing import TYPE_CHECKING

from mkpolicy import __version__
from mkpolicy.cli.common import add_kueue_config_arguments

if TYPE_CHECKING:
    from mkpolicy.policy import FrameworkPolicy
    from mkpolicy.sidecar.config import SidecarConfig


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mkpolicy export``."""
    parser.add_argument(
        "what",
        choices=(
            "kueue-config", "rbac", "deploy", "wire-contract", "admission", "controller-rbac", "crd-patch",
            "argo-admission",
        ),
        help="what to print or write",
    )  # fmt: skip
    parser.add_argument(
        "--policies", default="policies", metavar="DIR", help="policy file or directory (default: policies)"
    )
    parser.add_argument("--all", action="store_true", help="include policies stock Kueue cannot carry")
    parser.add_argument(
        "--name-prefix", default="mkpolicy", help="prefix of the role and ConfigMap names (default: mkpolicy)"
    )
    parser.add_argument(
        "--config", metavar="FILE", help="the SidecarConfig (required by deploy; rbac: adds the namespaced roles)"
    )
    deploy = parser.add_argument_group("deploy")
    deploy.add_argument("-o", "--output-dir", default="mkpolicy-deploy", metavar="DIR",
                        help="where deploy writes (default: mkpolicy-deploy)")  # fmt: skip
    deploy.add_argument(
        "--kueue", metavar="FILE", help="your local copy of Kueue's manifests (a kustomization over it)"
    )
    deploy.add_argument("--image", default=f"ghcr.io/mkpolicy/mkpolicy:{__version__}", help="the sidecar's image")
    deploy.add_argument("--no-wire", dest="wire", action="store_false", help="without --wire (wire by hand)")
    deploy.add_argument(
        "--worker-service-account", default="kueue-system/multikueue-sa", metavar="NS/NAME",
        help="the identity of the worker kubeconfigs (default: kueue-system/multikueue-sa, Kueue's setup script)",
    )  # fmt: skip
    deploy.add_argument(
        "--kueue-service-account", default="kueue-controller-manager", metavar="NAME",
        help="Kueue's service account in manager.namespace (default: kueue-controller-manager)",
    )  # fmt: skip
    admission = parser.add_argument_group("admission")
    admission.add_argument(
        "--map-version",
        choices=("v1", "v1beta1"),
        default="v1",
        help="admission, argo-admission: MutatingAdmissionPolicy API version: v1 (Kubernetes 1.36+, default) or "
        "v1beta1 (1.34/1.35 with "
        "the MutatingAdmissionPolicy feature gate and the admissionregistration.k8s.io/v1beta1 API enabled)",
    )
    admission.add_argument(
        "--managed-by",
        action="store_true",
        help="also set each policy's managedBy field to its MultiKueue value at creation (a manager cluster "
        "whose queues all dispatch through MultiKueue)",
    )
    admission.add_argument("--no-default-queue", action="store_true", help="leave out the default-LocalQueue policies")
    admission.add_argument(
        "--webhook",
        metavar="NAMESPACE/SERVICE",
        help="render webhook configurations for 'mkpolicy webhook' behind this Service instead of admission "
        "policies (clusters without MutatingAdmissionPolicy)",
    )
    admission.add_argument("--ca-bundle", metavar="FILE", help="with --webhook: the CA certificate of its TLS (PEM)")
    admission.add_argument(
        "--namespace-label",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="bind every policy only in namespaces with this label (repeatable; by default every namespace "
        "but kube-system and Kueue's, as Kueue's webhook configurations)",
    )
    add_kueue_config_arguments(parser)
    parser.add_argument(
        "--crd",
        action="append",
        default=[],
        metavar="FILE",
        help="crd-patch: a file of CustomResourceDefinitions ('-': stdin; repeatable), e.g. the kind's release "
        "manifest or 'kubectl get crd NAME -o yaml'",
    )
    parser.add_argument(
        "--instance-id",
        default="mkpolicy-multikueue",
        help="argo-admission: the Argo controller instance id set on the manager's Workflows; no Argo controller "
        "on the manager may serve it (default: mkpolicy-multikueue)",
    )


def run(args: argparse.Namespace) -> int:
    """Print the requested configuration, or write the deploy directory."""
    from mkpolicy.cli.common import EXIT_OK, EXIT_USAGE, error, report_policy_error
    from mkpolicy.errors import PolicyError
    from mkpolicy.lint.export import crd_patch, kueue_config, select
    from mkpolicy.policy import load
    from mkpolicy.sidecar.config import ConfigError, load_config
    from mkpolicy.yamldata import load_file

    if args.what == "wire-contract":
        from mkpolicy.sidecar.contract import render_markdown

        sys.stdout.write(render_markdown())
        return EXIT_OK
    try:
        policies = load(args.policies)
    except PolicyError as exc:
        return report_policy_error(exc)
    if args.what == "crd-patch":
        if not args.crd:
            print("mkpolicy export crd-patch: expected --crd FILE (the CRDs to patch); found none", file=sys.stderr)
            return EXIT_USAGE
        try:
            crds = [doc for path in args.crd for doc in load_file(path)]
            text, notes = crd_patch(policies, crds)
        except PolicyError as exc:
            print(exc.report(), file=sys.stderr)
            return EXIT_USAGE
        sys.stdout.write(text)
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
        return EXIT_OK
    if args.what == "argo-admission":
        from mkpolicy.lint.argo_admission import ArgoAdmission, render

        try:
            sys.stdout.write(render(policies, ArgoAdmission(args.map_version, instance_id=args.instance_id)))
        except PolicyError as exc:
            return report_policy_error(exc)
        return EXIT_OK
    if args.what == "admission":
        return _admission(args, policies)
    if args.what == "controller-rbac":
        from mkpolicy.lint.export import controller_rbac

        sys.stdout.write(controller_rbac(policies, args.name_prefix))
        return EXIT_OK
    config: SidecarConfig | None = None
    if args.config is not None:
        try:
            config = load_config(args.config)
        except ConfigError as exc:
            for problem in exc.problems:
                print(problem, file=sys.stderr)
            return EXIT_USAGE
    if all(s.skipped is not None for s in select(policies, args.all)):
        print("warning: no policy can be carried by stock Kueue; use --all to export them anyway", file=sys.stderr)
    if args.what == "kueue-config":
        sys.stdout.write(kueue_config(policies, args.all))
    elif args.what == "rbac":
        sys.stdout.write(_rbac(args, policies, config))
    elif config is None:
        error("export deploy: --config FILE is required (the SidecarConfig the sidecar runs with)")
        return EXIT_USAGE
    else:
        return _deploy(args, policies, config)
    return EXIT_OK


def _rbac(args: argparse.Namespace, policies: list[FrameworkPolicy], config: SidecarConfig | None) -> str:
    from mkpolicy.cli.deploy_rbac import sidecar_roles
    from mkpolicy.lint.export import dump_stream, kinds, kueue_roles, rbac_header, select

    selected = select(policies, args.all)
    prefix = args.name_prefix
    if config is None:
        extra = [
            f"{prefix}-sidecar: on the manager, bind it to Kueue's service account too: the sidecar runs",
            "  in Kueue's pod. --config FILE adds the Role for the workers' Secrets and what --wire rewrites.",
        ]
    else:
        extra = [
            f"{prefix}-sidecar (ClusterRole and Role in {config.manager.namespace}), {prefix}-sidecar-wiring: on",
            "  the manager, bind them to Kueue's service account too: the sidecar runs in Kueue's pod.",
        ]
    documents = kueue_roles(selected, prefix) + sidecar_roles(config, kinds(selected), prefix)
    return dump_stream(rbac_header(prefix, selected, extra), documents)


def _deploy(args: argparse.Namespace, policies: list[FrameworkPolicy], config: SidecarConfig) -> int:
    from mkpolicy.cli.common import EXIT_OK, EXIT_USAGE
    from mkpolicy.cli.deploy_render import DeployError, DeployOptions, render
    from mkpolicy.lint.export import select

    if "/" not in args.worker_service_account:
        print(f"error: --worker-service-account {args.worker_service_account!r}: expected NAMESPACE/NAME",
              file=sys.stderr)  # fmt: skip
        return EXIT_USAGE
    options = DeployOptions(
        config_path=args.config,
        image=args.image,
        wire=args.wire,
        kueue=args.kueue,
        prefix=args.name_prefix,
        kueue_service_account=args.kueue_service_account,
        worker_service_account=args.worker_service_account,
    )
    try:
        rendered = render(policies, select(policies, args.all), config, options)
    except DeployError as exc:
        for problem in exc.problems:
            print(problem.report(), file=sys.stderr)
        return EXIT_USAGE
    out = args.output_dir
    for stale in ("sidecar/policies", "kueue"):  # files of an earlier export that may be gone now
        shutil.rmtree(os.path.join(out, stale), ignore_errors=True)
    for name, text in sorted(rendered.files.items()):
        path = os.path.join(out, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    for note in rendered.notes:
        print(f"note: {note}", file=sys.stderr)
    print(f"wrote {out}/: kubectl apply --server-side -k {out if args.kueue else out + '/sidecar (as a component)'}")
    return EXIT_OK


def _admission(args: argparse.Namespace, policies: list[FrameworkPolicy]) -> int:
    from mkpolicy.cli.common import EXIT_OK, EXIT_USAGE, error, kueue_config, report_policy_error
    from mkpolicy.engine.admission_policies import (
        AdmissionOptions,
        admission_manifests,
        render,
        webhook_configurations,
    )
    from mkpolicy.errors import MkpolicyError, PolicyError
    from mkpolicy.kube.labelselector import both, excluding

    try:
        kueue = kueue_config(args)
    except MkpolicyError as exc:
        error(str(exc))
        return EXIT_USAGE
    labels = {}
    for item in args.namespace_label:
        key, sep, value = item.partition("=")
        if not sep or not key:
            print(f"mkpolicy export: --namespace-label: expected KEY=VALUE; found {item!r}", file=sys.stderr)
            return EXIT_USAGE
        labels[key] = value
    # Kueue's webhook configurations leave out kube-system and its own namespace (config/components/webhook).
    options = AdmissionOptions(
        map_version=args.map_version,
        name_prefix=args.name_prefix,
        namespace_selector=both(
            excluding(("kube-system", kueue.namespace)), {"matchLabels": labels} if labels else None
        ),
        kueue=kueue,
        default_local_queue=not args.no_default_queue,
        managed_by=args.managed_by,
        managed_owner_kinds=frozenset(p.spec.framework for p in policies if p.spec.integration is not None),
    )
    chosen = [p for p in sorted(policies, key=lambda p: p.name) if p.spec.integration is not None]
    header = ["Admission policies for kinds queued by mkpolicy controller (mkpolicy export admission)."]
    header += [
        f"left out: policy {p.name} ({p.spec.framework}): no spec.integration"
        for p in policies
        if p.spec.integration is None
    ]
    manifests = []
    try:
        if args.webhook:
            namespace, sep, service = args.webhook.partition("/")
            if not sep or not namespace or not service or not args.ca_bundle:
                print("mkpolicy export: --webhook NAMESPACE/SERVICE needs --ca-bundle FILE", file=sys.stderr)
                return EXIT_USAGE
            with open(args.ca_bundle, "rb") as fh:
                manifests = webhook_configurations(chosen, (namespace, service), fh.read(), options)
        else:
            for policy in chosen:
                manifests += admission_manifests(policy, options)
    except PolicyError as exc:
        return report_policy_error(exc)
    except OSError as exc:
        print(f"mkpolicy export: --ca-bundle {args.ca_bundle!r}: {exc.strerror}", file=sys.stderr)
        return EXIT_USAGE
    if not chosen:
        print("warning: no policy has spec.integration; nothing to export", file=sys.stderr)
    sys.stdout.write(render(manifests, header))
    return EXIT_OK
