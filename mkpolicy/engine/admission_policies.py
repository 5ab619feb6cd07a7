"""The admission Kueue's webhook gives a kind, as admission policies (``mkpolicy export admission``,
and ``mkpolicy webhook`` where MutatingAdmissionPolicy is not available).

Kueue's job webhook (``pkg/controller/jobframework/base_webhook.go``, v0.19.2) does, for the
kinds it integrates, what these MutatingAdmissionPolicies (MAP, ``admissionregistration.k8s.io/v1``
from Kubernetes 1.36, ``v1beta1`` on 1.34/1.35 with the feature gate) and
ValidatingAdmissionPolicies (VAP, v1) do for a kind with ``spec.integration``:

* :func:`default_queue_policy` — ``ApplyDefaultLocalQueue`` (``defaults.go``): the
  ``kueue.x-k8s.io/queue-name: default`` label when a LocalQueue named ``default`` exists in the
  object's namespace (``paramKind: LocalQueue``, ``paramRef: {name: default,
  parameterNotFoundAction: Allow}``: without that queue the policy does not apply); from
  Kueue 0.19 only in namespaces ``managedJobsNamespaceSelector`` selects
  (``ApplyDefaultLocalQueueWithManagedJobsNamespaceSelector``), the binding's
  ``namespaceSelector``;
* :func:`suspend_policy` — ``ApplyDefaultForSuspend`` (``WorkloadShouldBeSuspended``,
  ``utils.go``): a queued object is created suspended, in any namespace, with the policy's
  ``suspend`` patches, and marked ``kueue.mkpolicy.io/suspended-by-kueue`` so that the
  controller's resume lifts only this suspension. With ``manageJobsWithoutQueueName`` a second
  MAP suspends objects without a queue name too, bound to the namespaces
  ``managedJobsNamespaceSelector`` selects. An object the user creates suspended is left
  unmarked;
* :func:`managed_by_policy` — ``ApplyDefaultForManagedBy``, as a per-cluster decision (a MAP
  cannot walk LocalQueue -> ClusterQueue -> AdmissionChecks): the managedBy field set to
  MultiKueue at creation on a manager cluster;
* :func:`validation_policies` — ``ValidateJobOnCreate``/``ValidateJobOnUpdate``
  (``validation.go``): queue-name a DNS-1123 subdomain, immutable while the object runs and not
  emptied where a default LocalQueue exists; max-exec-time a positive integer, immutable unless
  suspended before and after; the WorkloadPriorityClass label never added to a running object
  and never removed; the prebuilt-workload name immutable while the object runs.

Worker copies (labelled ``kueue.x-k8s.io/multikueue-origin``) are never suspended or
defaulted: on a worker, the controller adopts them with their prebuilt Workload.

kube-apiserver runs the MAPs of a request in no set order, and reinvokes (``reinvocationPolicy:
IfNeeded``) only the MAPs whose matchConditions matched on the first pass
(``k8s.io/apiserver/pkg/admission/plugin/policy/mutating/dispatcher.go``). So no matchCondition
here tests what another MAP writes: whether the object is queued (a label the default-queue MAP
or a webhook may add) is tested inside the mutations, and a MAP that ran before the label came
runs again once it is there.

Every function returns plain manifests (dicts); :func:`admission_manifests` gathers them for a
policy and :func:`render` writes YAML. :func:`evaluate_mutating` and :func:`evaluate_validating`
run a rendered policy on an object with mkpolicy's engine (CEL and mutations exactly as
Kubernetes applies them): what tests and the ``mkpolicy webhook`` fallback use.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from mkpolicy.cel import Environment
from mkpolicy.cel.ast import Comprehension, Ident, Node
from mkpolicy.engine.apply import merge_schema
from mkpolicy.engine.expressions import Locator, PolicyExpression
from mkpolicy.engine.generic import ORIGIN_LABEL, PREBUILT_WORKLOAD_KEY
from mkpolicy.engine.integration import patch_expression
from mkpolicy.engine.mutation import CompiledMutation
from mkpolicy.engine.workload import MAX_EXEC_TIME_LABEL, PRIORITY_CLASS_LABEL, QUEUE_LABEL
from mkpolicy.errors import PolicyError
from mkpolicy.jsonvalues import copy_json
from mkpolicy.kube.kueueconfig import KueueConfig
from mkpolicy.kube.labelselector import both
from mkpolicy.policy import FrameworkPolicy, parse_gvk
from mkpolicy.policy.model import SUSPENDED_BY_KUEUE, check_pointer
from mkpolicy.policy.resources import plural
from mkpolicy.structural import Schema

GROUP = "admissionregistration.k8s.io"
LOCAL_QUEUE = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue"}
#: Argo's controller instance label (``workflows.argoproj.io/controller-instanceid``).
ARGO_INSTANCE_ID_LABEL = "workflows.argoproj.io/controller-instanceid"
#: The names admission expressions see (``object``, ``oldObject``, ``params``, ``variables``, ``request``).
ADMISSION_VARIABLES = frozenset({"object", "oldObject", "params", "variables", "request"})
IS_SUSPENDED_PATH = ("spec", "integration", "isSuspended")
_DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


@dataclass(frozen=True)
class AdmissionOptions:
    """How the manifests are rendered."""

    #: ``admissionregistration.k8s.io`` version of the MAPs: ``v1`` (1.36+) or ``v1beta1``.
    map_version: Literal["v1", "v1beta1"] = "v1"
    #: Prefix of every object name.
    name_prefix: str = "mkpolicy"
    #: Every binding's ``matchResources.namespaceSelector`` (Kueue's webhook configurations leave out
    #: kube-system and Kueue's namespace; ``mkpolicy export admission`` does the same).
    namespace_selector: Mapping[str, Any] | None = None
    #: Kueue's configuration: its version, ``manageJobsWithoutQueueName`` and
    #: ``managedJobsNamespaceSelector`` (which narrows the default-queue and unqueued-suspend bindings).
    kueue: KueueConfig = field(default_factory=KueueConfig)
    #: Render the default-LocalQueue MAP and VAP.
    default_local_queue: bool = True
    #: Render the managedBy MAP (a manager cluster whose queues all dispatch through MultiKueue).
    managed_by: bool = False
    #: Kinds (``Kind.version.group``) whose children are left alone: their own integration
    #: queues the parent (``IsOwnerManagedByKueue`` approximated on the controller owner).
    managed_owner_kinds: frozenset[str] = frozenset()


DEFAULTS = AdmissionOptions()


def _set_label(key: str, value: str) -> str:
    """An ApplyConfiguration setting one label (the labels map merges)."""
    return f'Object{{metadata: Object.metadata{{labels: {{"{key}": "{value}"}}}}}}'


# -- expressions ----------------------------------------------------------------------------


def _label(obj: str, key: str) -> str:
    return f'{obj}.metadata.?labels[?"{key}"].orValue("")'


def _annotation(obj: str, key: str) -> str:
    return f'{obj}.metadata.?annotations[?"{key}"].orValue("")'


def _as(obj: str, expression: str) -> str:
    """``expression`` (written against ``object``) rewritten to read ``obj`` instead: every
    ``object`` identifier renamed (Kubernetes' admission CEL has no ``cel.bind`` to rebind it)."""
    if obj == "object":
        return f"({expression})"
    program = PolicyExpression(expression, (), "expression", Locator(), Environment.of(ADMISSION_VARIABLES),
                               typecheck=False)  # fmt: skip
    positions = sorted((n.pos for n in program.ast.walk() if isinstance(n, Ident) and n.name == "object"), reverse=True)
    out = expression
    for pos in positions:
        out = out[:pos] + obj + out[pos + len("object") :]
    return f"({out})"


def _pointer_expression(tokens: Sequence[str], obj: str) -> tuple[str, str]:
    """(has-test, value) CEL for a JSON pointer's tokens under ``obj``: an optional chain."""
    chain = obj + "".join(f'[?"{t}"]' for t in tokens)
    return f"{chain}.hasValue()", f"{chain}.orValue(null)"


def _worker_copy() -> dict[str, str]:
    return {"name": "not-a-worker-copy", "expression": f'{_label("object", ORIGIN_LABEL)} == ""'}


def _owner_condition(options: AdmissionOptions) -> list[dict[str, str]]:
    if not options.managed_owner_kinds:
        return []
    kinds = sorted(options.managed_owner_kinds)
    pairs = [f'"{parse_gvk(framework).api_version}/{parse_gvk(framework).kind}"' for framework in kinds]
    expression = (
        "!object.metadata.?ownerReferences.orValue([]).exists(r, r.?controller.orValue(false) && "
        f'(r.apiVersion + "/" + r.kind) in [{", ".join(pairs)}])'
    )
    return [{"name": "owner-not-managed-by-kueue", "expression": expression}]


def admission_dialect_gaps(ast: Node) -> list[tuple[int, str]]:
    """(offset, what) of each construct in ``ast`` that mkpolicy's CEL has and kube-apiserver's
    admission CEL does not: ``cel.bind`` (cel-go's ``ext.Bindings``, which the base environment of
    k8s.io/apiserver ``pkg/cel/environment/base.go``, v1.36, does not load: "undeclared reference
    to 'bind'")."""
    return [(n.pos, "cel.bind") for n in ast.walk() if isinstance(n, Comprehension) and n.macro == "bind"]


def _exportable(policy: FrameworkPolicy, text: str, path: tuple[str | int, ...], where: str) -> None:
    """Refuse an expression that needs more than ``object`` (admission has no Workload, no params
    map) or that kube-apiserver's admission CEL cannot compile (MKP607), located in the policy file."""
    env = Environment.of(ADMISSION_VARIABLES | {"managerObject", "workerObject", "workload", "podSetsInfo"})
    expression = PolicyExpression(text, path, where, Locator(policy), env, typecheck=False)
    extra = sorted(
        {n.name for n in expression.ast.walk() if isinstance(n, Ident) and n.name in env.variables} - {"object"}
    )
    if extra:
        raise PolicyError(
            f"policy {policy.name}: {where} uses {', '.join(extra)}; an admission policy can only read the "
            "object (write it without variables and params to export it)"
        )
    gaps = admission_dialect_gaps(expression.ast)
    if gaps:
        offset, construct = gaps[0]
        raise PolicyError(
            f"MKP607 admission-dialect: policy {policy.name}: {where} uses {construct}, which kube-apiserver's "
            "admission CEL does not have; expected an expression a MutatingAdmissionPolicy accepts (repeat the "
            "bound expression instead)",
            Locator(policy).locate(path, text, offset, where),
        )


# -- manifests --------------------------------------------------------------------------------


def _rules(policy: FrameworkPolicy, operations: list[str]) -> dict[str, Any]:
    gvk = policy.spec.gvk
    return {
        "resourceRules": [
            {
                "apiGroups": [gvk.group],
                "apiVersions": [gvk.version],
                "operations": operations,
                "resources": [plural(policy)],
            }
        ]
    }


def binding_selector(options: AdmissionOptions, *, managed_only: bool = False) -> dict[str, Any] | None:
    """A binding's namespace selector: :attr:`AdmissionOptions.namespace_selector`, and with
    ``managed_only`` Kueue's ``managedJobsNamespaceSelector`` as well."""
    base = None if options.namespace_selector is None else dict(options.namespace_selector)
    return both(base, options.kueue.selector) if managed_only else base


def _map(
    name: str,
    policy: FrameworkPolicy,
    options: AdmissionOptions,
    operations: list[str],
    conditions: list[dict[str, str]],
    mutations: list[dict[str, Any]],
    *,
    param_kind: bool = False,
    managed_only: bool = False,
) -> list[dict[str, Any]]:
    api = f"{GROUP}/{options.map_version}"
    spec: dict[str, Any] = {}
    if param_kind:
        spec["paramKind"] = dict(LOCAL_QUEUE)
    spec["matchConstraints"] = _rules(policy, operations)
    if conditions:
        spec["matchConditions"] = conditions
    spec["failurePolicy"] = "Fail"
    spec["reinvocationPolicy"] = "IfNeeded"
    spec["mutations"] = mutations
    binding: dict[str, Any] = {"policyName": name}
    if param_kind:
        binding["paramRef"] = {"name": "default", "parameterNotFoundAction": "Allow"}
    selector = binding_selector(options, managed_only=managed_only)
    if selector is not None:
        binding["matchResources"] = {"namespaceSelector": copy_json(selector)}
    return [
        {"apiVersion": api, "kind": "MutatingAdmissionPolicy", "metadata": {"name": name}, "spec": spec},
        {"apiVersion": api, "kind": "MutatingAdmissionPolicyBinding", "metadata": {"name": name}, "spec": binding},
    ]


def _mutation(patch_type: str, expression: str) -> dict[str, Any]:
    field_name = "jsonPatch" if patch_type == "JSONPatch" else "applyConfiguration"
    return {"patchType": patch_type, field_name: {"expression": expression}}


def _name(options: AdmissionOptions, policy: FrameworkPolicy, what: str) -> str:
    return f"{options.name_prefix}-{policy.name}-{what}"


def default_queue_policy(policy: FrameworkPolicy, options: AdmissionOptions = DEFAULTS) -> list[dict[str, Any]]:
    """The MAP and binding that label a new object with the ``default`` LocalQueue when one exists."""
    conditions = [
        _worker_copy(),
        {"name": "no-queue-name", "expression": f'{_label("object", QUEUE_LABEL)} == ""'},
        *_owner_condition(options),
    ]
    mutation = _mutation("ApplyConfiguration", _set_label(QUEUE_LABEL, "default"))
    name = _name(options, policy, "default-queue")
    managed_only = options.kueue.at_least(0, 19)
    return _map(name, policy, options, ["CREATE"], conditions, [mutation], param_kind=True, managed_only=managed_only)


def suspend_policy(policy: FrameworkPolicy, options: AdmissionOptions = DEFAULTS) -> list[dict[str, Any]]:
    """The MAP and binding that create queued objects suspended, with the marker; with
    ``manageJobsWithoutQueueName`` also the MAP and binding suspending unqueued objects in the
    namespaces ``managedJobsNamespaceSelector`` selects."""
    out = _suspend_map(policy, options, queued=True)
    if options.kueue.manage_jobs_without_queue_name:
        out += _suspend_map(policy, options, queued=False)
    return out


def _suspend_map(policy: FrameworkPolicy, options: AdmissionOptions, *, queued: bool) -> list[dict[str, Any]]:
    integration = policy.spec.integration
    if integration is None:
        raise PolicyError(f"policy {policy.name} has no spec.integration: there is nothing to suspend with")
    is_suspended = integration.is_suspended
    _exportable(policy, is_suspended, IS_SUSPENDED_PATH, "integration.isSuspended")
    # Tested in the mutations, not as a matchCondition: the label may come from another MAP (see
    # the module's docstring).
    queue = f'{_label("object", QUEUE_LABEL)} {"!=" if queued else "=="} ""'
    conditions = [_worker_copy(), *_owner_condition(options)]
    marked = f'{_annotation("object", SUSPENDED_BY_KUEUE)} == "true"'
    mutations = [
        # First the marker, while the object is still as the user made it: only a running
        # object gets it, so a user's own suspension stays unmarked.
        _mutation(
            "ApplyConfiguration",
            f"{queue} && !({is_suspended}) ? Object{{metadata: Object.metadata{{annotations: "
            f'{{"{SUSPENDED_BY_KUEUE}": "true"}}}}}} : Object{{}}',
        ),
    ]
    for i, item in enumerate(integration.suspend):
        text, field_name = patch_expression(item)
        path = ("spec", "integration", "suspend", i, field_name, "expression")
        _exportable(policy, text, path, f"integration.suspend patch #{i + 1}")
        guard = f"{queue} && {marked} && !({is_suspended})"
        empty = "[]" if item.type == "JSONPatch" else "Object{}"
        mutations.append(_mutation(item.type, f"{guard} ? ({text}) : {empty}"))
    name = _name(options, policy, "suspend" if queued else "suspend-unqueued")
    return _map(name, policy, options, ["CREATE"], conditions, mutations, managed_only=not queued)


def managed_by_policy(policy: FrameworkPolicy, options: AdmissionOptions = DEFAULTS) -> list[dict[str, Any]]:
    """The MAP and binding that set the policy's managedBy field to its MultiKueue value at creation
    (when the field is absent and the object is queued)."""
    managed_by = policy.spec.managed_by
    if managed_by is None:
        raise PolicyError(f"policy {policy.name} has managedBy: null: there is no field to default")
    tokens = check_pointer(managed_by.path)
    has, _ = _pointer_expression(tokens, "object")
    conditions = [_worker_copy(), {"name": "managed-by-unset", "expression": f"!{has}"}]
    # Queued is tested in the mutation: the label may come from another MAP (module docstring).
    mutation = _mutation(
        "JSONPatch",
        f'{_label("object", QUEUE_LABEL)} != "" ? '
        f'[JSONPatch{{op: "add", path: "{managed_by.path}", value: "{managed_by.value}"}}] : []',
    )
    return _map(_name(options, policy, "managed-by"), policy, options, ["CREATE"], conditions, [mutation])


def _vap(
    name: str,
    policy: FrameworkPolicy,
    options: AdmissionOptions,
    validations: list[dict[str, str]],
    *,
    param_kind: bool = False,
    operations: Iterable[str] = ("CREATE", "UPDATE"),
) -> list[dict[str, Any]]:
    api = f"{GROUP}/v1"
    spec: dict[str, Any] = {}
    if param_kind:
        spec["paramKind"] = dict(LOCAL_QUEUE)
    spec["matchConstraints"] = _rules(policy, list(operations))
    spec["matchConditions"] = [_worker_copy()]
    spec["failurePolicy"] = "Fail"
    spec["validations"] = validations
    binding: dict[str, Any] = {"policyName": name, "validationActions": ["Deny"]}
    if param_kind:
        binding["paramRef"] = {"name": "default", "parameterNotFoundAction": "Allow"}
    selector = binding_selector(options)
    if selector is not None:
        binding["matchResources"] = {"namespaceSelector": copy_json(selector)}
    return [
        {"apiVersion": api, "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name}, "spec": spec},
        {"apiVersion": api, "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name}, "spec": binding},
    ]


def validation_policies(policy: FrameworkPolicy, options: AdmissionOptions = DEFAULTS) -> list[dict[str, Any]]:
    """The VAPs (and bindings) of Kueue's job validation (``validation.go``)."""
    integration = policy.spec.integration
    if integration is None:
        raise PolicyError(f"policy {policy.name} has no spec.integration: there is nothing to validate with")
    _exportable(policy, integration.is_suspended, IS_SUSPENDED_PATH, "integration.isSuspended")
    update = 'request.operation == "UPDATE"'
    new_suspended = _as("object", integration.is_suspended)
    old_suspended = _as("oldObject", integration.is_suspended)
    queue, old_queue = _label("object", QUEUE_LABEL), _label("oldObject", QUEUE_LABEL)
    exec_time, old_exec_time = _label("object", MAX_EXEC_TIME_LABEL), _label("oldObject", MAX_EXEC_TIME_LABEL)
    wpc, old_wpc = _label("object", PRIORITY_CLASS_LABEL), _label("oldObject", PRIORITY_CLASS_LABEL)
    prebuilt = f'({_annotation("object", PREBUILT_WORKLOAD_KEY)} + "|" + {_label("object", PREBUILT_WORKLOAD_KEY)})'
    old_prebuilt = prebuilt.replace("object.", "oldObject.")
    validations = [
        {
            "expression": f'{queue} == "" || ({queue}.matches("{_DNS_SUBDOMAIN}") && size({queue}) <= 253)',
            "message": f"metadata.labels[{QUEUE_LABEL}]: Invalid value: must be a lowercase RFC 1123 subdomain",
        },
        {
            "expression": f'!has(object.metadata.labels) || !("{MAX_EXEC_TIME_LABEL}" in object.metadata.labels) || '
            f'({exec_time}.matches("^[0-9]+$") && int({exec_time}) > 0)',
            "message": f"metadata.labels[{MAX_EXEC_TIME_LABEL}]: Invalid value: should be greater than 0",
        },
        {
            "expression": f"!({update}) || {new_suspended} || {queue} == {old_queue}",
            "message": f"metadata.labels[{QUEUE_LABEL}]: Invalid value: field is immutable",
        },
        {
            "expression": f"!({update}) || ({new_suspended} && {old_suspended}) || {exec_time} == {old_exec_time}",
            "message": f"metadata.labels[{MAX_EXEC_TIME_LABEL}]: Invalid value: field is immutable",
        },
        {
            "expression": f'!({update}) || {new_suspended} || {old_wpc} != "" || {wpc} == ""',
            "message": f"metadata.labels[{PRIORITY_CLASS_LABEL}]: Invalid value: WorkloadPriorityClass cannot be "
            "added to a non-suspended workload",
        },
        {
            "expression": f'!({update}) || {wpc} != "" || {old_wpc} == ""',
            "message": f"metadata.labels[{PRIORITY_CLASS_LABEL}]: Invalid value: WorkloadPriorityClass cannot be "
            "removed from a workload",
        },
        {
            "expression": f"!({update}) || {new_suspended} || {prebuilt} == {old_prebuilt}",
            "message": f"{PREBUILT_WORKLOAD_KEY}: Invalid value: field is immutable",
        },
    ]
    out = _vap(_name(options, policy, "validate"), policy, options, validations)
    if options.default_local_queue:
        out += _vap(
            _name(options, policy, "validate-default-queue"),
            policy,
            options,
            [
                {
                    "expression": f'{queue} != "" || {old_queue} == ""',
                    "message": f'metadata.labels[{QUEUE_LABEL}]: Invalid value: "": queue-name must not be '
                    "empty in namespace with default queue",
                }
            ],
            param_kind=True,
            operations=("UPDATE",),
        )
    return out


def admission_manifests(policy: FrameworkPolicy, options: AdmissionOptions = DEFAULTS) -> list[dict[str, Any]]:
    """Every manifest for one policy with ``spec.integration``: default queue (if chosen),
    suspend, managedBy (if chosen), validation."""
    out: list[dict[str, Any]] = []
    if options.default_local_queue:
        out += default_queue_policy(policy, options)
    out += suspend_policy(policy, options)
    if options.managed_by:
        out += managed_by_policy(policy, options)
    out += validation_policies(policy, options)
    return out


def webhook_configurations(
    policies: Sequence[FrameworkPolicy],
    service: tuple[str, str],
    ca_bundle: bytes,
    options: AdmissionOptions = DEFAULTS,
    port: int = 9443,
) -> list[dict[str, Any]]:
    """A MutatingWebhookConfiguration and a ValidatingWebhookConfiguration sending the policies'
    kinds to ``mkpolicy webhook`` behind ``service`` (namespace, name): the same admission as the
    admission policies, where MutatingAdmissionPolicy is not available."""
    chosen = [p for p in policies if p.spec.integration is not None]
    namespace, name = service
    bundle = base64.b64encode(ca_bundle).decode()

    def hook(kind: str, path: str, operations: list[str]) -> dict[str, Any]:
        rules = [rule for p in chosen for rule in _rules(p, operations)["resourceRules"]]
        webhook: dict[str, Any] = {
            "name": f"{path.strip('/')}.{options.name_prefix}.mkpolicy.io",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Fail",
            "timeoutSeconds": 10,
            "clientConfig": {"service": {"namespace": namespace, "name": name, "path": path, "port": port},
                             "caBundle": bundle},
            "rules": [{**r, "scope": "Namespaced"} for r in rules],
            "matchConditions": [_worker_copy()],
        }  # fmt: skip
        if kind == "Mutating":
            webhook["reinvocationPolicy"] = "IfNeeded"
        if options.namespace_selector is not None:
            webhook["namespaceSelector"] = copy_json(dict(options.namespace_selector))
        return {
            "apiVersion": f"{GROUP}/v1",
            "kind": f"{kind}WebhookConfiguration",
            "metadata": {"name": f"{options.name_prefix}-admission"},
            "webhooks": [webhook],
        }

    return [hook("Mutating", "/mutate", ["CREATE", "UPDATE"]), hook("Validating", "/validate", ["CREATE", "UPDATE"])]


def render(manifests: Iterable[Mapping[str, Any]], header: Sequence[str] = ()) -> str:
    """Manifests as one multi-document YAML stream, with an optional comment header."""
    import yaml

    lines = [f"# {line}" if line else "#" for line in header]
    body = "---\n".join(yaml.safe_dump(dict(m), sort_keys=False, width=120) for m in manifests)
    return ("\n".join(lines) + "\n" if lines else "") + body


# -- evaluation (tests, the webhook fallback) ---------------------------------------------------


def _compile(text: str, where: str) -> PolicyExpression:
    return PolicyExpression(text, (), where, Locator(), Environment.of(ADMISSION_VARIABLES))


def _bindings(
    obj: Mapping[str, Any] | None, old: Mapping[str, Any] | None, params: Any, operation: str
) -> dict[str, Any]:
    return {
        "object": dict(obj) if obj is not None else None,
        "oldObject": dict(old) if old is not None else None,
        "params": params,
        "variables": {},
        "request": {"operation": operation},
    }


def _applies(spec: Mapping[str, Any], operation: str, bindings: dict[str, Any]) -> bool:
    rules = (spec.get("matchConstraints") or {}).get("resourceRules") or []
    if not any(operation in r.get("operations", []) for r in rules):
        return False
    for condition in spec.get("matchConditions") or []:
        if _compile(condition["expression"], f"matchCondition {condition['name']}").evaluate(bindings) is not True:
            return False
    return True


def mutating_applies(
    policy: Mapping[str, Any],
    obj: Mapping[str, Any],
    *,
    old: Mapping[str, Any] | None = None,
    params: Any = None,
    operation: str = "CREATE",
) -> bool:
    """Whether a rendered MutatingAdmissionPolicy applies to ``obj``: its operation, its param
    (``params`` None: the binding found none, and ``parameterNotFoundAction: Allow`` skips a
    ``paramKind`` policy) and its matchConditions."""
    spec = policy["spec"]
    if spec.get("paramKind") is not None and params is None:
        return False
    return _applies(spec, operation, _bindings(dict(obj), old, params, operation))


def evaluate_mutating(
    policy: Mapping[str, Any],
    obj: Mapping[str, Any],
    *,
    old: Mapping[str, Any] | None = None,
    params: Any = None,
    operation: str = "CREATE",
    schema: Schema | None = None,
) -> dict[str, Any]:
    """``obj`` after a rendered MutatingAdmissionPolicy (matchConditions, then mutations in order);
    the object unchanged when it does not apply (:func:`mutating_applies`)."""
    current: dict[str, Any] = copy_json(dict(obj))
    if not mutating_applies(policy, current, old=old, params=params, operation=operation):
        return current
    return _mutated(policy, current, old, params, operation, schema)


def _mutated(
    policy: Mapping[str, Any],
    current: dict[str, Any],
    old: Mapping[str, Any] | None,
    params: Any,
    operation: str,
    schema: Schema | None = None,
) -> dict[str, Any]:
    """``current`` after the policy's mutations, in order (whether it applies already decided)."""
    merge = merge_schema(schema)
    for i, mutation in enumerate(policy["spec"].get("mutations") or []):
        patch_type = mutation["patchType"]
        text = (mutation.get("jsonPatch") or mutation.get("applyConfiguration") or {})["expression"]
        compiled = CompiledMutation(patch_type, _compile(text, f"mutation #{i + 1}"))
        current = compiled.apply(current, _bindings(current, old, params, operation), merge)
    return current


def run_mutating(
    policies: Sequence[Mapping[str, Any]],
    obj: Mapping[str, Any],
    *,
    old: Mapping[str, Any] | None = None,
    params: Any = None,
    operation: str = "CREATE",
) -> dict[str, Any]:
    """``obj`` after the MAPs ``policies``, run in the given order as kube-apiserver runs a request's
    MAPs (``k8s.io/apiserver/pkg/admission/plugin/policy/mutating/dispatcher.go``,
    ``reinvocationcontext.go``): each once, in order; then, when any applied, a second pass of
    only those that applied in the first and are ``reinvocationPolicy: IfNeeded`` (and still
    match). A MAP whose matchConditions did not hold in the first pass never runs: kube-apiserver
    runs MAPs in no set order, so the result must not depend on the order."""
    current: dict[str, Any] = copy_json(dict(obj))
    invoked: list[Mapping[str, Any]] = []
    for policy in policies:
        if mutating_applies(policy, current, old=old, params=params, operation=operation):
            current = _mutated(policy, current, old, params, operation)
            if policy["spec"].get("reinvocationPolicy") == "IfNeeded":
                invoked.append(policy)
    for policy in invoked:
        current = evaluate_mutating(policy, current, old=old, params=params, operation=operation)
    return current


def evaluate_validating(
    policy: Mapping[str, Any],
    obj: Mapping[str, Any],
    *,
    old: Mapping[str, Any] | None = None,
    params: Any = None,
    operation: str = "CREATE",
) -> list[str]:
    """The messages of the validations a rendered ValidatingAdmissionPolicy denies ``obj`` with."""
    spec = policy["spec"]
    if spec.get("paramKind") is not None and params is None:
        return []
    bindings = _bindings(obj, old, params, operation)
    if not _applies(spec, operation, bindings):
        return []
    denied = []
    for i, validation in enumerate(spec.get("validations") or []):
        if _compile(validation["expression"], f"validation #{i + 1}").evaluate(bindings) is not True:
            denied.append(str(validation["message"]))
    return denied
