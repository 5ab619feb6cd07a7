"""Request shapes: two recordings of Kueue's requests to its workers, made comparable.

The sidecar's request log (:mod:`mkpolicy.sidecar.requestlog`) records what a Kueue sent
through it — real Kueue on real peers, or Kueue's model on loopback servers. Two runs of
the same scenario differ in what is per run (namespaces, names, uids, resourceVersions,
how many times a reconcile ran, the order of concurrent reconciles), so the comparison is
of **shapes** per **phase**:

- a request's shape (:class:`Shape`): worker, method, the path with the run's names
  replaced by placeholders (``{ns}``, ``{job}``, ``{workload}``), the query (values that
  differ per run replaced), ``Accept``, ``Content-Type``, the body's keys and value types
  (never values) and the status code answered;
- a phase: the requests between two steps of the scenario, compared as *sets* of shapes
  (how often Kueue repeats a request depends on how many events it saw, and requests of
  concurrent reconciles come in any order).

:func:`compare` gives what only one side sent, per phase; a test asserts that list exactly.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

#: Query parameters whose values differ per run (replaced by ``{<name>}``).
PER_RUN_QUERY = frozenset({"resourceVersion", "continue", "timeoutSeconds"})


@dataclass(frozen=True, order=True)
class Shape:
    """One request's shape (see the module docstring)."""

    cluster: str
    method: str
    path: str
    query: str
    accept: str
    content_type: str
    body: str
    code: str

    def line(self) -> str:
        """A compact one-line form (how differences are listed)."""
        query = f"?{self.query}" if self.query else ""
        media = f" accept={self.accept}" if self.accept else ""
        media += f" content-type={self.content_type}" if self.content_type else ""
        body = f" body={self.body}" if self.body != "null" else ""
        return f"{self.cluster} {self.method} {self.path}{query}{media}{body} -> {self.code}"


def _template(text: str, names: Mapping[str, str]) -> str:
    """``text`` with each name, where it stands whole (between ``/``, ``=``, ``,`` ...), replaced."""
    for value, placeholder in sorted(names.items(), key=lambda kv: -len(kv[0])):
        text = re.sub(rf"(?<![\w.-]){re.escape(value)}(?![\w.-])", placeholder, text)
    return text


def shape_of(entry: Mapping[str, Any], names: Mapping[str, str]) -> Shape:
    """The shape of one request-log entry; ``names``: per-run value -> placeholder (e.g. the
    namespace -> ``{ns}``), replaced in the path and the query (a body's shape has no values)."""
    query = []
    for key in sorted(entry.get("query") or {}):
        for value in entry["query"][key]:
            value = f"{{{key}}}" if key in PER_RUN_QUERY else _template(value, names)
            query.append(f"{key}={value}")
    body = json.dumps(entry.get("body"), sort_keys=True, separators=(",", ":"))
    code = entry.get("code")
    return Shape(
        cluster=entry["cluster"],
        method=entry["method"],
        path=_template(entry["path"], names),
        query="&".join(query),
        accept=entry.get("accept") or "",
        content_type=entry.get("contentType") or "",
        body=body,
        code="stream" if code is None else str(code),
    )


@dataclass(frozen=True)
class Difference:
    """A request one side sent in a phase and the other did not (``side``: model or real); or,
    ``side`` "both", the same request with bodies of different shapes (``detail``: where)."""

    phase: str
    side: str
    shape: Shape
    detail: str = ""

    def line(self) -> str:
        """``phase: only <side>: <shape>``, or ``phase: <request>: body: <detail>``."""
        if self.side == "both":
            s = self.shape
            return (
                f"{self.phase}: {s.cluster} {s.method} {s.path}{'?' + s.query if s.query else ''}: body: {self.detail}"
            )
        return f"{self.phase}: only {self.side}: {self.shape.line()}"


def body_differences(model: Any, real: Any, path: str = "") -> list[str]:
    """Where two body shapes differ: ``only model: <path>``, ``only real: <path>``, or
    ``<path>: model <shape> / real <shape>``, at the topmost place each difference starts."""
    if isinstance(model, dict) and isinstance(real, dict):
        out = [f"only model: {path}{k}" for k in sorted(model.keys() - real.keys())]
        out += [f"only real: {path}{k}" for k in sorted(real.keys() - model.keys())]
        for key in sorted(model.keys() & real.keys()):
            out += body_differences(model[key], real[key], f"{path}{key}.")
        return out
    if isinstance(model, list) and isinstance(real, list) and len(model) == len(real) == 1:
        return body_differences(model[0], real[0], f"{path.rstrip('.')}[].")
    if model != real:
        where = path.rstrip(".") or "(body)"
        return [f"{where}: model {json.dumps(model, sort_keys=True)} / real {json.dumps(real, sort_keys=True)}"]
    return []


def phases(
    entries: Iterable[Mapping[str, Any]], marks: Sequence[tuple[str, float]], names: Mapping[str, str]
) -> dict[str, set[Shape]]:
    """The shapes of ``entries`` per phase: ``marks`` are (phase, start time), in order; an entry
    belongs to the last phase started at or before it (entries before the first mark are dropped)."""
    out: dict[str, set[Shape]] = {phase: set() for phase, _ in marks}
    for entry in entries:
        current = None
        for phase, start in marks:
            if entry["t"] >= start:
                current = phase
        if current is not None:
            out[current].add(shape_of(entry, names))
    return out


def compare(model: Mapping[str, set[Shape]], real: Mapping[str, set[Shape]]) -> list[Difference]:
    """What only one side sent, per phase (phases in ``real``'s order, then shapes sorted). A request
    both sent once with differently shaped bodies is one difference, saying where they differ."""
    out = []
    for phase in [*real, *(p for p in model if p not in real)]:
        mine, theirs = (
            sorted(model.get(phase, set()) - real.get(phase, set())),
            sorted(real.get(phase, set()) - model.get(phase, set())),
        )
        for s in list(mine):
            twins = [t for t in theirs if replace(t, body=s.body) == s]
            if len(twins) == 1 and len([m for m in mine if replace(m, body=s.body) == s]) == 1:
                details = body_differences(json.loads(s.body), json.loads(twins[0].body))
                out += [Difference(phase, "both", s, d) for d in details]
                mine.remove(s)
                theirs.remove(twins[0])
        out += [Difference(phase, "model", s) for s in mine]
        out += [Difference(phase, "real", s) for s in theirs]
    return out
