"""mkpolicy.yamldata: untrusted YAML to plain JSON data, bounded in time and memory."""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any

import pytest

from mkpolicy import yamldata
from mkpolicy.errors import InputError


def bomb(levels: int) -> str:
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a: 1\n", [{"a": 1}]),
        ('{"a": [1, 2.5, null, true, "x"]}', [{"a": [1, 2.5, None, True, "x"]}]),
        # Timestamps stay the text they were written as, as Kubernetes' YAML decoder keeps them.
        ("t: 2024-01-02T03:04:05Z\nd: 2024-01-02\n", [{"t": "2024-01-02T03:04:05Z", "d": "2024-01-02"}]),
        # Keys become strings, as in JSON.
        ("1: one\nnull: n\n", [{"1": "one", "null": "n"}]),
        # Empty documents are skipped.
        ("---\n---\na: 1\n---\n", [{"a": 1}]),
        ("", []),
        # A bomb small enough to expand is just data.
        (bomb(3), [{"a0": ["lol"] * 10, "a1": [["lol"] * 10] * 10, "a2": [[["lol"] * 10] * 10] * 10}]),
        # merge keys are not duplicates
        ("b: &b {x: 1}\nc:\n  <<: *b\n  y: 2\n", [{"b": {"x": 1}, "c": {"x": 1, "y": 2}}]),
    ],
    ids=["mapping", "json", "timestamps", "keys", "empty-documents", "empty", "small-aliases", "merge-key"],
)
def test_load_all(text: str, expected: list[Any]) -> None:
    assert yamldata.load_all(text, "f.yaml") == expected


def test_aliased_subtrees_are_copies() -> None:
    data = yamldata.load_all("a: &x {k: [1]}\nb: *x\n")[0]
    data["a"]["k"].append(2)
    assert data == {"a": {"k": [1, 2]}, "b": {"k": [1]}}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (bomb(9), "f.yaml:1:1: the YAML stream expands to more than 2,000,000 nodes; aliases"),
        ("a: &a [*a]\n", "f.yaml:1:4: recursive alias: a node contains itself"),
        (
            "a0: &a0 [x]\n" + "".join(f"a{i}: &a{i} [*a{i - 1}]\n" for i in range(1, 200)),
            "f.yaml:126:7: document nests deeper than 128 levels (through aliases)",
        ),
        ("- " * 100_000 + "x\n", "f.yaml:1:257: document nests deeper than 128 levels"),
        ("[" * 100_000, "f.yaml:1:129: document nests deeper than 128 levels"),
        ("a: [1,\n", "f.yaml:2:1: malformed YAML: did not find expected node content"),
        ("a: b: c\n", "f.yaml:1:5: malformed YAML: mapping values are not allowed in this context"),
        ("a: *nowhere\n", "f.yaml:1:4: malformed YAML: an alias (*name) without an anchor (&name) before it"),
        ("a: 1\nb:\n  c: 1\n  c: 2\n", "f.yaml:4:3: duplicate key 'c' in one mapping"),
    ],
    ids=[
        "bomb",
        "recursive-alias",
        "alias-chain",
        "deep-block",
        "deep-flow",
        "unclosed",
        "bad-mapping",
        "undefined-alias",
        "duplicate-key",
    ],
)
def test_load_all_refuses(text: str, message: str) -> None:
    start = time.perf_counter()
    with pytest.raises(InputError) as caught:
        yamldata.load_all(text, "f.yaml")
    assert str(caught.value).startswith(message), str(caught.value)
    # Bounded: refused without expanding anything (generous for a loaded machine).
    assert time.perf_counter() - start < 5


def test_node_limit_counts_the_whole_stream() -> None:
    two = "a: [1, 2, 3]\n---\nb: [1, 2, 3]\n"
    assert len(yamldata.load_all(two, max_nodes=20)) == 2
    with pytest.raises(InputError, match="expands to more than 10 nodes"):
        yamldata.load_all(two, max_nodes=10)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"a: 1\n", None),
        (b"\xef\xbb\xbfa: 1\n", None),
        (b"\x7fELF\x00\x01", "f.yaml: expected a YAML text file, found binary data (NUL bytes)"),
        (b"a: 1\nb: \xe9\n", "f.yaml:2: expected UTF-8 text, found an invalid byte at offset 8"),
        (b"#" * 2048, "f.yaml: file is larger than 1024 bytes; keep it small"),
    ],
    ids=["text", "bom", "binary", "latin-1", "huge"],
)
def test_read_text(tmp_path: Path, content: bytes, message: str | None) -> None:
    path = tmp_path / "f.yaml"
    path.write_bytes(content)
    if message is None:
        assert yamldata.read_text(str(path), max_bytes=1024) == "a: 1\n"
        return
    with pytest.raises(InputError) as caught:
        yamldata.read_text(str(path), max_bytes=1024, hint="keep it small")
    assert str(caught.value) == str(tmp_path / message)


def test_read_text_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="missing.yaml: cannot read file: No such file or directory"):
        yamldata.read_text(str(tmp_path / "missing.yaml"))


def test_load_file_from_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"kind: Pod\n")))
    assert yamldata.load_file("-") == [{"kind": "Pod"}]
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"a: [")))
    with pytest.raises(InputError, match=r"^<stdin>:\d+:\d+: malformed YAML"):
        yamldata.load_file("-")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("kind: Pod\n", None),
        ("kind: Pod\n---\nkind: Pod\n", "expected exactly one Kubernetes object (a mapping); found 2 documents"),
        ("- kind: Pod\n", "expected exactly one Kubernetes object (a mapping); found a list"),
        ("", "expected exactly one Kubernetes object (a mapping); found 0 documents"),
    ],
    ids=["one", "two", "list", "none"],
)
def test_load_object(tmp_path: Path, content: str, message: str | None) -> None:
    path = tmp_path / "o.yaml"
    path.write_text(content)
    if message is None:
        assert yamldata.load_object(str(path)) == {"kind": "Pod"}
        return
    with pytest.raises(InputError) as caught:
        yamldata.load_object(str(path))
    assert str(caught.value) == f"{path}: {message}"
