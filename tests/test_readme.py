"""The README's policy is what it says: valid, and clean under every lint rule with its schema."""

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
