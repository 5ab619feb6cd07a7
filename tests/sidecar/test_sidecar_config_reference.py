"""The SidecarConfig reference page and JSON Schema are generated from the models and committed."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from mkpolicy.sidecar.config_reference import render_markdown, render_schema, sidecarconfig_schema

ROOT = Path(__file__).resolve().parents[2]
REGENERATE = (
    "regenerate with: mkpolicy schema --kind SidecarConfig > schemas/sidecarconfig.schema.json && "
    "mkpolicy schema --kind SidecarConfig --format markdown > docs/sidecar-config.md"
)


@pytest.mark.parametrize(
    ("path", "render"),
    [("schemas/sidecarconfig.schema.json", render_schema), ("docs/sidecar-config.md", render_markdown)],
)
def test_committed_reference_matches_the_models(path: str, render: object) -> None:
    assert callable(render)
    assert (ROOT / path).read_text() == render(), f"{path} is out of date; {REGENERATE}"


def test_schema_accepts_the_shipped_config_and_refuses_typos() -> None:
    schema = sidecarconfig_schema()
    validator = jsonschema.Draft202012Validator(schema)
    shipped = yaml.safe_load((ROOT / "examples" / "deploy" / "sidecar-config.yaml").read_text())
    assert [e.message for e in validator.iter_errors(shipped)] == []
    typo = {**shipped, "listen": {"basPort": 7443}}
    assert any("basPort" in e.message for e in validator.iter_errors(typo))


def test_every_field_is_documented() -> None:
    page = render_markdown()
    for section in ("`listen`", "`ops`", "`manager`", "`workers[]`", "`workers[].kubeconfig`", "`state`"):
        assert f"## {section}" in page
    assert "| `basePort` |" in page and "| `wireSecret` |" in page
    assert json.loads(render_schema())["$id"].endswith("sidecarconfig.schema.json")
