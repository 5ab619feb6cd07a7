"""The suite's own pytest hooks (tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

UNFORMATTABLE = """
import _pytest.python

class Deep(Exception):
    pass

_format = _pytest.python.Function.repr_failure

def repr_failure(self, excinfo):
    # What CPython 3.11 raised while pytest re-parsed the source of a deep-recursion failure.
    if excinfo.errisinstance(Deep):
        raise SystemError("AST constructor recursion depth mismatch (before=1, after=2)")
    return _format(self, excinfo)

_pytest.python.Function.repr_failure = repr_failure

def test_unformattable():
    raise Deep("too deep")

def test_after():
    pass
"""


def test_a_failure_pytest_cannot_format_fails_one_test_not_the_run(pytester: pytest.Pytester) -> None:
    pytester.makeconftest((Path(__file__).parent / "conftest.py").read_text())
    pytester.makepyfile(test_guard=UNFORMATTABLE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*the test raised *Deep: too deep*", "*pytest could not format the traceback: SystemError*"]
    )
    assert "INTERNALERROR" not in result.stdout.str()
