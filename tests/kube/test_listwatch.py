"""The list-and-watch loop under the controller's informers and the sidecar's manager cache: pages
are followed to the list's resourceVersion; after 410 Gone the loop relists at once, after another
error it backs off (longer each time, reset by a list that succeeds); cancelling it stops it."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from mkpolicy.kube import listwatch
from mkpolicy.kube.client import ApiError, Gone
from mkpolicy.kube.listwatch import keep_listing_and_watching, key_of, list_paged


class _Pages:
    """A client answering LIST in the pages given, recording the parameters of each request."""

    def __init__(self, pages: list[dict[str, Any]]) -> None:
        self.pages = pages
        self.asked: list[dict[str, str]] = []

    async def get(self, path: str, params: dict[str, str]) -> dict[str, Any]:
        self.asked.append(dict(params))
        return self.pages[len(self.asked) - 1]


def test_a_list_follows_its_continue_tokens_and_gives_the_last_pages_resource_version() -> None:
    def item(name: str) -> dict[str, Any]:
        return {"metadata": {"namespace": "ns", "name": name}}

    client: Any = _Pages([
        {"items": [item("a"), "not an object"], "metadata": {"continue": "t1", "resourceVersion": "5"}},
        {"items": [item("b")], "metadata": {"resourceVersion": "9"}},
    ])  # fmt: skip
    seen: list[tuple[str, str]] = []
    version = asyncio.run(list_paged(client, "/apis/x/v1/things", lambda obj: seen.append(key_of(obj))))
    assert (version, seen) == ("9", [("ns", "a"), ("ns", "b")])
    limit = str(listwatch.PAGE)
    assert client.asked == [{"limit": limit}, {"limit": limit, "continue": "t1"}]


_GONE = Gone(410, "Expired", "too old")
_ERROR = ApiError(500, "InternalError", "boom")

# The calls the loop makes, each with what it raises (None: it returns), and the sleeps between them.
CASES = {
    "410 relists at once": ([("list", None), ("watch", _GONE), ("list", None)], []),
    "a watch that ends resumes without a list": ([("list", None), ("watch", None), ("watch", None)], []),
    "errors back off, longer each time": (
        [("list", None), ("watch", _ERROR), ("list", OSError("reset")), ("list", _ERROR), ("list", None)],
        list(listwatch.BACKOFF[:3]),
    ),
    "a list that succeeds resets the backoff": (
        [("list", _ERROR), ("list", None), ("watch", _ERROR), ("list", None)],
        [listwatch.BACKOFF[0], listwatch.BACKOFF[0]],
    ),
}


@pytest.mark.parametrize("script, sleeps", CASES.values(), ids=CASES.keys())
def test_the_loop_relists_backs_off_and_resumes(
    script: list[tuple[str, Exception | None]], sleeps: list[float], monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    made: list[str] = []
    slept: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(delay: float) -> None:
        slept.append(delay)
        await real_sleep(0)

    monkeypatch.setattr(asyncio, "sleep", sleep)

    async def call(name: str) -> None:
        made.append(name)
        if len(made) > len(script):
            raise asyncio.CancelledError  # the script is done: the loop must let this through
        expected, raised = script[len(made) - 1]
        assert name == expected, f"call {len(made)}: expected {expected}, the loop made {name}"
        if raised is not None:
            raise raised

    async def relist() -> None:
        await call("list")

    async def watch() -> None:
        await call("watch")

    with caplog.at_level(logging.INFO), pytest.raises(asyncio.CancelledError):
        asyncio.run(keep_listing_and_watching(relist, watch, log=logging.getLogger("t"), what="test", policy="p"))
    assert slept == sleeps
    raised = [e for _, e in script if e is not None]
    logged = [r for r in caplog.records if r.name == "t"]
    assert [r.getMessage() for r in logged] == [
        "test watch expired; relisting" if isinstance(e, Gone) else "test watch failed; retrying" for e in raised
    ]
    assert all(r.fields["policy"] == "p" for r in logged)  # type: ignore[attr-defined]
