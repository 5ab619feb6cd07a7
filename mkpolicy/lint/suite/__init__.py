"""Policy test suites (``*.test.yaml``, kind ``FrameworkPolicyTest``; docs/policy-tests.md)."""

from mkpolicy.lint.suite.runner import CaseResult, SuiteResult, TestRun, run_paths

__all__ = ["CaseResult", "SuiteResult", "TestRun", "run_paths"]
