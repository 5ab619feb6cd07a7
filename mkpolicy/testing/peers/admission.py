"""MutatingAdmissionPolicy on a real kube-apiserver: the oracle for mkpolicy's patch semantics.

kube-apiserver 1.36 serves ``admissionregistration.k8s.io/v1`` MutatingAdmissionPolicy with
no flag (the ``MutatingAdmissionPolicy`` gate is GA and on by default:
k8s.io/apiserver ``pkg/features/kube_features.go``; its admission plugin is in the default-on
list of k8s.io/kubernetes ``pkg/kubeapiserver/options/plugins.go``).

:class:`MapOracle` installs each :class:`MapCase`'s mutations as a real policy and binding
(selecting the case's objects by a label, in a namespace labelled for the oracle), waits
until the server's policy informers have them (a sentinel policy installed last acts),
creates each case's object and returns what the server stored, or how it refused. A final
marker mutation (an annotation, removed from the answer) proves every stored object went
through its policy.

Only the names a MutatingAdmissionPolicy has exist there (``object``, ``oldObject``,
``params``, ``variables``, ``namespaceObject``, ``request``, ``authorizer``);
:func:`map_expression` maps a FrameworkPolicy's creation expressions onto them
(docs/oracles.md, "Variables").
"""

from __future__ import annotations

import itertools
import json
import secrets
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mkpolicy.cel.ast import Ident, Select
from mkpolicy.cel.parser import parse
from mkpolicy.testing.apiserver import ApiError
from mkpolicy.testing.peers.controlplane import KubeCluster

MAP_API = "admissionregistration.k8s.io/v1"
#: The label selecting a case's objects (its value: the case's name).
CASE_LABEL = "oracle.mkpolicy.io/case"
#: The label of the namespace the bindings match.
NAMESPACE_LABEL = "oracle.mkpolicy.io/map"
#: The annotation the marker mutation sets (removed from what :meth:`MapOracle.run` returns).
MARK = "oracle.mkpolicy.io/mutated"
_MARKER = {
    "patchType": "ApplyConfiguration",
    "applyConfiguration": {"expression": f'Object{{metadata: Object.metadata{{annotations: {{"{MARK}": "true"}}}}}}'},
}
#: Names only a FrameworkPolicy has: an expression using one has no MutatingAdmissionPolicy form.
ONLY_MKPOLICY = ("workerObject", "workload", "workloadName", "origin", "cluster", "now")
#: Generous: the server's policy informers pick a new policy up within a second or two.
EFFECTIVE_TIMEOUT = 60.0


class NoAdmissionPolicyForm(ValueError):
    """An expression uses a name a MutatingAdmissionPolicy does not have."""


def map_expression(expression: str) -> str:
    """A FrameworkPolicy creation expression as a MutatingAdmissionPolicy expression.

    ``managerObject`` becomes ``object`` (at admission the object being created is the
    only one; its ``metadata.uid`` is empty: kube-apiserver wipes a CREATE's uid before
    admission, k8s.io/apiserver ``pkg/endpoints/handlers/create.go``). Raises :class:`NoAdmissionPolicyForm` for
    the names of :data:`ONLY_MKPOLICY`.
    """
    idents = [node for node in parse(expression).walk() if isinstance(node, Ident)]
    used = sorted({node.name for node in idents if node.name in ONLY_MKPOLICY})
    if used:
        raise NoAdmissionPolicyForm(f"uses {', '.join(used)}, which a MutatingAdmissionPolicy does not have")
    out = expression
    for node in sorted(idents, key=lambda n: -n.pos):  # from the end: earlier offsets stay valid
        if node.name == "managerObject" and out.startswith("managerObject", node.pos):
            out = out[: node.pos] + "object" + out[node.pos + len("managerObject") :]
    return out


