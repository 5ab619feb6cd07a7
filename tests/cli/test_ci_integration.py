"""The pre-commit hooks and the documented CI job use commands and options that exist."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from mkpolicy.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]


def parses(argv: list[str]) -> None:
    try:
        build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse exits on unknown options
        pytest.fail(f"mkpolicy {' '.join(argv)} does not parse (exit {exc.code})")


def test_pre_commit_hooks() -> None:
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert [h["id"] for h in hooks] == ["mkpolicy-lint", "mkpolicy-test"]
    for hook in hooks:
        assert hook["language"] == "python"
        assert hook["pass_filenames"] is False
        entry = shlex.split(hook["entry"])
        assert entry[0] == "mkpolicy"
        parses(entry[1:] + hook["args"])
        assert re.search(hook["files"], "policies/tekton.yaml")


def yaml_blocks(markdown: str) -> list[Any]:
    return [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", markdown, flags=re.DOTALL)]


def test_documented_github_actions_job() -> None:
    pre_commit, workflow = yaml_blocks((ROOT / "docs" / "ci.md").read_text())
    for hook in pre_commit["repos"][0]["hooks"]:
        parses([hook["id"].removeprefix("mkpolicy-"), *hook["args"]])
    steps = workflow["jobs"]["policies"]["steps"]
    commands = [s["run"] for s in steps if str(s.get("run", "")).startswith("mkpolicy ")]
    assert len(commands) == 3
    for command in commands:
        parses(shlex.split(command)[1:])
    upload = next(s for s in steps if str(s.get("uses", "")).startswith("github/codeql-action/upload-sarif"))
    assert upload["with"]["sarif_file"] == "mkpolicy.sarif"
    assert workflow["permissions"]["security-events"] == "write"


def test_help_imports_nothing_heavy() -> None:
    """``mkpolicy --help`` stays fast: building the parser imports no subcommand's work."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from mkpolicy.cli.main import build_parser\n"
        "build_parser().format_help()\n"
        "heavy = ('pydantic', 'lark', 'ruamel', 'yaml', 'celpy', 'jsonschema', 'kubernetes', 'aiohttp')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy\n"
        "      or m.startswith(('mkpolicy.engine', 'mkpolicy.lint', 'mkpolicy.policy', 'mkpolicy.cel'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out == "[]\n"


def test_list_rules_imports_no_checker() -> None:
    """``mkpolicy lint --list-rules`` reads the rule catalog only: importing a name from
    ``mkpolicy.check`` does not load the checks, the engine or the CEL compiler."""
    import subprocess
    import sys

    code = (
        "import contextlib, io, sys\n"
        "from mkpolicy.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    assert main(['lint', '--list-rules']) == 0\n"
        "assert 'MKP101' in out.getvalue()\n"
        "heavy = ('pydantic', 'lark', 'ruamel', 'yaml', 'celpy', 'jsonschema', 'kubernetes', 'aiohttp')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy\n"
        "      or m.startswith(('mkpolicy.engine', 'mkpolicy.policy', 'mkpolicy.cel', 'mkpolicy.check.'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out == "['mkpolicy.check.rules']\n"
