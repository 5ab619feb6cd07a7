from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

from mkpolicy.errors import PolicyError
from mkpolicy.policy import loader
from mkpolicy.policy.jsonschema import render

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_FILE = ROOT / "schemas" / "frameworkpolicy.schema.json"
POLICY_FILES = sorted(p for p in (ROOT / "policies").rglob("*.yaml") if not p.name.endswith(".test.yaml"))


def test_committed_schema_matches_the_models() -> None:
    assert SCHEMA_FILE.read_text() == render(), (
        "schemas/frameworkpolicy.schema.json drifted from the models; regenerate it with:\n"
        "  mkpolicy schema > schemas/frameworkpolicy.schema.json"
    )


def test_schema_is_valid_draft_2020_12() -> None:
    jsonschema.Draft202012Validator.check_schema(json.loads(SCHEMA_FILE.read_text()))


@pytest.mark.parametrize("path", POLICY_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_shipped_policy_validates_against_the_schema_and_names_it(path: Path) -> None:
    text = path.read_text()
    match = re.search(r"^# yaml-language-server: \$schema=(\S+)$", text, re.M)
    assert match, f"{path} lacks the '# yaml-language-server: $schema=...' comment"
    assert (path.parent / match.group(1)).resolve() == SCHEMA_FILE
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text()))
    for doc in yaml.safe_load_all(text):
        if doc and doc.get("kind") == "FrameworkPolicy":
            errors = [e.message for e in validator.iter_errors(doc)]
            assert errors == []


@pytest.mark.parametrize(
    ("doc", "schema_error", "loader_error"),
    [
        (
            {
                "apiVersion": "mkpolicy.io/v1alpha1",
                "kind": "FrameworkPolicy",
                "metadata": {"name": "x"},
                "spec": {"framework": "A.v1.b", "bogus": 1},
            },
            "Additional properties are not allowed ('bogus' was unexpected)",
            "x.yaml:6:3: unknown field 'spec.bogus'; expected one of: creation, failurePolicy, framework, integration, managedBy,"
            " matchConditions, params, schema, sync, variables",
        ),
        (
            {
                "apiVersion": "mkpolicy.io/v1alpha1",
                "kind": "FrameworkPolicy",
                "metadata": {"name": "x"},
                "spec": {"framework": "A.v1.b", "failurePolicy": "Never"},
            },
            "'Never' is not one of ['Fail', 'Ignore']",
            "x.yaml:6:18: spec.failurePolicy: expected 'Fail' or 'Ignore'; found the string 'Never'",
        ),
        (
            {"apiVersion": "mkpolicy.io/v1alpha1", "kind": "FrameworkPolicy", "metadata": {"name": "x"}, "spec": {}},
            "'framework' is a required property",
            "x.yaml:5:1: missing required field 'spec.framework'",
        ),
    ],
    ids=["unknown-field", "bad-enum", "missing-required"],
)
def test_schema_rejects_what_the_models_reject(doc: dict[str, object], schema_error: str, loader_error: str) -> None:
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text()))
    assert [e.message for e in validator.iter_errors(doc)] == [schema_error]
    with pytest.raises(PolicyError) as info:
        loader.loads(yaml.safe_dump(doc), "x.yaml")
    assert type(info.value) is PolicyError
    assert str(info.value) == loader_error
