"""Run policy test suites: each case through the engine, compared with its expectation."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from mkpolicy.check import CheckError, FindingError, check_loaded
from mkpolicy.engine import Adapter, Context
from mkpolicy.engine.admission import refusals
from mkpolicy.engine.podsets import PodSetConflict
from mkpolicy.engine.workload import PriorityNotFound
from mkpolicy.errors import InputError, Location, MkpolicyError, NotManagedError, PolicyError
from mkpolicy.jsonvalues import json_equal
from mkpolicy.lint.suite.diff import object_diff
from mkpolicy.lint.suite.discover import discover, read_object, suite_documents
from mkpolicy.lint.suite.integration import integration_outcome
from mkpolicy.lint.suite.model import Case, SuiteDocument, validate_suite
from mkpolicy.policy import FrameworkPolicy, load
from mkpolicy.policy.source import Document

Status = Literal["passed", "failed", "error"]


@dataclass
class Outcome:
    """What the engine did with a case: an ``object`` (worker copy or status patch),
    ``notManaged`` (with the reason) or ``error`` (with the message)."""

    kind: Literal["object", "notManaged", "error"]
    value: Any = None
    message: str = ""
    ignored: list[MkpolicyError] = field(default_factory=list)
    #: Properties an integration case found broken (MKP605, MKP606).
    problems: list[str] = field(default_factory=list)


@dataclass
class CaseResult:
    """The result of one case."""

    name: str
    status: Status
    location: Location
    message: str = ""
    diff: str = ""
    duration: float = 0.0
    #: the case's index in the suite document (for snapshot updates)
    index: int = 0
    #: the actual value when only the recorded snapshot is wrong or missing
    snapshot: Any = None
    snapshot_stale: bool = False
    #: problems other than a stale snapshot (they survive --update-snapshots)
    other_problems: list[str] = field(default_factory=list)
    updated: bool = False


@dataclass
class SuiteResult:
    """The result of one suite document; ``error`` when the suite could not run at all."""

    file: str
    name: str
    policy_file: str | None = None
    cases: list[CaseResult] = field(default_factory=list)
    error: MkpolicyError | None = None
    document: Document | None = None
    suite: SuiteDocument | None = None
    duration: float = 0.0


@dataclass
class TestRun:
    """Everything a ``mkpolicy test`` run produced."""

    suites: list[SuiteResult] = field(default_factory=list)
    input_errors: list[MkpolicyError] = field(default_factory=list)
    #: policy files under the given directories that no suite tests
    uncovered: list[str] = field(default_factory=list)
    duration: float = 0.0

    def count(self, status: Status) -> int:
        """Cases with ``status`` (suites that could not run count as one error each)."""
        n = sum(1 for s in self.suites for c in s.cases if c.status == status)
        if status == "error":
            n += sum(1 for s in self.suites if s.error is not None)
        return n

    @property
    def ok(self) -> bool:
        """True when every case passed and nothing else went wrong."""
        return not self.input_errors and not self.uncovered and self.count("failed") + self.count("error") == 0


def run_paths(paths: list[str], *, name_filter: str | None = None, require_suites: bool = False) -> TestRun:
    """Discover and run the suites under ``paths``."""
    start = time.perf_counter()
    found = discover(paths)
    run = TestRun(input_errors=list(found.input_errors))
    for file in found.suites:
        try:
            documents = suite_documents(file)
        except InputError as exc:
            run.input_errors.append(exc)
            continue
        except PolicyError as exc:
            run.suites.append(SuiteResult(file=file, name=os.path.basename(file), error=exc))
            continue
        for doc in documents:
            run.suites.append(run_suite(doc, name_filter))
    if require_suites:
        covered = {os.path.normpath(s.policy_file) for s in run.suites if s.policy_file}
        run.uncovered = [f for f in found.policy_files if os.path.normpath(f) not in covered and _is_policy_file(f)]
    run.duration = time.perf_counter() - start
    return run


def _is_policy_file(path: str) -> bool:
    try:
        policies = load(path)
    except PolicyError:
        return False
    return bool(policies)


def run_suite(doc: Document, name_filter: str | None = None) -> SuiteResult:
    """Run one suite document."""
    start = time.perf_counter()
    file = doc.source.file
    name = doc.data.get("metadata", {}).get("name") if isinstance(doc.data, dict) else None
    result = SuiteResult(file=file, name=str(name or os.path.basename(file)), document=doc)
    try:
        suite = validate_suite(doc)
        result.suite = suite
        result.name = suite.metadata.name
        base = os.path.dirname(file)
        policy_ref = suite.spec.policy
        result.policy_file = os.path.normpath(
            policy_ref if os.path.isabs(policy_ref) else os.path.join(base, policy_ref)
        )
        policy = _select_policy(result.policy_file, suite, doc)
        adapter = _checked_adapter(policy)
    except MkpolicyError as exc:
        result.error = exc
        result.duration = time.perf_counter() - start
        return result
    for index, case in enumerate(suite.spec.cases):
        if name_filter and name_filter.lower() not in case.name.lower():
            continue
        result.cases.append(run_case(adapter, suite, case, index, doc))
    result.duration = time.perf_counter() - start
    return result


def _checked_adapter(policy: FrameworkPolicy) -> Adapter:
    """The policy compiled through the checker: a policy the sidecar would refuse (an
    error-severity lint rule fires) fails its suite with lint's lines, instead of passing
    tests of something that never runs."""
    findings, _, adapter = check_loaded(policy)
    errors = [FindingError(f) for f in findings if f.severity == "error"]
    if errors:
        raise CheckError(errors)
    assert adapter is not None  # the engine refuses no policy without an error finding
    return adapter


def _select_policy(path: str, suite: SuiteDocument, doc: Document) -> FrameworkPolicy:
    where = doc.source.location(("spec", "policy"))
    try:
        policies = load(path)
    except PolicyError as exc:
        problems = "; ".join(str(p) for p in exc.problems)
        raise PolicyError(f"spec.policy {suite.spec.policy!r} does not load: {problems}", where) from None
    wanted = suite.spec.policyName
    if wanted is not None:
        chosen = [p for p in policies if p.name == wanted]
        if not chosen:
            names = ", ".join(p.name for p in policies)
            raise PolicyError(f"spec.policyName {wanted!r}: the file holds policies {names}", where)
        return chosen[0]
    if len(policies) != 1:
        names = ", ".join(p.name for p in policies)
        raise PolicyError(
            f"spec.policy {suite.spec.policy!r} holds {len(policies)} policies ({names}); "
            "name one with spec.policyName",
            where,
        )
    return policies[0]


def build_context(suite: SuiteDocument, case: Case, manager: dict[str, Any], doc: Document, index: int) -> Context:
    """The engine context of a case: defaults, then ``spec.context``, then the case's ``context``."""
    base = os.path.dirname(doc.source.file)
    merged: dict[str, Any] = {}
    for layer, path in ((suite.spec.context, ("spec", "context")), (case.context, ("spec", "cases", index, "context"))):
        if layer is None:
            continue
        for key in layer.model_fields_set:
            merged[key] = getattr(layer, key)
            if key == "workloadFile":
                merged.pop("workload", None)
                merged["workload"] = read_object(
                    base, layer.workloadFile or "", "workloadFile", doc.source.location((*path, "workloadFile"))
                )
    meta = manager.get("metadata") or {}
    default_name = f"{str(manager.get('kind', '')).lower()}-{meta.get('name', 'object')}"
    return Context(
        workload_name=merged.get("workloadName") or default_name,
        origin=merged.get("origin") or "multikueue",
        cluster=merged.get("cluster") or "worker1",
        workload=merged.get("workload"),
        identifier=merged.get("identifier") or "annotation",
        now=merged.get("now"),
    )


