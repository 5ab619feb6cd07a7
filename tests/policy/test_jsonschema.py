from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

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
    ("doc", "fragment"),
    [
        (
            {
                "apiVersion": "mkpolicy.io/v1alpha1",
                "kind": "FrameworkPolicy",
                "metadata": {"name": "x"},
                "spec": {"framework": "A.v1.b", "bogus": 1},
            },
            "Additional properties are not allowed",
        ),
        (
            {
                "apiVersion": "mkpolicy.io/v1alpha1",
                "kind": "FrameworkPolicy",
                "metadata": {"name": "x"},
                "spec": {"framework": "A.v1.b", "failurePolicy": "Never"},
            },
            "'Never' is not one of",
        ),
        (
            {"apiVersion": "mkpolicy.io/v1alpha1", "kind": "FrameworkPolicy", "metadata": {"name": "x"}, "spec": {}},
            "'framework' is a required property",
        ),
    ],
)
def test_schema_rejects_what_the_models_reject(doc: dict[str, object], fragment: str) -> None:
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text()))
    messages = [e.message for e in validator.iter_errors(doc)]
    assert any(fragment in m for m in messages), messages
    with pytest.raises(Exception, match="problem|expected|missing|unknown"):
        loader.loads(yaml.safe_dump(doc), "x.yaml")
