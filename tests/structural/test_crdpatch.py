"""``mkpolicy.structural.crdpatch``: a CRD given the managedBy field stock Kueue reads."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mkpolicy.errors import PolicyError
from mkpolicy.structural.crdpatch import FIELD_SCHEMA, add_field, field_state

TOKENS = ("spec", "managedBy")


def crd(*versions: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "things.example.com", **meta},
        "spec": {"group": "example.com", "names": {"kind": "Thing", "plural": "things"}, "versions": list(versions)},
        "status": {"acceptedNames": {"kind": "Thing"}},
    }


def version(name: str, spec: dict[str, Any] | None) -> dict[str, Any]:
    props: dict[str, Any] = {"metadata": {"type": "object"}}
    if spec is not None:
        props["spec"] = spec
    return {"name": name, "served": True, "storage": name == "v1",
            "schema": {"openAPIV3Schema": {"type": "object", "properties": props}}}  # fmt: skip


STRUCTURAL = {"type": "object", "properties": {"entrypoint": {"type": "string"}}}
DECLARED = {"type": "object", "properties": {"managedBy": {"type": "string"}}}
PRESERVED = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


@pytest.mark.parametrize(
    ("spec", "state"),
    [(STRUCTURAL, "pruned"), (DECLARED, "declared"), (PRESERVED, "kept"), ({"type": "object"}, "pruned")],
    ids=["structural", "declared", "preserve-unknown-fields", "no-properties"],
)
def test_field_state(spec: dict[str, Any], state: str) -> None:
    assert field_state(crd(version("v1", spec)), "v1", TOKENS) == state


def test_a_root_that_preserves_unknown_fields_keeps_the_field() -> None:
    doc = crd(version("v1", None))
    doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["x-kubernetes-preserve-unknown-fields"] = True
    assert field_state(doc, "v1", TOKENS) == "kept"
    assert field_state(crd(version("v1", None)), "v1", TOKENS) == "pruned"


def test_add_field_declares_it_where_it_would_be_pruned_and_strips_server_fields() -> None:
    original = crd(
        version("v1", copy.deepcopy(STRUCTURAL)),
        version("v1beta1", copy.deepcopy(PRESERVED)),
        version("v1alpha1", copy.deepcopy(DECLARED)),
        resourceVersion="12",
        uid="u",
        generation=3,
        managedFields=[{"manager": "kubectl"}],
        annotations={"kubectl.kubernetes.io/last-applied-configuration": "{}"},
    )
    before = copy.deepcopy(original)
    out, changed = add_field(original, TOKENS)
    assert original == before  # not modified
    assert changed == ["v1"]
    assert out["metadata"] == {"name": "things.example.com"}
    assert "status" not in out
    v1, beta, alpha = out["spec"]["versions"]
    assert v1["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"] == {
        "entrypoint": {"type": "string"},
        "managedBy": FIELD_SCHEMA,
    }
    assert beta == before["spec"]["versions"][1] and alpha == before["spec"]["versions"][2]
    assert add_field(out, TOKENS)[1] == []  # idempotent


def test_a_crd_without_the_parent_object_is_refused() -> None:
    with pytest.raises(PolicyError, match="version v1: expected an object schema at spec to declare managedBy in"):
        add_field(crd(version("v1", None)), TOKENS, "crd.yaml")
    with pytest.raises(PolicyError, match="expected a CustomResourceDefinition with spec.versions; found none"):
        add_field({"kind": "CustomResourceDefinition", "spec": {}}, TOKENS)
