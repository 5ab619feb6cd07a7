"""MutatingAdmissionPolicy on a real kube-apiserver as the oracle of mkpolicy's patch semantics.

Every case runs twice: as a real MutatingAdmissionPolicy (mkpolicy.testing.peers.admission)
on the object created in a namespace its binding matches, and through mkpolicy (``mutate``,
or the compiled policy's ``create``) whose result is then created in a namespace no policy
matches. Both answers are what the same server stores (or how it refuses), so defaulting,
pruning and metadata normalisation fall alike on both sides. Each differing case is a
documented in docs/oracles.md and asserted exactly here (DIFFERENCES).

The cases: the JSON Patch and ApplyConfiguration tables of tests/engine (read from those
modules, not copied), the oracle's own edge rows (EDGES), and each shipped policy's creation
patches on its policy tests' create cases.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from _pytest.mark.structures import ParameterSet

import mkpolicy
from mkpolicy.cel import CelEvalError
from mkpolicy.testing.apiserver import ApiError
from mkpolicy.testing.peers.admission import (
    CASE_LABEL,
    NAMESPACE_LABEL,
    MapCase,
    MapOracle,
    Outcome,
    apply_configuration_expression,
    create_admitted,
    json_patch_expression,
    map_expression,
    variables_used,
)
from mkpolicy.testing.peers.controlplane import KubeCluster

pytestmark = [pytest.mark.real_peers, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
#: Kinds the real server serves without a CRD.
BUILT_IN_GROUPS = ("", "batch", "apps")
#: ``../shared`` beside the clone (CI provides it): CRDs of kinds whose policy has no schema.
SHARED = ROOT.parent / "shared"
Verdict = tuple[str, Any]
SERVER_METADATA = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "namespace")


def _engine_tests(name: str) -> ModuleType:
    """A module of tests/engine (no package: loaded by path) for its case tables."""
    spec = importlib.util.spec_from_file_location(f"_oracle_{name}", ROOT / "tests" / "engine" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


JSONPATCH = _engine_tests("test_jsonpatch")
APPLY = _engine_tests("test_apply")


def _rows(test: Any) -> list[tuple[str, tuple[Any, ...]]]:
    """The parameter rows of a ``@pytest.mark.parametrize``d test: (id, values), ids numbered when the row has none."""
    (mark,) = [m for m in test.pytestmark if m.name == "parametrize"]
    rows = []
    for i, row in enumerate(mark.args[1]):
        if isinstance(row, ParameterSet):
            rows.append((str(row.id or i), tuple(row.values)))
        else:
            rows.append((str(i), tuple(row)))
    return rows


# -- the kind the semantics cases run on -----------------------------------------------------------------

THING_API = "oracle.mkpolicy.io/v1"
#: test_apply's schema, plus ``spec.doc`` (free-form: the JSON Patch table's document) and
#: the associative lists of its structured-merge-diff table.
THING_SCHEMA: dict[str, Any] = copy.deepcopy(APPLY.SCHEMA)
THING_SCHEMA["properties"]["spec"]["properties"].update(
    doc={"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    **copy.deepcopy(APPLY._LISTS.node["properties"]),
)
for _prop in THING_SCHEMA["properties"]["spec"]["properties"].values():
    # A CRD's list-map keys must be required or defaulted (apiextensions validation).
    _keys = _prop.get("x-kubernetes-list-map-keys", [])
    _items = _prop.get("items", {})
    if _required := [k for k in _keys if "default" not in _items["properties"][k]]:
        _items["required"] = _required
THING_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "things.oracle.mkpolicy.io"},
    "spec": {
        "group": "oracle.mkpolicy.io",
        "names": {"kind": "Thing", "plural": "things", "singular": "thing", "listKind": "ThingList"},
        "scope": "Namespaced",
        "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": THING_SCHEMA}}],
    },
}


def thing(name: str, spec: dict[str, Any], metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """A Thing named ``name``."""
    meta = {"name": name, **copy.deepcopy(metadata or {})}
    return {"apiVersion": THING_API, "kind": "Thing", "metadata": meta, "spec": copy.deepcopy(spec)}


# -- the cases --------------------------------------------------------------------------------------------


@dataclass
class Case:
    """A :class:`MapCase` and mkpolicy's answer for its object (raising as mkpolicy refuses)."""

    map: MapCase
    mkpolicy: Callable[[dict[str, Any]], dict[str, Any]]
    manager_uid: str = ""


