"""Fault injection: make the server misbehave on purpose, from a test.

Rules match requests by verb, resource, group, namespace, name, subresource, HTTP
method or a path regex (all optional; a rule with no criteria matches everything
except the health endpoints) and fire a number of times (``times=None``: until
removed)::

    srv.faults.fail(500, verb="create", resource="pipelineruns")   # next matching request -> 500
    srv.faults.fail(429, times=3, retry_after=2)                     # next 3 requests -> 429
    srv.faults.fail(409, verb="update", message="injected conflict")
    srv.faults.delay(0.5, verb="get", times=None)                   # every GET +0.5 s
    rule = srv.faults.hold(verb="get", resource="pipelineruns")     # the next such GET waits ...
    rule.release()                                                   # ... until released
    srv.faults.drop(verb="list")                                     # cut the connection mid-body
    srv.faults.end_watches()                                        # end the open watches now
    srv.faults.end_watches(abort=True, resource="workloads")        # ... by cutting the connection
    srv.faults.limit_watches(events=2)                              # later watches end after 2 events
    srv.faults.unreachable()                                         # connection refused ...
    srv.faults.reachable()                                           # ... until back, same port and data
    srv.faults.unreachable(mode="blackhole")                        # accept, never answer
    srv.faults.clear()

Every method is safe to call from any thread. Matching happens when a request arrives,
after authentication; a rule counts the requests it fired on (``rule.hits``).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from mkpolicy.testing.apiserver.errors import ApiError, from_code

if TYPE_CHECKING:
    from mkpolicy.testing.apiserver.routing import RequestInfo

Action = Literal["fail", "delay", "hold", "drop", "limit_watch"]
UnreachableMode = Literal["refuse", "blackhole"]


@dataclass(frozen=True)
class Match:
    """Which requests a rule applies to (None: any)."""

    verb: str | None = None
    resource: str | None = None
    group: str | None = None
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None
    method: str | None = None
    path: str | None = None

    def matches(self, info: RequestInfo) -> bool:
        """Whether the request ``info`` is one of these."""
        checks = (
            (self.verb, info.verb),
            (self.resource, info.resource),
            (self.group, info.group),
            (self.namespace, info.namespace),
            (self.name, info.name),
            (self.subresource, info.subresource),
        )
        if any(want is not None and want != have for want, have in checks):
            return False
        if self.method is not None and self.method.upper() != info.method:
            return False
        return self.path is None or re.search(self.path, info.path) is not None


@dataclass(eq=False)
class Rule:
    """One injected fault; ``remaining`` None means it fires until removed."""

    action: Action
    match: Match
    remaining: int | None = 1
    code: int = 0
    message: str | None = None
    reason: str | None = None
    retry_after: int | None = None
    seconds: float = 0.0
    after_bytes: int | None = None
    events: int = 0
    abort: bool = False
    hits: int = 0
    #: set by :meth:`release` (a ``hold`` rule's requests wait for it)
    released: threading.Event = field(default_factory=threading.Event)

    def release(self) -> None:
        """Let the requests a ``hold`` rule keeps (and any it meets later) go on."""
        self.released.set()

    def error(self) -> ApiError:
        """The error a ``fail`` rule answers with."""
        err = from_code(self.code, self.message, self.reason)
        if self.retry_after is not None:
            err.headers["Retry-After"] = str(self.retry_after)
            err.details["retryAfterSeconds"] = self.retry_after
        return err


@dataclass
class Decision:
    """What the matching rules do to one request."""

    delay: float = 0.0
    holds: list[Rule] = field(default_factory=list)
    fail: Rule | None = None
    drop: Rule | None = None
    limit_watch: Rule | None = None


@dataclass
class _Hooks:
    """Callbacks into the server (set by :class:`~.server.ApiServer`)."""

    end_watches: Callable[[Match, bool], int] = lambda match, abort: 0
    go_down: Callable[[UnreachableMode], None] = lambda mode: None
    come_back: Callable[[], None] = lambda: None


class Faults:
    """The fault-injection controls of one server (``ApiServer.faults``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[Rule] = []
        self.hooks = _Hooks()
        self.down: UnreachableMode | None = None

    def _add(self, rule: Rule) -> Rule:
        if rule.remaining is not None and rule.remaining < 1:
            raise ValueError(f"times must be at least 1 (or None for always), found {rule.remaining}")
        with self._lock:
            self._rules.append(rule)
        return rule

    def fail(
        self,
        code: int = 500,
        *,
        times: int | None = 1,
        message: str | None = None,
        reason: str | None = None,
        retry_after: int | None = None,
        **match: str,
    ) -> Rule:
        """Answer the next ``times`` matching requests with a ``Status`` error of ``code``."""
        if not 400 <= code <= 599:
            raise ValueError(f"code must be an HTTP error code (400-599), found {code}")
        return self._add(Rule("fail", Match(**match), times, code, message, reason, retry_after))

    def delay(self, seconds: float, *, times: int | None = None, **match: str) -> Rule:
        """Wait ``seconds`` before handling matching requests (rules add up)."""
        if seconds < 0:
            raise ValueError(f"seconds must be >= 0, found {seconds}")
        return self._add(Rule("delay", Match(**match), times, seconds=seconds))

    def hold(self, *, times: int | None = 1, **match: str) -> Rule:
        """Keep the next ``times`` matching requests waiting, unanswered, until ``rule.release()``
        (or :meth:`clear`): a test orders what a client does meanwhile without a clock."""
        return self._add(Rule("hold", Match(**match), times))

    def drop(self, *, times: int | None = 1, after_bytes: int | None = None, **match: str) -> Rule:
        """Cut the connection in the middle of the response (after the headers and
        ``after_bytes`` of the body; default: half of it). A watch is cut after its first write."""
        return self._add(Rule("drop", Match(**match), times, after_bytes=after_bytes))

    def limit_watches(self, events: int, *, times: int | None = None, abort: bool = False, **match: str) -> Rule:
        """End matching watches (opened from now on) after ``events`` events."""
        if events < 0:
            raise ValueError(f"events must be >= 0, found {events}")
        return self._add(Rule("limit_watch", Match(**match), times, events=events, abort=abort))

    def end_watches(self, *, abort: bool = False, **match: str) -> int:
        """End the matching watches open now (cleanly, or by cutting the connection when
        ``abort``); returns how many were ended."""
        return self.hooks.end_watches(Match(**match), abort)

    def unreachable(self, mode: UnreachableMode = "refuse") -> None:
        """Go away: ``refuse`` closes the listening socket and every connection (clients get
        connection refused); ``blackhole`` keeps accepting but answers nothing."""
        if mode not in ("refuse", "blackhole"):
            raise ValueError(f"mode must be 'refuse' or 'blackhole', found {mode!r}")
        self.hooks.go_down(mode)
        self.down = mode

    def reachable(self) -> None:
        """Come back on the same address, with the same objects."""
        self.hooks.come_back()
        self.down = None

    def remove(self, rule: Rule) -> None:
        """Remove one rule (no error if it already ran out)."""
        with self._lock:
            if rule in self._rules:
                self._rules.remove(rule)

    def clear(self) -> None:
        """Remove every rule (the server stays reachable or not as it is)."""
        with self._lock:
            for rule in self._rules:
                rule.release()
            self._rules.clear()

    @property
    def rules(self) -> list[Rule]:
        """The active rules, in the order they were added."""
        with self._lock:
            return list(self._rules)

    def decide(self, info: RequestInfo) -> Decision | None:
        """The faults for one request (None when no rule matches); spends the rules' counts."""
        if not self._rules:
            return None
        decision = Decision()
        fired = False
        with self._lock:
            for rule in list(self._rules):
                if not rule.match.matches(info):
                    continue
                if rule.action == "delay":
                    decision.delay += rule.seconds
                elif rule.action == "hold":
                    decision.holds.append(rule)
                elif rule.action == "fail" and decision.fail is None and decision.drop is None:
                    decision.fail = rule
                elif rule.action == "drop" and decision.fail is None and decision.drop is None:
                    decision.drop = rule
                elif rule.action == "limit_watch" and info.verb == "watch" and decision.limit_watch is None:
                    decision.limit_watch = rule
                else:
                    continue
                fired = True
                rule.hits += 1
                if rule.remaining is not None:
                    rule.remaining -= 1
                    if rule.remaining <= 0:
                        self._rules.remove(rule)
        return decision if fired else None


__all__ = ["Decision", "Faults", "Match", "Rule"]