def variables_used(expressions: Iterable[str], variables: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The ``(name, expression)`` of ``variables`` that ``expressions`` use, directly or through
    other variables, in their order (a MutatingAdmissionPolicy compiles every variable it
    declares, so one that reads a name only mkpolicy has must be left out when unused)."""
    declared = dict(variables)
    wanted: set[str] = set()
    pending = list(expressions)
    while pending:
        for node in parse(pending.pop()).walk():
            if not (isinstance(node, Select) and isinstance(node.operand, Ident) and node.operand.name == "variables"):
                continue
            if node.field in declared and node.field not in wanted:
                wanted.add(node.field)
                pending.append(declared[node.field])
    return [(name, expression) for name, expression in variables if name in wanted]


def cel_literal(value: Any) -> str:
    """``value`` (JSON) as a CEL literal Kubernetes' type checker accepts (members of maps and lists as dyn)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: dyn({cel_literal(v)})" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(f"dyn({cel_literal(v)})" for v in value) + "]"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return repr(value)
    return json.dumps(value)


def json_patch_expression(ops: Iterable[Mapping[str, Any]]) -> str:
    """A JSONPatch expression returning ``ops`` (``{op, path, from?, value?}`` each)."""
    items = []
    for op in ops:
        fields = [f"{k}: {cel_literal(v)}" for k, v in op.items() if k in ("op", "path", "from")]
        if "value" in op:
            fields.append(f"value: {cel_literal(op['value'])}")
        items.append("JSONPatch{" + ", ".join(fields) + "}")
    return "[" + ", ".join(items) + "]"


def apply_configuration_expression(value: Mapping[str, Any], type_name: str = "Object") -> str:
    """An ApplyConfiguration expression returning ``value``: each JSON object an ``Object.<path>{...}``."""

    def literal(item: Any, name: str) -> str:
        if isinstance(item, dict):
            return name + "{" + ", ".join(f"{k}: {literal(v, f'{name}.{k}')}" for k, v in item.items()) + "}"
        if isinstance(item, list):
            return "[" + ", ".join(literal(v, name) for v in item) + "]"
        return cel_literal(item)

    return literal(dict(value), type_name)


@dataclass
class MapCase:
    """One oracle run: ``obj`` created under a policy of ``mutations`` (``{"patchType", "expression"}``)."""

    name: str
    obj: dict[str, Any]
    mutations: Sequence[Mapping[str, str]]
    variables: Sequence[Mapping[str, str]] = ()

    def policy(self, rule: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """The MutatingAdmissionPolicy and its binding (failurePolicy Fail, as mkpolicy's default)."""
        mutations: list[dict[str, Any]] = []
        for m in self.mutations:
            key = "jsonPatch" if m["patchType"] == "JSONPatch" else "applyConfiguration"
            mutations.append({"patchType": m["patchType"], key: {"expression": m["expression"]}})
        name = f"oracle-{self.name}"
        spec: dict[str, Any] = {
            "matchConstraints": {"resourceRules": [dict(rule)]},
            "failurePolicy": "Fail",
            "reinvocationPolicy": "Never",
            "mutations": [*mutations, _MARKER],
        }
        if self.variables:
            spec["variables"] = [dict(v) for v in self.variables]
        binding = {
            "policyName": name,
            "matchResources": {
                "namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: "true"}},
                "objectSelector": {"matchLabels": {CASE_LABEL: self.name}},
            },
        }
        return (
            {"apiVersion": MAP_API, "kind": "MutatingAdmissionPolicy", "metadata": {"name": name}, "spec": spec},
            {"apiVersion": MAP_API, "kind": "MutatingAdmissionPolicyBinding", "metadata": {"name": name},
             "spec": binding},
        )  # fmt: skip

    def labelled(self) -> dict[str, Any]:
        """The object as created: :data:`CASE_LABEL` added."""
        obj: dict[str, Any] = json.loads(json.dumps(self.obj))
        obj.setdefault("metadata", {}).setdefault("labels", {})[CASE_LABEL] = self.name
        return obj


@dataclass
class Outcome:
    """What happened to a case: its object ``stored``, or refused at a ``stage`` with ``error``.

    Stages: ``policy`` (the server refused the policy itself: an expression that does not
    compile), ``patch`` (the policy denied the request: a mutation failed), ``object`` (the
    mutated object failed the server's validation).
    """

    stored: dict[str, Any] | None = None
    stage: str = "stored"
    error: Exception | None = field(default=None)


def create_admitted(kube: KubeCluster, obj: Mapping[str, Any], timeout: float = EFFECTIVE_TIMEOUT) -> dict[str, Any]:
    """``kube.admin.create(obj)``, retried while admission does not know the object's kind yet.

    A custom resource whose CRD was created just now: the admission plugins' REST mapper
    learns its kind at its next discovery refresh, and until then kube-apiserver refuses the
    object ("Resource kind ... not found. There can be a delay between when
    CustomResourceDefinitions are created and when they are available", k8s.io/apiserver
    pkg/admission/plugin/policy). That is no outcome of a case. Other refusals raise ApiError.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            stored: dict[str, Any] = kube.admin.create(obj)
            return stored
        except ApiError as exc:
            if "There can be a delay between when CustomResourceDefinitions are created" not in str(exc):
                raise
            if time.monotonic() > deadline:
                raise AssertionError(f"{obj.get('kind')} still unknown to admission after {timeout:.0f}s") from exc
            time.sleep(0.5)


class MapOracle:
    """Cases run on ``kube`` in ``namespace`` (labelled :data:`NAMESPACE_LABEL` by the caller)."""

    def __init__(self, kube: KubeCluster, namespace: str) -> None:
        self.kube = kube
        self.namespace = namespace

    def _rule(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        res = self.kube.connection.resource(str(obj["apiVersion"]), str(obj["kind"]))
        return {"apiGroups": [res.group], "apiVersions": [res.version], "resources": [res.plural],
                "operations": ["CREATE"]}  # fmt: skip

    def run(self, cases: Sequence[MapCase]) -> dict[str, Outcome]:
        """Install every case's policy, create every object; the outcomes by case name.

        A sentinel policy (on a ConfigMap) is installed last: once it acts, the server's
        policy informers have delivered every earlier policy and binding (they deliver in
        order). The policies are removed afterwards; the objects stay.
        """
        installed: list[dict[str, Any]] = []
        outcomes: dict[str, Outcome] = {}
        sentinel = MapCase(f"sentinel-{secrets.token_hex(3)}", {"apiVersion": "v1", "kind": "ConfigMap",
                                                               "metadata": {"name": "sentinel"}}, [])  # fmt: skip
        try:
            for case in [*cases, sentinel]:
                policy, binding = case.policy(self._rule(case.obj))
                try:
                    installed.append(self.kube.apply(policy))
                except ApiError as exc:
                    if exc.code != 422:
                        raise
                    outcomes[case.name] = Outcome(stage="policy", error=exc)
                    continue
                installed.append(self.kube.apply(binding))
            self._await(sentinel)
            for case in cases:
                if case.name not in outcomes:
                    outcomes[case.name] = self._create(case)
            return outcomes
        finally:
            for doc in reversed(installed):
                try:
                    self.kube.admin.delete(doc["apiVersion"], doc["kind"], doc["metadata"]["name"])
                except ApiError as exc:
                    if exc.code != 404:
                        raise

    def _await(self, sentinel: MapCase) -> None:
        deadline = time.monotonic() + EFFECTIVE_TIMEOUT
        for attempt in itertools.count():
            obj = sentinel.labelled()
            obj["metadata"].update(name=f"sentinel-{attempt}", namespace=self.namespace)
            stored = self.kube.admin.create(obj)
            if MARK in (stored["metadata"].get("annotations") or {}):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the oracle's policies not effective within {EFFECTIVE_TIMEOUT:.0f}s")
            time.sleep(0.2)

    def _create(self, case: MapCase) -> Outcome:
        obj = case.labelled()
        obj["metadata"]["namespace"] = self.namespace
        try:
            stored = create_admitted(self.kube, obj)
        except ApiError as exc:
            # kube-apiserver's denial: "policy '<name>' with binding '<name>' denied request: ..."
            # (k8s.io/apiserver pkg/admission/plugin/policy/generic/policy_dispatcher.go, PolicyError.Error).
            denied = str(exc).startswith(f"policy 'oracle-{case.name}'")
            return Outcome(stage="patch" if denied else "object", error=exc)
        annotations = stored["metadata"].get("annotations") or {}
        if MARK not in annotations:
            raise AssertionError(f"oracle case {case.name}: stored without its policy's marker: {stored}")
        del annotations[MARK]
        if not annotations:
            del stored["metadata"]["annotations"]
        return Outcome(stored=stored)
