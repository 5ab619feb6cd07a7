"""The repository stands alone: no file cites a file that is not in it.

A citation is a relative Markdown link, or a file or directory path under one of the
repository's top-level directories (``docs/architecture.md``, ``mkpolicy/engine/jsonpatch.py``,
``policies/``...) in documentation, code, comments and manifests; each must name something
the repository holds (from its root, or from the citing file's directory). Test code is
exempt from the path rule: its strings are test data (files it creates, paths it expects
to be refused). Paths that leave the repository (``../``) are not allowed either, except the
test-data convention of tests that read ``../shared`` beside a clone and skip without it.
And the design notes that live beside the project are never cited by name.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Text files whose words are ours (data files such as the conformance cases are not).
TEXT = re.compile(r"(\.(md|py|yaml|yml|toml|lark|cfg|txt|json)|Dockerfile|/run)$")
DATA = ("tests/cel/conformance/", "__snapshots__/", "schemas/", "tests/lint/sarif-schema")
TOP = ("docs", "mkpolicy", "policies", "schemas", "examples", "tests", "deploy", "bench")
PATH = re.compile(r"(?<![\w./~-])((?:" + "|".join(TOP) + r")/[\w./*<>{}-]*)")
#: A path token names a file (it has an extension) or a directory (it ends with "/");
#: ``deploy/kueue-controller-manager`` in a kubectl command is neither.
FILE_LIKE = re.compile(r"(\.[A-Za-z0-9]+|/)$")
LINK = re.compile(r"\]\(([^)\s]+)\)")
OUTSIDE_DESIGN = "DESIGN" + ".md"


def _files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=False)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    names = [n for n in listed.stdout.splitlines() if TEXT.search(n) and not n.startswith(DATA)]
    return [ROOT / n for n in names if (ROOT / n).is_file()]


def _exists(path: str, base: Path) -> bool:
    path = path.rstrip(".,;:")
    if any(c in path for c in "*<>{"):
        path = re.split(r"[*<>{]", path)[0].rsplit("/", 1)[0]
    return (ROOT / path).exists() or (base / path).exists()


def _problems(file: Path, text: str | None = None) -> list[str]:
    """The citations of ``file`` (its ``text``, read when not given) that fail."""
    if text is None:
        text = file.read_text(errors="replace")
    rel = file.relative_to(ROOT)
    paths = file.suffix == ".md" or not str(rel).startswith("tests/")
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if OUTSIDE_DESIGN in line:
            out.append(f"{rel}:{n}: cites the design notes outside the repository")
        for match in PATH.finditer(line) if paths else ():
            token = match.group(1).rstrip(".,;:")
            if FILE_LIKE.search(token) and not _exists(token, file.parent):
                out.append(f"{rel}:{n}: cites {token!r}, which the repository does not hold")
        if file.suffix == ".md":
            for target in LINK.findall(line):
                if re.match(r"^[a-z]+:|^#", target):
                    continue
                resolved = (file.parent / target.split("#")[0]).resolve()
                if not resolved.is_relative_to(ROOT) or not resolved.exists():
                    out.append(f"{rel}:{n}: links to {target!r}, which the repository does not hold")
        if "../shared" in line and not str(rel).startswith("tests/"):
            out.append(f"{rel}:{n}: cites ../shared, outside the repository")
    return out


def test_no_file_cites_a_file_outside_the_repository() -> None:
    problems = [p for file in _files() for p in _problems(file)]
    assert problems == []


def test_the_check_finds_what_it_looks_for() -> None:
    text = (
        f"See {OUTSIDE_DESIGN}, [x](../../elsewhere.md), `docs/nope.md`, [ok](architecture.md), "
        "`mkpolicy/engine/jsonpatch.py`, `kubectl exec deploy/kueue-controller-manager` and ../shared/x.\n"
    )
    assert [p.split(": ", 1)[1] for p in _problems(ROOT / "docs" / "probe.md", text)] == [
        "cites the design notes outside the repository",
        "cites 'docs/nope.md', which the repository does not hold",
        "links to '../../elsewhere.md', which the repository does not hold",
        "cites ../shared, outside the repository",
    ]
