"""The parser-table cache: only in a directory this user alone can write (lark unpickles it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mkpolicy.cel.parser import _cache_file


def test_cache_lives_in_the_users_cache_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = _cache_file("grammar one")
    assert path is not None and Path(path).parent == tmp_path / "mkpolicy"
    assert (tmp_path / "mkpolicy").stat().st_mode & 0o777 == 0o700
    # Another grammar (another mkpolicy version) gets its own file.
    assert _cache_file("grammar two") not in (None, path)


def test_no_cache_in_a_directory_others_can_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    (tmp_path / "mkpolicy").mkdir(mode=0o777)
    os.chmod(tmp_path / "mkpolicy", 0o777)
    assert _cache_file("grammar") is None


def test_no_cache_when_the_directory_cannot_be_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))
    assert _cache_file("grammar") is None


@pytest.mark.parametrize("cache_home", ["fresh", "unusable"])
def test_parser_works_with_and_without_the_cache(tmp_path: Path, cache_home: str) -> None:
    home = tmp_path / "cache"
    if cache_home == "unusable":
        home.write_text("not a directory")
    env = {**os.environ, "XDG_CACHE_HOME": str(home)}
    code = "from mkpolicy.cel import evaluate; print(evaluate('[1, 2].map(x, x * 2)', {}))"

    def run() -> None:
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert out.stdout.strip() == "[2, 4]", out.stderr

    run()
    assert (home / "mkpolicy").is_dir() == (cache_home == "fresh")
    if cache_home == "fresh":
        # The first run saved the parser tables: exactly one cache file.
        saved = sorted((home / "mkpolicy").glob("cel-grammar-*.lark"))
        assert len(saved) == 1, saved
        mtime = saved[0].stat().st_mtime_ns
    run()  # the second run loads the tables the first one saved
    assert (home / "mkpolicy").is_dir() == (cache_home == "fresh")
    if cache_home == "fresh":
        # Loaded, not rebuilt: still the one file, untouched.
        assert sorted((home / "mkpolicy").glob("cel-grammar-*.lark")) == saved
        assert saved[0].stat().st_mtime_ns == mtime