def _mutate_case(name: str, obj: dict[str, Any], patch_type: str, expression: str) -> Case:
    mutations = [{"patchType": patch_type, "expression": expression}]
    return Case(MapCase(name, obj, mutations), lambda o: mkpolicy.mutate(o, mutations, schema=THING_CRD))


def _under_doc(op: dict[str, Any]) -> dict[str, Any]:
    """An operation of the engine's JSON Patch table moved under ``/spec/doc`` (pointers not
    starting with '/' are left alone: they are the table's bad pointers)."""
    out = dict(op)
    for key in ("path", "from"):
        if isinstance(out.get(key), str) and out[key].startswith("/"):
            out[key] = "/spec/doc" + out[key]
    return out


def json_patch_cases() -> list[Case]:
    """tests/engine/test_jsonpatch.py's OK and ERRORS rows, on ``spec.doc`` of a Thing."""
    return [
        _mutate_case(
            f"jsonpatch-{name}",
            thing(name, {"doc": JSONPATCH.DOC}),
            "JSONPatch",
            json_patch_expression(_under_doc(op) for op in ops),
        )
        for name, ops, _ in JSONPATCH.OK + JSONPATCH.ERRORS
    ]


def apply_cases() -> list[Case]:
    """tests/engine/test_apply.py's rows that have a schema (a MutatingAdmissionPolicy always has one)."""
    expressions = [(name, values[0]) for name, values in _rows(APPLY.test_merge)]
    expressions += [(name, v[0]) for name, v in _rows(APPLY.test_rejected_configurations) if v[1] is not None]
    expressions.append(("metadata-is-object-meta",
                        "Object{metadata: Object.metadata{labels: {'b': '2'}, finalizers: ['f2']}}"))  # fmt: skip
    obj = {"spec": APPLY.OBJ["spec"], "metadata": {"labels": APPLY.OBJ["metadata"]["labels"]}}
    cases = [_mutate_case(f"apply-{name}", thing(name, obj["spec"], obj["metadata"]), "ApplyConfiguration", e)
             for name, e in expressions]  # fmt: skip
    lists = [(f"smd-{i}", v[0], v[1]) for i, v in _rows(APPLY.test_associative_lists_merge_as_structured_merge_diff)]
    lists += [(f"smd-refused-{i}", {}, v[0])
              for i, v in _rows(APPLY.test_associative_list_items_structured_merge_diff_refuses)]  # fmt: skip
    cases += [_mutate_case(f"apply-{name}", thing(name, live), "ApplyConfiguration",
                           apply_configuration_expression({"spec": applied}))
              for name, live, applied in lists]  # fmt: skip
    return cases


#: Rows of the oracle's own, at the edges the engine's tables showed: JSON Patch ``test`` and
#: null, ApplyConfiguration null on each kind of field.
EDGES = [
    ("jsonpatch-test-no-value-absent", "JSONPatch",
     "[JSONPatch{op: 'test', path: '/spec/doc/zz'}, JSONPatch{op: 'add', path: '/spec/doc/q', value: 1}]"),
    ("jsonpatch-test-no-value-present", "JSONPatch",
     "[JSONPatch{op: 'test', path: '/spec/doc/s'}, JSONPatch{op: 'add', path: '/spec/doc/q', value: 1}]"),
    ("jsonpatch-test-null-on-null", "JSONPatch",
     "[JSONPatch{op: 'test', path: '/spec/doc/n', value: null}, JSONPatch{op: 'add', path: '/spec/doc/q', value: 1}]"),
    ("jsonpatch-add-no-value", "JSONPatch", "[JSONPatch{op: 'add', path: '/spec/doc/q'}]"),
    ("apply-null-string-map", "ApplyConfiguration", "Object{spec: Object.spec{limits: null}}"),
    ("apply-null-map-value", "ApplyConfiguration", "Object{spec: Object.spec{limits: {'cpu': null}}}"),
    ("apply-null-set", "ApplyConfiguration", "Object{spec: Object.spec{tags: null}}"),
    ("apply-null-atomic-list", "ApplyConfiguration", "Object{spec: Object.spec{args: null}}"),
    ("apply-null-struct", "ApplyConfiguration", "Object{spec: Object.spec{selector: null}}"),
    ("apply-null-preserved", "ApplyConfiguration", "Object{spec: Object.spec{doc: null}}"),
    ("apply-null-label", "ApplyConfiguration", "Object{metadata: Object.metadata{labels: {'a': null}}}"),
]  # fmt: skip


