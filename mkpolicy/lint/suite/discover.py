"""Find test suites and load the files they name (policies, objects, workloads)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import mkpolicy.yamldata as yamldata
from mkpolicy.errors import InputError, Location, MkpolicyError, PolicyError
from mkpolicy.lint.suite.model import SUITE_KIND
from mkpolicy.policy.loader import YAML_SUFFIXES, walk
from mkpolicy.policy.source import Document, parse_documents, read_text

SUITE_SUFFIXES = tuple(".test" + s for s in YAML_SUFFIXES)


@dataclass
class Discovered:
    """Suite files to run, policy files seen in directories, and unreadable paths."""

    suites: list[str] = field(default_factory=list)
    policy_files: list[str] = field(default_factory=list)
    input_errors: list[MkpolicyError] = field(default_factory=list)


def is_suite_file(path: str) -> bool:
    """``*.test.yaml`` / ``*.test.yml``."""
    return path.endswith(SUITE_SUFFIXES)


def suite_for(policy_file: str) -> str | None:
    """The suite next to ``policy_file`` (``<stem>.test.yaml``), if it exists."""
    stem, _ = os.path.splitext(policy_file)
    for suffix in SUITE_SUFFIXES:
        if os.path.isfile(stem + suffix):
            return stem + suffix
    return None


def discover(paths: Iterable[str]) -> Discovered:
    """Suites under ``paths``: directories are searched recursively for ``*.test.yaml``;
    a suite file runs itself; a policy file runs the suite next to it."""
    out = Discovered()
    for path in paths:
        if os.path.isdir(path):
            found = False
            for root, files in walk(path):
                for name in files:
                    full = os.path.join(root, name)
                    if is_suite_file(name):
                        out.suites.append(full)
                        found = True
                    elif name.endswith(YAML_SUFFIXES):
                        out.policy_files.append(full)
            if not found:
                out.input_errors.append(
                    InputError("directory holds no test suites (*.test.yaml files)", Location(path))
                )
        elif os.path.isfile(path):
            if is_suite_file(path):
                out.suites.append(path)
            else:
                suite = suite_for(path)
                if suite is None:
                    stem = os.path.splitext(os.path.basename(path))[0]
                    out.input_errors.append(
                        InputError(f"no test suite next to this policy (expected {stem}.test.yaml)", Location(path))
                    )
                else:
                    out.suites.append(suite)
        else:
            out.input_errors.append(InputError("no such file or directory", Location(path)))
    out.suites = list(dict.fromkeys(os.path.normpath(s) for s in out.suites))
    return out


def load_documents(file: str) -> list[Document]:
    """The YAML documents of ``file`` (input errors and YAML errors raise)."""
    return list(parse_documents(read_text(file), file))


def suite_documents(file: str) -> list[Document]:
    """The ``FrameworkPolicyTest`` documents of a suite file."""
    docs = load_documents(file)
    suites = [d for d in docs if isinstance(d.data, dict) and d.data.get("kind") == SUITE_KIND]
    if not suites:
        kinds = ", ".join(repr(d.data.get("kind")) if isinstance(d.data, dict) else "a non-mapping" for d in docs)
        raise PolicyError(
            f"expected a document with kind {SUITE_KIND!r}; found {kinds or 'no documents'}", Location(file, 1, 1)
        )
    return suites


def read_object(base: str, ref: str, what: str, where: Location) -> dict[str, Any]:
    """The single Kubernetes object in the file ``ref`` (relative to the directory ``base``).

    Read without positions (errors point at the suite, where ``ref`` is named): the
    fast bounded reader, not the policy parser.
    """
    path = os.path.normpath(ref if os.path.isabs(ref) else os.path.join(base, ref))
    try:
        return yamldata.load_object(path)
    except InputError as exc:
        # A position inside the object file is worth naming; the file itself is ``ref``.
        problem = str(exc) if exc.location.line is not None else exc.message
        raise PolicyError(f"{what} {ref!r}: {problem}", where) from None