def _outcome(
    adapter: Adapter, case: Case, manager: dict[str, Any], worker: dict[str, Any] | None, ctx: Context
) -> Outcome:
    ignored: list[MkpolicyError] = []
    if case.phase == "integration":
        try:
            snapshot, problems = integration_outcome(adapter, case, manager)
        except NotManagedError as exc:
            return Outcome("notManaged", message=exc.reason)
        except (MkpolicyError, PodSetConflict, PriorityNotFound, ValueError) as exc:
            return Outcome("error", message=str(exc))
        return Outcome("object", value=snapshot, problems=problems)
    try:
        if case.phase == "create":
            value: Any = adapter.create(manager, ctx, ignored)
        else:
            assert worker is not None
            value = adapter.sync(manager, worker, ctx, ignored)
    except NotManagedError as exc:
        return Outcome("notManaged", message=exc.reason, ignored=ignored)
    except MkpolicyError as exc:
        return Outcome("error", message=str(exc), ignored=ignored)
    return Outcome("object", value=value, ignored=ignored)


def run_case(adapter: Adapter, suite: SuiteDocument, case: Case, index: int, doc: Document) -> CaseResult:
    """Run one case and compare its outcome with the expectation."""
    start = time.perf_counter()
    path = ("spec", "cases", index)
    location = doc.source.location((*path, "name"))
    result = CaseResult(case.name, "passed", location, index=index)
    base = os.path.dirname(doc.source.file)
    try:
        manager = case.managerObject
        if manager is None:
            where = doc.source.location((*path, "managerObjectFile"))
            manager = read_object(base, case.managerObjectFile or "", "managerObjectFile", where)
        worker = case.workerObject
        if worker is None and case.workerObjectFile is not None:
            where = doc.source.location((*path, "workerObjectFile"))
            worker = read_object(base, case.workerObjectFile, "workerObjectFile", where)
        ctx = build_context(suite, case, manager, doc, index)
        expected = _expected(case, base, doc, path)
    except (MkpolicyError, ValueError, TypeError) as exc:
        result.status = "error"
        result.message = str(exc)
        result.duration = time.perf_counter() - start
        return result
    outcome = _outcome(adapter, case, manager, worker, ctx)
    _judge(result, case, outcome, expected)
    if outcome.kind == "object":
        _check_schema(result, adapter, case, manager, outcome.value)
    result.duration = time.perf_counter() - start
    return result


