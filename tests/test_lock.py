"""constraints.txt, the lock CI installs with, covers every declared dependency."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent


def _pins() -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: expected NAME==VERSION, found {line!r}"
            pins[canonicalize_name(name)] = Version(version)
    return pins


def test_every_declared_dependency_is_pinned_within_its_bounds() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = [*project["dependencies"], *project["optional-dependencies"]["dev"]]
    pins = _pins()
    problems = []
    for text in declared:
        req = Requirement(text)
        pin = pins.get(canonicalize_name(req.name))
        if pin is None:
            problems.append(f"{req.name}: not in constraints.txt")
        elif not req.specifier.contains(pin, prereleases=True):
            problems.append(f"{req.name}: pinned {pin}, pyproject.toml asks {req.specifier}")
    assert problems == [], "regenerate constraints.txt (CONTRIBUTING.md): " + "; ".join(problems)
