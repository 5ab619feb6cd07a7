"""Read policy files for lint: every document problem becomes a finding with a rule ID.

This mirrors :func:`mkpolicy.policy.load` (same discovery, same skipping of example
objects and test suites in directories, same messages and positions) but keeps going
after a problem and classifies each one, so that a single run reports everything.
Paths that cannot be read at all are *input errors*, not findings.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from mkpolicy.check.findings import Finding
from mkpolicy.errors import InputError, Location, PolicyError
from mkpolicy.policy import API_VERSION, KIND, FrameworkPolicy
from mkpolicy.policy.loader import (
    describe_document,
    discover,
    document_kind,
    duplicate_frameworks,
    may_hold_policies,
    validate_document,
)
from mkpolicy.policy.source import Document, parse_documents, read_text


@dataclass
class Collected:
    """The policies that validated, the document findings and the unreadable inputs."""

    policies: list[FrameworkPolicy] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    input_errors: list[PolicyError] = field(default_factory=list)
    files: list[str] = field(default_factory=list)


def collect(paths: Iterable[str]) -> Collected:
    """Read every policy under ``paths`` (files, or directories searched recursively)."""
    out = Collected()
    for path in paths:
        if os.path.isdir(path):
            files = discover(path)
            if not files:
                out.input_errors.append(InputError("directory holds no *.yaml or *.yml files", Location(path)))
                continue
            before = (len(out.policies), len(out.findings), len(out.input_errors))
            for file in files:
                _collect_file(file, out, explicit=False)
            if (len(out.policies), len(out.findings), len(out.input_errors)) == before:
                out.input_errors.append(InputError("directory holds no FrameworkPolicy documents", Location(path)))
        elif os.path.exists(path):
            _collect_file(path, out, explicit=True)
        else:
            out.input_errors.append(InputError("no such file or directory", Location(path)))
    for problem in duplicate_frameworks(out.policies):
        out.findings.append(Finding.at("MKP104", problem.message, problem.location))
    return out


def _collect_file(file: str, out: Collected, explicit: bool) -> None:
    try:
        text = read_text(file)
    except PolicyError as exc:
        out.input_errors.append(exc)
        return
    if not explicit and not may_hold_policies(text):
        return  # test suites, example objects, CRDs: skipped without the slow positional parse
    try:
        documents = list(parse_documents(text, file))
    except InputError as exc:
        out.input_errors.append(exc)
        return
    except PolicyError as exc:
        out.files.append(file)
        out.findings.append(Finding.at("MKP101", exc.message, exc.location))
        return
    seen = False
    for doc in documents:
        kind = document_kind(doc.data)
        if kind == "other":
            continue
        if kind == "skip":
            if explicit:
                seen = True
                out.findings.append(
                    Finding.at(
                        "MKP106",
                        f"expected apiVersion {API_VERSION!r} and kind {KIND!r}; found {describe_document(doc.data)} "
                        f"(document {doc.index + 1}); name directories to skip other documents",
                        doc.source.location(()),
                    )
                )
            continue
        seen = True
        _validate(doc, out)
    if explicit and not documents:
        out.findings.append(
            Finding.at("MKP106", "file holds no YAML documents; expected a FrameworkPolicy", Location(file, 1, 1))
        )
        seen = True
    if seen:
        out.files.append(file)


def _validate(doc: Document, out: Collected) -> None:
    try:
        policy = validate_document(doc)
    except PolicyError as exc:
        for problem in exc.problems:
            out.findings.append(Finding.at(classify(problem), problem.message, problem.location))
        return
    out.policies.append(policy)


#: Lint rules of the policy loader's problems, by their reason (MKP102 otherwise).
_RULES = {"unknown-field": "MKP103", "duplicate-name": "MKP105"}


def classify(problem: PolicyError) -> str:
    """The rule ID of a document problem reported by the policy loader."""
    return _RULES.get(problem.reason, "MKP102")
