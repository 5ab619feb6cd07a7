"""Fault injection: errors, latency, cut connections, ended watches, unreachable servers."""

from __future__ import annotations

import json
import re
import threading
import time

import pytest
import urllib3
from kubernetes.client import ApiException

from mkpolicy.testing.apiserver import ApiServer
from mkpolicy.testing.apiserver.faults import Rule

from .conftest import Clients, Raw

pytestmark = pytest.mark.loopback_only("fault injection")

CM = "/api/v1/namespaces/default/configmaps"


def cm(name: str) -> dict:
    return {"metadata": {"name": name}}


def test_fail_next_n_matching_requests(apiserver: ApiServer, k8s: Clients) -> None:
    rule = apiserver.faults.fail(500, times=2, verb="create", resource="configmaps")
    for name in ("a", "b"):
        with pytest.raises(ApiException) as exc:
            k8s.core.create_namespaced_config_map("default", cm(name))
        assert exc.value.status == 500
        assert json.loads(exc.value.body)["reason"] == "InternalError"
    assert k8s.core.list_namespaced_config_map("default").items == []  # other verbs pass
    k8s.core.create_namespaced_config_map("default", cm("c"))
    assert rule.hits == 2 and apiserver.faults.rules == []


@pytest.mark.parametrize(
    ("code", "reason"),
    [(400, "BadRequest"), (404, "NotFound"), (409, "Conflict"), (410, "Expired"), (422, "Invalid"),
     (500, "InternalError"), (503, "ServiceUnavailable"), (504, "Timeout")],
)  # fmt: skip
def test_fail_with_any_code(apiserver: ApiServer, raw: Raw, code: int, reason: str) -> None:
    apiserver.faults.fail(code, verb="list")
    reply = raw.request("GET", CM)
    assert reply.status == code
    assert reply.json["reason"] == reason and reply.json["code"] == code
    assert raw.request("GET", CM).status == 200


def test_429_carries_retry_after(apiserver: ApiServer, raw: Raw) -> None:
    apiserver.faults.fail(429, retry_after=3, times=None, namespace="default")
    reply = raw.request("GET", CM)
    assert reply.status == 429 and reply.headers["Retry-After"] == "3"
    assert reply.json["details"] == {"retryAfterSeconds": 3}
    assert raw.request("GET", "/api/v1/namespaces").status == 200  # another namespace/scope is untouched
    apiserver.faults.clear()
    assert raw.request("GET", CM).status == 200


def test_custom_message_and_path_match(apiserver: ApiServer, raw: Raw) -> None:
    apiserver.faults.fail(409, message="injected conflict", reason="Conflict", path=r"/configmaps/x$")
    raw.request("POST", CM, cm("x"))
    reply = raw.request("GET", CM + "/x")
    assert (reply.status, reply.json["message"]) == (409, "injected conflict")


def test_delay_adds_latency(apiserver: ApiServer, raw: Raw) -> None:
    rule = apiserver.faults.delay(0.3, verb="list")
    start = time.monotonic()
    assert raw.request("GET", CM).status == 200
    assert time.monotonic() - start >= 0.3
    assert rule.hits == 1
    # Other requests are not delayed: the rule does not fire on them (no clock: the machine may be busy).
    assert raw.request("GET", "/api").status == 200
    assert rule.hits == 1


def _held_list(apiserver: ApiServer, raw: Raw, times: int | None) -> tuple[Rule, threading.Thread, list[int]]:
    """A LIST sent from a thread and held at the server (its status appended to the list once answered)."""
    rule = apiserver.faults.hold(verb="list", times=times)
    answered: list[int] = []
    listing = threading.Thread(target=lambda: answered.append(raw.request("GET", CM).status))
    listing.start()
    deadline = time.monotonic() + 10  # (a bound, not a measure: the hold is seen at once on a quiet machine)
    while rule.hits == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert rule.hits == 1
    return rule, listing, answered


def test_hold_keeps_a_request_unanswered_until_released(apiserver: ApiServer, raw: Raw) -> None:
    rule, listing, answered = _held_list(apiserver, raw, 1)
    assert raw.request("GET", "/api").status == 200  # others go on meanwhile
    assert answered == [] and listing.is_alive()
    rule.release()
    listing.join(10)
    assert answered == [200]
    assert apiserver.faults.rules == []  # spent (times=1)


def test_clear_releases_held_requests(apiserver: ApiServer, raw: Raw) -> None:
    _, listing, answered = _held_list(apiserver, raw, None)
    apiserver.faults.clear()
    listing.join(10)
    assert answered == [200]
    assert raw.request("GET", CM).status == 200  # the rule is gone


def test_drop_cuts_the_response_mid_body(apiserver: ApiServer, raw: Raw) -> None:
    raw.request("POST", CM, cm("a"))
    apiserver.faults.drop(verb="get", name="a")
    with pytest.raises(urllib3.exceptions.ProtocolError):
        raw.request("GET", CM + "/a")
    assert raw.request("GET", CM + "/a").json["metadata"]["name"] == "a"


