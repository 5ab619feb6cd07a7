"""The pre-commit hooks and the documented CI job use commands and options that exist."""

from __future__ import annotations

import ast
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


#: Third-party packages a cheap command must not import.
HEAVY = ("pydantic", "lark", "ruamel", "yaml", "celpy", "jsonschema", "kubernetes", "aiohttp")


def modules_loaded(code: str, prefixes: tuple[str, ...]) -> list[str]:
    """The heavy packages' and ``prefixes``' modules a fresh interpreter has loaded after ``code``."""
    import subprocess
    import sys

    probe = (
        f"{code}\nimport sys\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r} or m.startswith({prefixes!r})))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    loaded: list[str] = ast.literal_eval(out)
    return loaded


def test_help_imports_nothing_heavy() -> None:
    """``mkpolicy --help`` stays fast: building the parser imports no subcommand's work."""
    code = "from mkpolicy.cli.main import build_parser\nbuild_parser().format_help()"
    assert modules_loaded(code, ("mkpolicy.engine", "mkpolicy.lint", "mkpolicy.policy", "mkpolicy.cel")) == []


def test_list_rules_imports_no_checker() -> None:
    """``mkpolicy lint --list-rules`` reads the rule catalog only: importing a name from
    ``mkpolicy.check`` does not load the checks, the engine or the CEL compiler."""
    code = (
        "import contextlib, io\n"
        "from mkpolicy.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    assert main(['lint', '--list-rules']) == 0\n"
        "assert 'MKP101' in out.getvalue()"
    )
    prefixes = ("mkpolicy.engine", "mkpolicy.policy", "mkpolicy.cel", "mkpolicy.check.")
    assert modules_loaded(code, prefixes) == ["mkpolicy.check.rules"]


def test_ci_instructions_pin_no_tag_that_does_not_exist() -> None:
    """docs/ci.md pins a commit (or a branch) until releases are tagged: a tag must exist to be named."""
    import subprocess

    text = (ROOT / "docs" / "ci.md").read_text()
    named = set(re.findall(r"(?:@|rev: )(v\d+\.\d+\.\d+)", text))
    tags = subprocess.run(["git", "tag", "--list"], cwd=ROOT, capture_output=True, text=True, check=False).stdout
    assert named <= set(tags.split()), f"docs/ci.md pins {sorted(named)}, which is not a tag of this repository"
    assert "@<commit>" in text and "rev: <commit>" in text
