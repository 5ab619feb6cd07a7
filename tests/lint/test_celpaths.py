"""Reads and writes of CEL expressions, from the syntax tree (used by lint and explain)."""

from __future__ import annotations

import pytest

from mkpolicy.cel.parser import parse
from mkpolicy.check.celpaths import accesses, json_patch_ops, object_writes


@pytest.mark.parametrize(
    ("expression", "reads"),
    [
        ("object.spec.x + 1", ["object.spec.x"]),
        ("has(object.spec.x)", ["object.spec.x (has)"]),
        ('object.metadata.labels["app/name"]', ['object.metadata.labels["app/name"]']),
        ("object.spec.items[0].name", ["object.spec.items[0].name"]),
        ("object.spec.items[size(object.spec.items) - 1]", ["object.spec.items[*]", "object.spec.items"]),
        ("object.spec.?a.?b.orValue(1)", ["object.spec.a.b"]),
        ("object.metadata.labels.all(k, k.startsWith(cluster))", ["object.metadata.labels", "cluster"]),
        ("[1, 2].map(object, object + 1)", []),
        ("cel.bind(x, managerObject.spec, x.a + x.b)", ["managerObject.spec"]),
        ('jsonpatch.escapeKey(variables.key) + string(int("1"))', ["variables.key"]),
        ("workload.status.admission.clusterQueue", ["workload.status.admission.clusterQueue"]),
    ],
)
def test_accesses(expression: str, reads: list[str]) -> None:
    found = accesses(parse(expression))
    assert [a.render() + (" (has)" if a.test else "") for a in found] == reads


def test_access_positions_point_at_each_step() -> None:
    text = "x == object.metadata.labels[cluster]"
    (access,) = [a for a in accesses(parse(text)) if a.root == "object"]
    assert [text[p:].split(".")[0].split("[")[0] for p in access.positions] == [
        "object",
        "metadata",
        "labels",
        "cluster]",
    ]


@pytest.mark.parametrize(
    ("expression", "ops"),
    [
        ('[JSONPatch{op: "add", path: "/spec/x", value: 1}]', ["add /spec/x (literal)"]),
        (
            '[JSONPatch{op: "remove", path: "/metadata/labels/" + jsonpatch.escapeKey(k) + "/x"}]',
            ["remove /metadata/labels/*/x [metadata, labels]"],
        ),
        ('[JSONPatch{op: cluster, path: "/a~1b/c"}]', ["? /a~1b/c (literal)"]),
        (
            'c ? [JSONPatch{op: "move", from: "/a", path: "/b"}] : [JSONPatch{op: "test", path: "/c", value: 1}]',
            ["move /b (literal)", "test /c (literal)"],
        ),
        ('[JSONPatch{op: "add", path: prefix}]', ["add * []"]),
    ],
)
def test_json_patch_ops(expression: str, ops: list[str]) -> None:
    out = []
    for op in json_patch_ops(parse(expression)):
        assert op.path is not None
        detail = "(literal)" if op.path.literal is not None else f"[{', '.join(op.path.known_tokens())}]"
        out.append(f"{op.op or '?'} {op.path.render()} {detail}")
    assert out == ops


def test_known_tokens_decode_escapes() -> None:
    (op,) = json_patch_ops(parse('[JSONPatch{op: "remove", path: "/metadata/labels/a~1b~0c"}]'))
    assert op.path is not None
    assert op.path.known_tokens() == ["metadata", "labels", "a/b~c"]
    assert [role for role, _ in op.targets()] == ["path"]


@pytest.mark.parametrize(
    ("expression", "writes"),
    [
        ('Object{metadata: Object.metadata{labels: {"a/b": "c"}}}', ["/metadata/labels/a~1b"]),
        (
            "Object{spec: Object.spec{replicas: 1, template: Object.spec.template{}}}",
            ["/spec/replicas", "/spec/template"],
        ),
        ("Object{metadata: Object.metadata{annotations: {k: v}}}", ["/metadata/annotations/*"]),
        ("c ? Object{spec: Object.spec{a: 1}} : Object{status: Object.status{b: 2}}", ["/spec/a", "/status/b"]),
        ("Object{spec: Object.spec{items: [Object.spec.items{name: 'x'}]}}", ["/spec/items"]),
    ],
)
def test_object_writes(expression: str, writes: list[str]) -> None:
    assert [w.pointer() for w in object_writes(parse(expression))] == writes