def read_stream(raw: Raw, path: str) -> tuple[list[str], Exception | None]:
    resp = raw.pool.request(
        "GET", raw.server.url + path, headers={"Authorization": f"Bearer {raw.server.token}"}, preload_content=False
    )
    lines: list[str] = []
    try:
        for chunk in resp.stream(1024):
            lines.extend(json.loads(line)["type"] for line in chunk.decode().splitlines())
    except Exception as exc:  # the connection was cut
        return lines, exc
    finally:
        resp.release_conn()
    return lines, None


def test_limit_watches_ends_them_cleanly_after_n_events(apiserver: ApiServer, raw: Raw) -> None:
    for name in "abc":
        raw.request("POST", CM, cm(name))
    apiserver.faults.limit_watches(2, resource="configmaps")
    start = time.monotonic()
    types, error = read_stream(raw, CM + "?watch=1")
    assert (types, error) == (["ADDED", "ADDED"], None)
    assert time.monotonic() - start < 20  # ended by the rule, not by a timeout (generous: a busy machine)


def test_limit_watches_with_abort_cuts_the_connection(apiserver: ApiServer, raw: Raw) -> None:
    raw.request("POST", CM, cm("a"))
    apiserver.faults.limit_watches(1, abort=True)
    types, error = read_stream(raw, CM + "?watch=1")
    assert types == ["ADDED"] and error is not None


def test_end_watches_now(apiserver: ApiServer, raw: Raw) -> None:
    import threading

    result: list = []
    t = threading.Thread(target=lambda: result.append(read_stream(raw, CM + "?watch=1")))
    t.start()
    apiserver.wait_for_watches(1)
    assert apiserver.faults.end_watches(resource="secrets") == 0
    assert apiserver.faults.end_watches(resource="configmaps") == 1
    t.join(5)
    assert result == [([], None)]
    assert apiserver.watch_count() == 0


def test_unreachable_then_back_with_the_same_data(apiserver: ApiServer, raw: Raw) -> None:
    raw.request("POST", CM, cm("kept"))
    port = apiserver.port
    apiserver.faults.unreachable()
    with pytest.raises(urllib3.exceptions.NewConnectionError):
        raw.request("GET", CM)
    apiserver.faults.reachable()
    assert apiserver.port == port
    assert [i["metadata"]["name"] for i in raw.request("GET", CM).json["items"]] == ["kept"]


def test_unreachable_cuts_open_watches(apiserver: ApiServer, raw: Raw) -> None:
    import threading

    result: list = []
    t = threading.Thread(target=lambda: result.append(read_stream(raw, CM + "?watch=1")))
    t.start()
    apiserver.wait_for_watches(1)
    apiserver.faults.unreachable()
    t.join(5)
    assert result and result[0][1] is not None
    apiserver.faults.reachable()


def test_blackhole_accepts_but_never_answers(apiserver: ApiServer, raw: Raw) -> None:
    apiserver.faults.unreachable(mode="blackhole")
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        raw.request("GET", CM, timeout=0.3)
    apiserver.faults.reachable()
    assert raw.request("GET", CM).status == 200


def test_python_client_sees_the_outage(apiserver: ApiServer, k8s: Clients) -> None:
    k8s.api.configuration.retries = False
    apiserver.faults.unreachable()
    with pytest.raises(urllib3.exceptions.HTTPError):
        k8s.core.list_namespaced_config_map("default", _request_timeout=2)
    apiserver.faults.reachable()
    assert k8s.core.list_namespaced_config_map("default").items == []


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda f: f.fail(200), ValueError, "code must be an HTTP error code (400-599), found 200"),
        (lambda f: f.fail(500, times=0), ValueError, "times must be at least 1 (or None for always), found 0"),
        (lambda f: f.delay(-1), ValueError, "seconds must be >= 0, found -1"),
        (lambda f: f.limit_watches(-1), ValueError, "events must be >= 0, found -1"),
        (lambda f: f.unreachable(mode="sideways"), ValueError, "mode must be 'refuse' or 'blackhole', found 'sideways'"),
        (lambda f: f.fail(500, colour="red"), TypeError, "Match.__init__() got an unexpected keyword argument 'colour'"),
    ],
    ids=["not-an-error-code", "zero-times", "negative-delay", "negative-events", "bad-mode", "unknown-criterion"],
)  # fmt: skip
def test_fault_arguments_are_checked(
    apiserver: ApiServer, raw: Raw, call, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        call(apiserver.faults)
    # A refused call changes nothing: no rule added, the server still up and answering.
    assert apiserver.faults.rules == []
    assert apiserver.faults.down is None
    assert raw.request("GET", CM).status == 200