_MISSING = object()


def _expected(case: Case, base: str, doc: Document, path: tuple[str | int, ...]) -> Any:
    """The expected object of a snapshot expectation (``_MISSING`` when it has none yet)."""
    expect = case.expect
    if expect.kind == "workerObject":
        return expect.workerObject
    if expect.kind == "statusPatch":
        return expect.statusPatch
    if expect.kind == "integration":
        return expect.integration
    if expect.kind == "workerObjectFile":
        ref = expect.workerObjectFile or ""
        full = ref if os.path.isabs(ref) else os.path.join(base, ref)
        if not os.path.exists(full):
            return _MISSING  # a snapshot file still to write (--update-snapshots)
        where = doc.source.location((*path, "expect", "workerObjectFile"))
        return read_object(base, ref, "expect.workerObjectFile", where)
    return _MISSING


def _judge(result: CaseResult, case: Case, outcome: Outcome, expected: Any) -> None:
    expect = case.expect
    kind = expect.kind
    what = {"create": "worker copy", "sync": "status patch"}.get(case.phase, "integration snapshot")
    problems: list[str] = []
    snapshot: str | None = None
    if kind == "notManaged":
        wanted = expect.notManaged
        if outcome.kind != "notManaged":
            problems.append(f"expected the object not to be managed; {_describe(outcome, what)}")
        elif isinstance(wanted, str) and wanted not in outcome.message:
            problems.append(f"expected a not-managed reason containing {wanted!r}; found {outcome.message!r}")
    elif kind == "error":
        wanted = expect.error or ""
        if outcome.kind != "error":
            problems.append(f"expected an error containing {wanted!r}; {_describe(outcome, what)}")
        elif wanted not in outcome.message:
            problems.append(f"expected an error containing {wanted!r}; found: {outcome.message}")
    elif outcome.kind != "object":
        problems.append(f"expected a {what}; {_describe(outcome, what)}")
    elif expected is _MISSING:
        snapshot = f"no expected {what} recorded yet; run 'mkpolicy test --update-snapshots' to record it"
        result.diff = object_diff(None, outcome.value, missing=True)
    elif not json_equal(expected, outcome.value):
        snapshot = f"the {what} differs from the expected one (- expected, + actual)"
        result.diff = object_diff(expected, outcome.value)
    problems.extend(_ignored_problems(expect.ignoredErrors, outcome.ignored))
    problems.extend(outcome.problems)
    result.other_problems = problems
    if snapshot is not None:
        result.snapshot_stale = True
        result.snapshot = outcome.value
    messages = ([snapshot] if snapshot else []) + problems
    if messages:
        result.status = "failed"
        result.message = "\n".join(messages)


def _check_schema(result: CaseResult, adapter: Adapter, case: Case, manager: dict[str, Any], value: Any) -> None:
    """Fail the case when the API server would refuse what the policy produced (ObjectMeta, spec.schema)."""
    if case.phase == "integration":
        return
    for problem in refusals(adapter, manager, case.phase, value):
        result.other_problems.append(problem)
        result.status = "failed"
        result.message = "\n".join(m for m in (result.message, problem) if m)


def _ignored_problems(allowed: list[str] | None, ignored: list[MkpolicyError]) -> list[str]:
    out = []
    patterns = allowed or []
    for exc in ignored:
        if not any(p in str(exc) for p in patterns):
            out.append(
                f"a patch failed and was skipped (failurePolicy Ignore): {exc}; "
                "list it in expect.ignoredErrors if that is intended"
            )
    for pattern in patterns:
        if not any(pattern in str(exc) for exc in ignored):
            out.append(f"expect.ignoredErrors: no skipped patch failed with an error containing {pattern!r}")
    return out


def _describe(outcome: Outcome, what: str) -> str:
    if outcome.kind == "notManaged":
        return f"found: not managed ({outcome.message})"
    if outcome.kind == "error":
        return f"found the error: {outcome.message}"
    if what == "status patch" and outcome.value is None:
        return "found: no status patch (nothing to write)"
    return f"found a {what}"
