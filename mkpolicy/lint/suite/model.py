"""The policy test-suite document (``kind: FrameworkPolicyTest``), as ``docs/policy-tests.md``
specifies it, validated with pydantic; problems are reported with file positions.
"""

from __future__ import annotations

import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from mkpolicy.errors import PolicyError
from mkpolicy.policy.loader import aggregate
from mkpolicy.policy.source import Document, Path, dotted

SUITE_KIND = "FrameworkPolicyTest"
#: The expectation fields; exactly one is set per case (none: a snapshot still to record).
EXPECTATIONS = ("workerObject", "workerObjectFile", "statusPatch", "integration", "notManaged", "error")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=False)


class SuiteContext(_Model):
    """Context fields; every one is optional (suite defaults, per-case overrides)."""

    workloadName: str | None = None
    origin: str | None = None
    cluster: str | None = None
    identifier: Literal["annotation", "label"] | None = None
    workload: dict[str, Any] | None = None
    workloadFile: str | None = None
    #: CEL's ``now``: an RFC 3339 time with a zone (default: the wall clock at each call).
    now: datetime.datetime | None = None

    @field_validator("now")
    @classmethod
    def _zoned(cls, value: datetime.datetime | None) -> datetime.datetime | None:
        if value is not None and value.utcoffset() is None:
            raise ValueError("now: expected an RFC 3339 time with a zone, e.g. 2026-05-04T10:00:30Z")
        return value

    @model_validator(mode="after")
    def _one_workload(self) -> SuiteContext:
        if self.workload is not None and self.workloadFile is not None:
            raise ValueError("set workload or workloadFile, not both")
        return self


class Expect(_Model):
    """What a case expects. ``ignoredErrors`` is an extension: patches that may be skipped."""

    workerObject: dict[str, Any] | None = None
    workerObjectFile: str | None = None
    statusPatch: dict[str, Any] | None = None
    #: ``phase: integration``: {workload, injected, restored, finished, active}.
    integration: dict[str, Any] | None = None
    notManaged: bool | str | None = None
    error: str | None = None
    ignoredErrors: list[str] | None = None

    @property
    def kind(self) -> str | None:
        """Which expectation is set (``statusPatch: null`` counts), or None for a pending snapshot."""
        chosen = [name for name in EXPECTATIONS if name in self.model_fields_set]
        return chosen[0] if chosen else None

    @model_validator(mode="after")
    def _exactly_one(self) -> Expect:
        chosen = [name for name in EXPECTATIONS if name in self.model_fields_set]
        if len(chosen) > 1:
            raise ValueError(f"expected exactly one of {', '.join(EXPECTATIONS)}; found {', '.join(chosen)}")
        if "integration" in chosen and self.integration is None:
            raise ValueError("integration: expected {workload, injected, restored, finished, active}; found null")
        if "workerObject" in chosen and self.workerObject is None:
            raise ValueError("workerObject: expected the expected worker object (a mapping); found null")
        if "notManaged" in chosen and self.notManaged is False:
            raise ValueError("notManaged: expected true or a substring of the reason; found false")
        if "notManaged" in chosen and self.notManaged is None:
            raise ValueError("notManaged: expected true or a substring of the reason; found null")
        if "error" in chosen and not self.error:
            raise ValueError("error: expected a substring of the error message; found an empty value")
        return self