def edge_cases() -> list[Case]:
    """:data:`EDGES` on a Thing with every kind of field set."""
    spec = {**APPLY.OBJ["spec"], "selector": {"app": "a"}, "doc": {**JSONPATCH.DOC, "n": None}}
    return [_mutate_case(name, thing(name.split("-", 1)[1], spec, {"labels": {"a": "1"}}), kind, expression)
            for name, kind, expression in EDGES]  # fmt: skip


def _shipped_with_creation_patches() -> list[Path]:
    """The shipped policies (policies/ and policies/kueue/) that have creation patches."""
    out = []
    for path in sorted((ROOT / "policies").rglob("*.yaml")):
        if not path.name.endswith(".test.yaml"):
            (policy,) = mkpolicy.load(path)
            if policy.spec.creation.patches:
                out.append(path)
    return out


def _crd_of(policy: mkpolicy.FrameworkPolicy) -> dict[str, Any] | bool:
    """The CRD of the policy's kind (its ``spec.schema``, else from ../shared/crds); True for a
    built-in kind; False when ../shared/crds is not there."""
    gvk = policy.spec.gvk
    if gvk.group in BUILT_IN_GROUPS:
        return True
    if policy.schema_file is not None:
        return dict(json.loads(Path(policy.schema_file).read_text()))
    for file in sorted((SHARED / "crds").glob(f"{gvk.group}_*.yaml")):
        for doc in yaml.safe_load_all(file.read_text()):
            if doc and doc["spec"]["names"]["kind"] == gvk.kind:
                return dict(doc)
    return False


#: Shipped policies left out for want of their kind's CRD (../shared/crds absent).
UNCHECKED: list[str] = []


def _without_creation_patches(policy: mkpolicy.FrameworkPolicy) -> mkpolicy.FrameworkPolicy:
    """``policy`` with no creation patches: its ``create`` is the generic clone the patches start from."""
    creation = policy.spec.creation.model_copy(update={"patches": []})
    return policy.model_copy(update={"spec": policy.spec.model_copy(update={"creation": creation})})


def policy_cases() -> list[Case]:
    """Each shipped policy's creation patches on the create cases of its policy tests.

    The admission policy's object is mkpolicy's worker copy before the patches (the generic
    clone; ``managerObject`` maps to ``object``).
    """
    cases = []
    for path in _shipped_with_creation_patches():
        (policy,) = mkpolicy.load(path)
        if _crd_of(policy) is False:
            UNCHECKED.append(policy.name)
            continue
        adapter, clone = mkpolicy.compile(policy), mkpolicy.compile(_without_creation_patches(policy))
        suite = yaml.safe_load(path.with_name(path.stem + ".test.yaml").read_text())
        c = suite["spec"].get("context") or {}
        ctx = mkpolicy.Context(workload_name=c.get("workloadName", ""), origin=c.get("origin", "multikueue"),
                               cluster=c.get("cluster", ""))  # fmt: skip
        expressions = [m.json_patch.expression if m.type == "JSONPatch" else m.apply_configuration.expression
                       for m in policy.spec.creation.patches]  # fmt: skip
        used = variables_used(expressions, [(v.name, v.expression) for v in policy.spec.variables])
        variables = [{"name": name, "expression": map_expression(e)} for name, e in used]
        mutations = [{"patchType": m.type, "expression": map_expression(e)}
                     for m, e in zip(policy.spec.creation.patches, expressions, strict=True)]  # fmt: skip
        for i, test in enumerate(suite["spec"]["cases"]):
            if test.get("phase") != "create" or "workerObject" not in (test.get("expect") or {}):
                continue
            manager = test.get("managerObject") or yaml.safe_load((path.parent / test["managerObjectFile"]).read_text())
            manager["metadata"]["name"] = f"{policy.name}-{i}"  # cases may share an object: one name each
            start = clone.create(manager, ctx)

            def create(obj: dict[str, Any], manager: dict[str, Any] = manager, adapter: mkpolicy.Adapter = adapter,
                       ctx: mkpolicy.Context = ctx) -> dict[str, Any]:  # fmt: skip
                # The manager's object as the case created it (its namespace and the case label).
                sent = copy.deepcopy(manager)
                sent["metadata"]["namespace"] = obj["metadata"]["namespace"]
                sent["metadata"].setdefault("labels", {})[CASE_LABEL] = obj["metadata"]["labels"][CASE_LABEL]
                return adapter.create(sent, ctx)

            uid = str(manager["metadata"].get("uid", ""))
            cases.append(Case(MapCase(f"{policy.name}-{i}", start, mutations, variables), create, uid))
    return cases


