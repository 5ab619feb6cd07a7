"""``mkpolicy completion``: the script, run by a real bash, completes what the parser accepts."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from mkpolicy.cli.completion import commands
from mkpolicy.cli.main import COMMANDS, build_parser, main


def complete(script: Path, line: str, shell: str = "bash") -> list[str]:
    """What the completion function offers for the last word of ``line``."""
    words = line.split(" ")
    quoted = " ".join(f"'{w}'" for w in words)
    probe = (
        f"source {script}\nCOMP_WORDS=({quoted})\nCOMP_CWORD={len(words) - 1}\n_mkpolicy\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    argv = ["bash", "-c", probe] if shell == "bash" else ["zsh", "-c", probe]
    work = script.parent.parent / "work"  # holds policy.yaml only: file names complete there
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60, cwd=work).stdout
    return sorted(w for w in out.splitlines() if w)


@pytest.fixture
def bash_script(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    assert main(["completion", "bash"]) == 0
    (tmp_path / "script").mkdir()
    (tmp_path / "work").mkdir()
    path = tmp_path / "script" / "mkpolicy.bash"
    path.write_text(capsys.readouterr().out)
    (tmp_path / "work" / "policy.yaml").write_text("")
    return path


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_completes_commands_options_and_choices(bash_script: Path) -> None:
    assert complete(bash_script, "mkpolicy ") == sorted([c[0] for c in COMMANDS] + ["-h", "--help", "--version"])
    assert complete(bash_script, "mkpolicy tr") == ["trim-schema"]
    assert complete(bash_script, "mkpolicy lint --fo") == ["--format"]
    assert complete(bash_script, "mkpolicy lint --format ") == ["github", "json", "sarif", "text"]
    assert complete(bash_script, "mkpolicy sidecar --check --st") == ["--strict"]
    assert complete(bash_script, "mkpolicy export ") == [
        "admission", "argo-admission", "controller-rbac", "crd-patch", "deploy", "kueue-config", "policy.yaml",
        "rbac", "wire-contract",
    ]
    # (a nested command's options complete after its parent: dev multikueue's --kubeconfig-dir too)
    assert complete(bash_script, "mkpolicy dev apiserver --kube") == ["--kubeconfig-dir", "--kubeconfig-out"]
    assert complete(bash_script, "mkpolicy validate pol") == ["policy.yaml"]  # files


def test_every_option_of_the_parser_is_in_the_tree() -> None:
    """Generated from the parser: a new option completes without touching the generator."""
    tree = {c.name: c for c in commands(build_parser())}
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for name, child in sub.choices.items():  # type: ignore[attr-defined]
        for action in child._actions:
            for option in action.option_strings:
                assert option in tree[name].options, (name, option)


@pytest.mark.skipif(shutil.which("zsh") is None, reason="needs zsh")
def test_zsh_script_loads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "zsh"]) == 0
    path = tmp_path / "mkpolicy.zsh"
    path.write_text(capsys.readouterr().out)
    subprocess.run(["zsh", "-n", str(path)], check=True, timeout=60)