class Case(_Model):
    """One test case."""

    name: str = Field(min_length=1)
    phase: Literal["create", "sync", "integration"]
    managerObject: dict[str, Any] | None = None
    managerObjectFile: str | None = None
    workerObject: dict[str, Any] | None = None
    workerObjectFile: str | None = None
    context: SuiteContext | None = None
    #: ``phase: integration``: the admission's PodSetInfo per podSet (default: Kueue's podset label).
    podSetsInfo: list[dict[str, Any]] | None = None
    #: ``phase: integration``: PriorityClass and WorkloadPriorityClass values by name.
    priorityClasses: dict[str, int] | None = None
    expect: Expect = Field(default_factory=Expect)

    @model_validator(mode="after")
    def _inputs(self) -> Case:
        if (self.managerObject is None) == (self.managerObjectFile is None):
            raise ValueError("expected exactly one of managerObject and managerObjectFile")
        has_worker = self.workerObject is not None or self.workerObjectFile is not None
        if self.workerObject is not None and self.workerObjectFile is not None:
            raise ValueError("set workerObject or workerObjectFile, not both")
        if self.phase == "sync" and not has_worker:
            raise ValueError("a sync case needs the worker's object: workerObject or workerObjectFile")
        kind = self.expect.kind
        if self.phase != "integration" and (self.podSetsInfo is not None or self.priorityClasses is not None):
            raise ValueError("podSetsInfo and priorityClasses belong to integration cases")
        if self.phase == "integration":
            if has_worker:
                raise ValueError("an integration case has no worker object input")
            if kind not in (None, "integration", "error"):
                raise ValueError(f"an integration case expects integration or error; found {kind}")
        elif kind == "integration":
            raise ValueError("expect.integration belongs to integration cases (phase: integration)")
        if self.phase == "create" and has_worker:
            raise ValueError("a create case has no worker object input (expect.workerObject is the expected copy)")
        kind = self.expect.kind
        if self.phase == "create" and kind == "statusPatch":
            raise ValueError("expect.statusPatch belongs to sync cases; a create case expects workerObject")
        if self.phase == "sync" and kind in ("workerObject", "workerObjectFile"):
            raise ValueError("expect.workerObject belongs to create cases; a sync case expects statusPatch")
        return self


class SuiteSpec(_Model):
    """The suite: which policy, default context, cases.

    ``policyName`` (an extension) picks one policy when the file holds several.
    """

    policy: str
    policyName: str | None = None
    context: SuiteContext = Field(default_factory=SuiteContext)
    cases: list[Case] = Field(min_length=1)


class SuiteMetadata(_Model):
    """The suite's name (free-form labels are allowed)."""

    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class SuiteDocument(_Model):
    """A ``FrameworkPolicyTest`` document."""

    apiVersion: Literal["mkpolicy.io/v1alpha1"]
    kind: Literal["FrameworkPolicyTest"]
    metadata: SuiteMetadata
    spec: SuiteSpec


def validate_suite(doc: Document) -> SuiteDocument:
    """Validate one YAML document as a suite; every problem is a located :class:`PolicyError`."""
    if not isinstance(doc.data, dict):
        raise PolicyError(
            f"expected a {SUITE_KIND} mapping; found a {type(doc.data).__name__}", doc.source.location(())
        )
    try:
        return SuiteDocument.model_validate(doc.data)
    except ValidationError as exc:
        raise aggregate([_problem(err, doc) for err in exc.errors(include_url=False)]) from None


def _problem(err: Any, doc: Document) -> PolicyError:
    loc: Path = tuple(seg for seg in err.get("loc", ()) if isinstance(seg, (str, int)))
    path = _existing(doc.data, loc)
    where = dotted(loc)
    kind = err.get("type", "")
    message = str(err.get("msg", "invalid value"))
    if kind == "extra_forbidden":
        return PolicyError(f"unknown field {where!r}", doc.source.location(path, key=True))
    if kind == "missing":
        return PolicyError(f"missing required field {where!r}", doc.source.location(path, key=True))
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    elif message.startswith("Input should be"):
        message = "expected" + message[len("Input should be") :] + f"; found {err.get('input')!r}"
    return PolicyError(f"{where}: {message}", doc.source.location(path))


def _existing(data: Any, loc: Path) -> Path:
    """The longest prefix of ``loc`` that exists in ``data`` (pydantic adds union tags)."""
    out: list[str | int] = []
    cur = data
    for seg in loc:
        in_list = isinstance(cur, list) and isinstance(seg, int) and 0 <= seg < len(cur)
        if not (in_list or (isinstance(cur, dict) and seg in cur)):
            break
        cur = cur[seg]
        out.append(seg)
    return tuple(out)