CASES = {case.map.name: case for case in json_patch_cases() + apply_cases() + edge_cases() + policy_cases()}


# -- running them -----------------------------------------------------------------------------------------


def _mkpolicy_outcome(kube: KubeCluster, namespace: str, case: Case) -> Outcome:
    obj = case.map.labelled()
    obj["metadata"]["namespace"] = namespace
    try:
        result = case.mkpolicy(obj)
    except mkpolicy.CelError as exc:
        return Outcome(stage="patch" if isinstance(exc, CelEvalError) else "policy", error=exc)
    except mkpolicy.PatchError as exc:
        return Outcome(stage="patch", error=exc)
    try:
        return Outcome(stored=create_admitted(kube, result))
    except ApiError as exc:
        return Outcome(stage="object", error=exc)


def _crds() -> list[dict[str, Any]]:
    """The Thing, and the CRD of each shipped policy's kind the cases use."""
    crds = [THING_CRD]
    for path in _shipped_with_creation_patches():
        (policy,) = mkpolicy.load(path)
        crd = _crd_of(policy)
        if isinstance(crd, dict):
            crds.append(crd)
    return crds


@pytest.fixture(scope="module")
def outcomes(real_kube: KubeCluster) -> Iterator[dict[str, tuple[Outcome, Outcome]]]:
    """Every case's outcome as an admission policy and through mkpolicy."""
    real_kube.install_crds(_crds())
    suffix = secrets.token_hex(3)
    map_ns, plain_ns = f"oracle-map-{suffix}", f"oracle-plain-{suffix}"
    admin = real_kube.admin
    admin.create({"apiVersion": "v1", "kind": "Namespace",
                  "metadata": {"name": map_ns, "labels": {NAMESPACE_LABEL: "true"}}})  # fmt: skip
    admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": plain_ns}})
    try:
        real = MapOracle(real_kube, map_ns).run([case.map for case in CASES.values()])
        yield {name: (real[name], _mkpolicy_outcome(real_kube, plain_ns, case)) for name, case in CASES.items()}
    finally:
        for ns in (map_ns, plain_ns):
            admin.delete("v1", "Namespace", ns)


def verdict(outcome: Outcome) -> Verdict:
    """``("stored", the object without what the server sets)`` or ``(stage, None)``.

    Copies of the object's own uid (a Job's generated ``controller-uid`` selector and labels)
    read ``<uid>``.
    """
    if outcome.stored is None:
        return outcome.stage, None
    uid = outcome.stored["metadata"].get("uid")
    stored = (
        json.loads(json.dumps(outcome.stored).replace(f'"{uid}"', '"<uid>"')) if uid else copy.deepcopy(outcome.stored)
    )
    for key in SERVER_METADATA:
        stored["metadata"].pop(key, None)
    return "stored", stored


def _stored(verdict: Verdict) -> dict[str, Any]:
    assert verdict[0] == "stored", verdict
    return dict(verdict[1])


