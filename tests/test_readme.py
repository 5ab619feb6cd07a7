"""The README is what it says: its policy lints clean with its schema, its test command is what CI runs."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from mkpolicy.check import check_paths

ROOT = Path(__file__).resolve().parent.parent


def test_the_readme_policy_lints_clean_with_its_schema(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    found = re.search(r"## A policy\n\n```yaml\n(.*?)```", readme, re.DOTALL)
    assert found is not None, "README.md has no '## A policy' YAML block"
    policy = found.group(1)
    assert "schema: ../schemas/crds/" in policy  # typed against the CRD, as lint can check
    (tmp_path / "policies").mkdir()
    shutil.copytree(ROOT / "schemas", tmp_path / "schemas")
    (tmp_path / "policies" / "readme.yaml").write_text(policy)
    result = check_paths([str(tmp_path / "policies" / "readme.yaml")])
    assert (result.input_errors, [f.report() for f in result.findings]) == ([], [])


def test_ci_runs_the_readmes_test_command_verbatim() -> None:
    """The second command of the README's first lines is what .ci/run runs."""
    readme = (ROOT / "README.md").read_text().splitlines()
    commands = [line.split("#", 1)[0].strip() for line in readme[:8] if line.startswith("pip install")]
    assert len(commands) == 2, commands
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert commands[1] in [line.strip() for line in ci], f".ci/run does not run {commands[1]!r}"
