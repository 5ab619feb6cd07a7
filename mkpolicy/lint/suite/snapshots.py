"""``mkpolicy test --update-snapshots``: record actual outputs as the expected ones.

Only snapshot expectations are written (``workerObject``, ``workerObjectFile``,
``statusPatch``, or a case without any expectation yet); ``notManaged`` and ``error``
are assertions and are never rewritten. Files are edited with ruamel.yaml's round-trip
mode: comments, key order, quoting and indentation of everything else survive, and the
parts of an expected object that did not change keep their comments too.
"""

from __future__ import annotations

import io
import os
import re
from typing import Any

from mkpolicy.errors import InputError, Location
from mkpolicy.jsonvalues import json_equal
from mkpolicy.lint.suite.runner import CaseResult, SuiteResult, TestRun


def update_snapshots(run: TestRun) -> int:
    """Rewrite every stale snapshot of ``run``; returns how many cases were updated."""
    updated = 0
    by_file: dict[str, list[tuple[SuiteResult, CaseResult]]] = {}
    for suite in run.suites:
        for case in suite.cases:
            if case.snapshot_stale:
                by_file.setdefault(suite.file, []).append((suite, case))
    for file, items in by_file.items():
        updated += _update_file(file, items)
    return updated


def _update_file(file: str, items: list[tuple[SuiteResult, CaseResult]]) -> int:
    from ruamel.yaml.comments import CommentedMap

    with open(file, encoding="utf-8") as fh:
        text = fh.read()
    yaml = _yaml(text)
    documents = list(yaml.load_all(io.StringIO(text)))
    count = 0
    inline = False
    for suite, case in items:
        assert suite.document is not None and suite.suite is not None
        spec_case = suite.suite.spec.cases[case.index]
        node = documents[suite.document.index]["spec"]["cases"][case.index]
        expect = node.get("expect")
        if not isinstance(expect, CommentedMap):
            expect = CommentedMap()
            node["expect"] = expect
        kind = spec_case.expect.kind
        if kind == "workerObjectFile":
            ref = spec_case.expect.workerObjectFile or ""
            base = os.path.dirname(file)
            write_object_file(ref if os.path.isabs(ref) else os.path.join(base, ref), case.snapshot)
        else:
            key = kind or {"create": "workerObject", "sync": "statusPatch"}.get(spec_case.phase, "integration")
            expect[key] = merge(expect.get(key), case.snapshot)
            inline = True
        _resolve(case)
        count += 1
    if inline:
        out = io.StringIO()
        yaml.dump_all(documents, out)
        _write(file, out.getvalue())
    return count


def _resolve(case: CaseResult) -> None:
    case.updated = True
    case.snapshot_stale = False
    case.diff = ""
    if case.other_problems:
        case.message = "\n".join(case.other_problems)
    else:
        case.status = "passed"
        case.message = ""


def write_object_file(path: str, value: Any) -> None:
    """Write ``value`` to the YAML file ``path``, merged into its current content if any."""
    text = ""
    if os.path.exists(path):
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    yaml = _yaml(text)
    current = yaml.load(io.StringIO(text)) if text.strip() else None
    out = io.StringIO()
    yaml.dump(merge(current, value), out)
    _write(path, out.getvalue())


def _write(path: str, text: str) -> None:
    try:
        directory = os.path.dirname(path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        tmp = path + ".mkpolicy-tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        raise InputError(f"cannot write snapshot: {exc.strerror or exc}", Location(path)) from None


def merge(old: Any, new: Any) -> Any:
    """``new``, reusing the round-trip nodes of ``old`` wherever they hold the same data."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    if isinstance(old, (CommentedMap, CommentedSeq)) and old.fa.flow_style() and not json_equal(old, new):
        return new  # a flow-style {...} that changes is rewritten in block style
    if isinstance(old, CommentedMap) and isinstance(new, dict):
        for key in [k for k in old if k not in new]:
            del old[key]
        for key, value in new.items():
            old[key] = merge(old[key], value) if key in old else value
        return old
    if isinstance(old, CommentedSeq) and isinstance(new, list) and len(old) == len(new):
        for i, value in enumerate(new):
            old[i] = merge(old[i], value)
        return old
    if not isinstance(new, (dict, list)) and not isinstance(old, (dict, list)) and json_equal(old, new):
        return old  # keeps the original quoting
    return new


_SEQ_UNDER_KEY = re.compile(r"^( *)[^\s#-][^\n]*:[ \t]*\n(?:[ \t]*(?:#[^\n]*)?\n)*( *)- ", re.MULTILINE)


def _yaml(text: str) -> Any:
    """A round-trip YAML instance that writes lists indented like ``text`` does."""
    from ruamel.yaml import YAML

    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096
    offset = 2
    match = _SEQ_UNDER_KEY.search(text)
    if match is not None:
        offset = max(0, len(match.group(2)) - len(match.group(1)))
    yaml.indent(mapping=2, sequence=offset + 2, offset=offset)
    return yaml