def _manager_uid_in(annotation: str) -> Callable[[Case, Verdict, Verdict], None]:
    """The admission policy wrote "" where mkpolicy wrote the manager's uid; nothing else differs."""

    def check(case: Case, real: Verdict, mine: Verdict) -> None:
        expected = copy.deepcopy(_stored(real))
        assert expected["metadata"]["annotations"][annotation] == ""
        expected["metadata"]["annotations"][annotation] = case.manager_uid
        assert mine == ("stored", expected)

    return check


#: Policies whose creation writes ``managerObject.metadata.uid`` into an annotation.
MANAGER_UID_ANNOTATIONS = {
    "tekton-pipelinerun": "mkpolicy.io/origin-uid",
    "kueue-leaderworkerset": "kueue.x-k8s.io/multikueue-origin-uid",
    "kueue-statefulset": "kueue.x-k8s.io/multikueue-origin-uid",
}


def _map_merged_under_preserved_field(case: Case, real: Verdict, mine: Verdict) -> None:
    assert real == ("patch", None)
    assert _stored(mine)["spec"] == {**case.map.obj["spec"], "extra": {"k": {"deep": 1}}}


def _null_removes(*path: str) -> Callable[[Case, Verdict, Verdict], None]:
    def check(case: Case, real: Verdict, mine: Verdict) -> None:
        assert real == ("patch", None)
        expected = case.map.labelled()
        parent = expected
        for key in path[:-1]:
            parent = parent[key]
        del parent[path[-1]]
        assert _stored(mine)[path[0]] == expected[path[0]]

    return check


def _both_refuse(real_stage: str, mine_stage: str) -> Callable[[Case, Verdict, Verdict], None]:
    def check(case: Case, real: Verdict, mine: Verdict) -> None:
        assert (real, mine) == ((real_stage, None), (mine_stage, None))

    return check


#: The documented differences (docs/oracles.md, "Differences"), each asserted exactly. Every
#: other case must agree.
DIFFERENCES: dict[str, Callable[[Case, Verdict, Verdict], None]] = {
    "apply-null-removes": _null_removes("spec", "replicas"),
    "apply-null-string-map": _null_removes("spec", "limits"),
    "apply-null-map-value": _null_removes("spec", "limits", "cpu"),
    "apply-null-set": _null_removes("spec", "tags"),
    "apply-null-atomic-list": _null_removes("spec", "args"),
    "apply-null-struct": _null_removes("spec", "selector"),
    "apply-null-preserved": _null_removes("spec", "doc"),
    "apply-null-label": _null_removes("metadata", "labels", "a"),
    "apply-preserve-unknown-map": _map_merged_under_preserved_field,
    "jsonpatch-root-path": _both_refuse("object", "patch"),
    **{
        name: _manager_uid_in(MANAGER_UID_ANNOTATIONS[name.rsplit("-", 1)[0]])
        for name, case in CASES.items()
        if name.rsplit("-", 1)[0] in MANAGER_UID_ANNOTATIONS
    },
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_mkpolicy_agrees_with_mutating_admission_policy(
    name: str, outcomes: dict[str, tuple[Outcome, Outcome]]
) -> None:
    real, mine = outcomes[name]
    print(f"admission policy: {verdict(real)} {real.error or ''}\nmkpolicy: {verdict(mine)} {mine.error or ''}")
    if name in DIFFERENCES:
        DIFFERENCES[name](CASES[name], verdict(real), verdict(mine))
    else:
        assert verdict(mine) == verdict(real)


def test_every_shipped_policy_with_creation_patches_is_checked() -> None:
    checked = {name.rsplit("-", 1)[0] for name in CASES if not name.startswith(("apply-", "jsonpatch-"))}
    if UNCHECKED:
        pytest.skip(f"needs ../shared/crds beside the clone for the CRDs of {', '.join(UNCHECKED)}")
    assert checked == {mkpolicy.load(p)[0].name for p in _shipped_with_creation_patches()}


def test_every_documented_difference_is_listed_in_the_docs() -> None:
    text = (ROOT / "docs" / "oracles.md").read_text()
    for name in DIFFERENCES:
        documented = name.rsplit("-", 1)[0] if name.rsplit("-", 1)[0] in MANAGER_UID_ANNOTATIONS else name
        assert f"`{documented}`" in text, name
