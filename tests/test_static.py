"""The code-quality gates of the test command: ruff, mypy --strict and the layer contract."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed; run: pip install -e '.[dev]'")
    return found


@pytest.mark.parametrize(
    ("command", "paths"),
    [
        (["ruff", "check"], ["mkpolicy", "tests", "bench"]),
        (["ruff", "format", "--check"], ["mkpolicy"]),
        (["mypy", "--strict"], ["mkpolicy"]),
        (["lint-imports"], []),
    ],
    ids=["ruff-check", "ruff-format", "mypy-strict", "import-layers"],
)
def test_static_check(command: list[str], paths: list[str]) -> None:
    present = [p for p in paths if (ROOT / p).exists()]
    proc = subprocess.run([_tool(command[0]), *command[1:], *present], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, f"{' '.join(command)} failed:\n{proc.stdout}\n{proc.stderr}"
