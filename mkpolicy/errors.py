"""Typed errors shared by every layer of mkpolicy.

Every error carries a :class:`Location` so that a user sees *where* the problem is:
a file position for document and CEL errors, a policy/phase/patch for engine errors.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Location:
    """Where an error happened.

    ``line`` and ``column`` are 1-based. ``where`` names the place inside a policy
    (for example ``policy tekton-pipelinerun, creation patch #2 (JSONPatch)``).
    """

    file: str | None = None
    line: int | None = None
    column: int | None = None
    where: str | None = None

    def position(self) -> str:
        """``file:line:column`` (as much of it as is known), without ``where``."""
        if self.file is not None:
            pos = self.file
            if self.line is not None:
                pos += f":{self.line}"
                if self.column is not None:
                    pos += f":{self.column}"
            return pos
        if self.line is not None:
            return f"{self.line}:{self.column or 1}"
        return ""

    def __str__(self) -> str:
        return ": ".join(p for p in (self.position(), self.where) if p)


class MkpolicyError(Exception):
    """Base class of every error mkpolicy raises on purpose."""

    def __init__(self, message: str, location: Location | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.location = location if location is not None else Location()

    def __str__(self) -> str:
        loc = str(self.location)
        return f"{loc}: {self.message}" if loc else self.message

    def report(self, severity: str = "error") -> str:
        """One line for a terminal: ``file:line:col: error: message [where]``."""
        pos = self.location.position()
        where = f" [{self.location.where}]" if self.location.where else ""
        return f"{pos}: {severity}: {self.message}{where}" if pos else f"{severity}: {self.message}{where}"


class PolicyError(MkpolicyError):
    """A FrameworkPolicy document is malformed (YAML, schema, GVK, references).

    When a file has several problems, ``problems`` lists them all (each a
    ``PolicyError`` with its own location) and the message summarises them.
    ``reason`` says what kind of problem it is (``unknown-field``, ``duplicate-name``;
    ``invalid`` otherwise), for tools that sort problems, as lint does into rules.
    """

    def __init__(
        self,
        message: str,
        location: Location | None = None,
        problems: list[PolicyError] | None = None,
        *,
        reason: str = "invalid",
    ) -> None:
        super().__init__(message, location)
        self.problems: list[PolicyError] = problems if problems is not None else [self]
        self.reason = reason


class InputError(PolicyError):
    """A path could not be read as policy input: missing, unreadable, binary, too large,
    or a directory without YAML files. Command-line tools exit with 2 for these."""


class CelError(MkpolicyError):
    """A CEL expression failed to parse, compile, type-check or evaluate."""


class PatchError(MkpolicyError):
    """A patch could not be applied, or its result breaks an engine invariant."""


class NotManagedError(MkpolicyError):
    """The object is not managed by the policy (managedBy or a match condition)."""

    def __init__(self, reason: str, location: Location | None = None) -> None:
        super().__init__(f"object is not managed: {reason}", location)
        self.reason = reason


def did_you_mean(name: str, choices: list[str]) -> str:
    """``" (did you mean 'x'?)"`` for the valid name closest to a misspelled ``name`` ("" when none is close).

    A case-insensitive match wins, then the closest by difflib's ratio (at least 0.6:
    ``frameworks`` -> ``framework``, ``expresion`` -> ``expression``, ``faliurePolicy`` ->
    ``failurePolicy``).
    """
    import difflib

    for choice in choices:
        if choice.lower() == name.lower():
            return f" (did you mean {choice!r}?)"
    close = difflib.get_close_matches(name, choices, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
