"""HTTP/1.1 heads and framing as the sidecar's endpoints read them: strict where a message could be read two ways."""

from __future__ import annotations

import pytest

from mkpolicy.sidecar.http1 import (
    CHUNKED_MORE,
    CHUNKED_NOT_PLAIN,
    LAST_CHUNK,
    ChunkedScanner,
    HttpError,
    chunk,
    dechunk,
    parse_request_head,
    parse_response_head,
    plain_chunked_end,
    response_head,
    without_hop_by_hop,
)


def req(*lines: str, start: str = "GET /api/v1/namespaces HTTP/1.1", host: bool = True) -> bytes:
    return ("\r\n".join([start, *(["Host: w"] if host else []), *lines]) + "\r\n\r\n").encode("latin-1")


def resp(*lines: str, start: str = "HTTP/1.1 200 OK") -> bytes:
    return ("\r\n".join([start, *lines]) + "\r\n\r\n").encode("latin-1")


def test_request_head_fields_and_framing() -> None:
    head = parse_request_head(
        req(
            "Authorization: Bearer t", "Accept: a", "accept: b", "Content-Length: 12", "Connection: close", host=False
        ).replace(b"HTTP/1.1\r\n", b"HTTP/1.1\r\nHost: x\r\n")
    )
    assert (head.method, head.target, head.path, head.query) == ("GET", "/api/v1/namespaces", "/api/v1/namespaces", "")
    assert head.headers[0] == ("Host", "x") and head.fields["accept"] == "a, b"
    assert (head.framing, head.length, head.close) == ("length", 12, True)
    assert parse_request_head(req("Transfer-Encoding: chunked")).framing == "chunked"
    assert parse_request_head(req("Content-Length: 0")).framing == "none"
    assert parse_request_head(req()).fields == {"host": "w"}
    q = parse_request_head(req(start="GET /api/v1/pods?watch=1&x=%20 HTTP/1.1"))
    assert (q.path, q.query) == ("/api/v1/pods", "watch=1&x=%20")
    # absolute-form is reduced to the path
    assert parse_request_head(req(start="GET https://w:6443/api?x=1 HTTP/1.1")).target == "/api?x=1"
    # values keep inner whitespace, lose the surrounding
    assert parse_request_head(req("X:  a b \t")).fields["x"] == "a b"


@pytest.mark.parametrize(
    ("raw", "code", "message"),
    [
        (req("Host : x"), 400, "malformed message head"),  # whitespace before the colon
        (req("X: x", " folded"), 400, "malformed message head"),  # obsolete line folding
        (req("Bad\nHeader: x"), 400, "malformed message head"),  # bare LF
        (b"GET / HTTP/1.1\nHost: x\n\n", 400, "malformed message head"),  # bare LF line ends
        (req("X: a\rb"), 400, "malformed message head"),  # bare CR
        (req("X: a\0b"), 400, "malformed message head"),
        (req("X: a\x01b"), 400, "malformed message head"),  # control characters in values
        (req("Content-Length: 1", "Transfer-Encoding: chunked"), 400, "malformed message head"),
        (req("Content-Length: 1", "Content-Length: 2"), 400, "malformed message head"),
        (req("Content-Length: 1", "Content-Length: 1"), 400, "malformed message head"),
        (req("Content-Length: 7, 7"), 400, "malformed message head"),  # Go refuses it too
        (req("Content-Length: -1"), 400, "malformed message head"),
        (req("Content-Length: 0x10"), 400, "malformed message head"),
        (req("Content-Length: \xa05"), 400, "malformed message head"),
        (req("Transfer-Encoding: \x0bchunked"), 400, "malformed message head"),
        (req("Transfer-Encoding: gzip, chunked"), 501, "unsupported Transfer-Encoding 'gzip, chunked'"),
        (req("Transfer-Encoding: chunked, chunked"), 400, "Invalid `Transfer-Encoding`"),
        (req(start="GET / HTTP/1.0"), 505, "HTTP/1.0 is not supported"),
        (req(start="GET / HTTP/1.1 extra"), 400, "malformed message head"),
        (req(start="GET /a b HTTP/1.1"), 400, "malformed message head"),
        (req(start="GET /a\x7f HTTP/1.1"), 400, "malformed message head"),
        (req(start="GET\t/ HTTP/1.1"), 400, "malformed message head"),
        (req(start="get / HTTP/1.1"), 400, "malformed message head"),  # methods are case-sensitive
        (req(start="PROPFIND / HTTP/1.1"), 405, "method PROPFIND is not relayed"),
        (req(start="OPTIONS * HTTP/1.1"), 400, "unsupported request target '*'"),
        (req(start="G(T / HTTP/1.1"), 400, "malformed message head"),
        (req(host=False), 400, "expected one Host field; found 0"),
        (req("Host: y"), 400, "expected one Host field; found 2"),
        (req("X: a", "HOST: y", "x: b", "host: z"), 400, "expected one Host field; found 3"),
        (req("Connection: Content-Length", "Content-Length: 5"), 400, "the Connection field names content-length"),
        (req("Connection: close, host"), 400, "the Connection field names host"),
        (req(start="GET /api/v1/namespaces%2Fa HTTP/1.1"), 400, "an encoded '/' (%2F)"),
        (req(start="GET /api/v1//namespaces HTTP/1.1"), 400, "an empty path segment"),
        (req(start="GET /api/v1/namespaces/ HTTP/1.1"), 400, "an empty path segment"),
        (req(start="GET /api/v1/namespaces/../pods HTTP/1.1"), 400, "a '.' or '..' path segment"),
        (req(start="GET /api/v1/namespaces/%2e%2e/pods HTTP/1.1"), 400, "a '.' or '..' path segment"),
        (req(start="GET /api/v1/namespaces%zz HTTP/1.1"), 400, "invalid URL escape '%zz'"),
        (req(*[f"X-{i}: {i}" for i in range(200)]), 431, "more than 128 header fields"),
        (b"GET / HTTP/1.1\r\nHost: x\r\n", 400, "incomplete message head"),  # incomplete
    ],
)
def test_request_heads_that_could_be_read_two_ways_are_refused(raw: bytes, code: int, message: str) -> None:
    with pytest.raises(HttpError) as info:
        parse_request_head(raw)
    assert info.value.code == code
    assert message in info.value.message, info.value.message


def test_response_head_framing() -> None:
    ok = parse_response_head(resp("Content-Type: application/json", "Content-Length: 5"), "GET")
    assert (ok.status, ok.reason, ok.framing, ok.length, ok.close, ok.hop) == (200, "OK", "length", 5, False, False)
    assert ok.raw == resp("Content-Type: application/json", "Content-Length: 5")
    assert parse_response_head(resp("Content-Length: 5"), "HEAD").framing == "none"
    assert parse_response_head(resp(start="HTTP/1.1 204 No Content"), "DELETE").framing == "none"
    assert parse_response_head(resp("Content-Length: 5", start="HTTP/1.1 304 Not Modified"), "GET").framing == "none"
    assert parse_response_head(resp(start="HTTP/1.1 103 Early Hints"), "GET").framing == "none"
    chunked = parse_response_head(resp("Transfer-Encoding: chunked"), "GET")
    assert (chunked.framing, chunked.close) == ("chunked", False)
    assert parse_response_head(resp("Transfer-Encoding: gzip"), "GET").framing == "close"
    until_close = parse_response_head(resp("Content-Type: text/plain"), "GET")
    assert (until_close.framing, until_close.close) == ("close", True)
    assert parse_response_head(resp("Content-Length: 0"), "GET").framing == "none"
    # connection management
    assert parse_response_head(resp("Content-Length: 1", "Connection: close"), "GET").close
    assert parse_response_head(resp("Content-Length: 1", start="HTTP/1.0 200 OK"), "GET").close
    kept = parse_response_head(resp("Content-Length: 1", "Connection: keep-alive", start="HTTP/1.0 200 OK"), "GET")
    assert not kept.close and kept.hop
    assert parse_response_head(resp("Content-Length: 1", start="HTTP/1.1 200"), "GET").reason == ""
    # a repeated field: every line kept as sent, the values joined in order under the lower-cased name
    repeated = parse_response_head(resp("Warning: a", "Content-Length: 1", "warning: b", "WARNING: c"), "GET")
    assert repeated.headers == [("Warning", "a"), ("Content-Length", "1"), ("warning", "b"), ("WARNING", "c")]
    assert repeated.fields == {"warning": "a, b, c", "content-length": "1"}
    assert parse_response_head(resp("Content-Length: 1", start="HTTP/1.1 299 Odd One"), "GET").reason == "Odd One"


@pytest.mark.parametrize(
    "raw",
    [
        resp(start="HTTP/1.1 20 OK"),
        resp(start="HTTP/2 200 OK"),
        resp(start="ICY 200 OK"),
        resp("Bad Header: x"),
        resp("Content-Length: 1", "Transfer-Encoding: chunked"),
        resp("Content-Length: x"),
        resp("X: a\nb"),
    ],
)
def test_invalid_response_heads_are_502(raw: bytes) -> None:
    with pytest.raises(HttpError) as info:
        parse_response_head(raw, "GET")
    assert info.value.code == 502


def test_hop_by_hop_fields_are_dropped_with_those_connection_names() -> None:
    head = parse_response_head(
        resp("Connection: X-Private, close", "X-Private: 1", "Keep-Alive: timeout=5", "TE: trailers", "Audit-Id: a"),
        "GET",
    )
    assert head.hop
    assert without_hop_by_hop(head.headers, head.fields) == [("Audit-Id", "a")]


def test_response_head_builder() -> None:
    assert response_head(404, [("A", "b")]) == b"HTTP/1.1 404 Not Found\r\nA: b\r\n\r\n"
    assert response_head(299, [], "Odd") == b"HTTP/1.1 299 Odd\r\n\r\n"
    assert response_head(299, []) == b"HTTP/1.1 299 \r\n\r\n"


BODY = b"4;ext=1\r\nWiki\r\n6\r\npedia \r\nE\r\nin \r\n\r\nchunks.\r\n0\r\nExpires: never\r\n\r\n"


def test_chunked_scanner_finds_the_end_however_the_bytes_are_split() -> None:
    tail = b"HTTP/1.1 200 OK\r\n"
    for size in (1, 2, 3, 5, 7, len(BODY) + len(tail)):
        scanner, payload, used = ChunkedScanner(), [], 0
        data = BODY + tail
        for i in range(0, len(data), size):
            piece = data[i : i + size]
            n = scanner.feed(piece, payload)
            used += n
            if scanner.done:
                break
            assert n == len(piece)
        assert scanner.done and used == len(BODY), size
        assert b"".join(payload) == b"Wikipedia in \r\n\r\nchunks."
    assert dechunk(BODY) == b"Wikipedia in \r\n\r\nchunks."
    assert dechunk(chunk(b"abc") + chunk(b"\n") + b"0\r\n\r\n") == b"abc\n"


def test_chunked_scanner_boundaries() -> None:
    scanner = ChunkedScanner()
    assert scanner.at_boundary
    scanner.feed(b"5\r\nab")
    assert not scanner.at_boundary
    scanner.feed(b"cde\r")
    assert not scanner.at_boundary
    scanner.feed(b"\n")
    assert scanner.at_boundary
    scanner.feed(b"1")
    assert not scanner.at_boundary


@pytest.mark.parametrize(
    "raw",
    [
        b"0x5\r\nhello\r\n0\r\n\r\n",
        b"+5\r\nhello\r\n0\r\n\r\n",
        b"5_0\r\nhello\r\n0\r\n\r\n",
        b"\r\n",
        b"5\r\nhelloX\r\n0\r\n\r\n",
        b"5\nhello\r\n0\r\n\r\n",
        b"11111111111111111\r\n",
        b"0\r\nbad trailer\r\n\r\n",
    ],
)
def test_broken_chunked_bodies(raw: bytes) -> None:
    with pytest.raises(HttpError):
        dechunk(raw)


def test_incomplete_chunked_body() -> None:
    with pytest.raises(HttpError):
        dechunk(b"5\r\nhel")
    with pytest.raises(HttpError):
        ChunkedScanner().feed(b"1" * 70_000)
    with pytest.raises(HttpError):  # whitespace in a chunk size
        dechunk(b"5 \r\nhello\r\n0\r\n\r\n")


#: Plain chunked bodies (as Go's net/http writes them): read without llhttp, ended where llhttp ends them.
PLAIN = [
    b"0\r\n\r\n",
    chunk(b"x" * 2600) + LAST_CHUNK,
    chunk(b"{") + chunk(b"\r\n\r\n") + chunk(b"}" * 17) + LAST_CHUNK,
    b"00A\r\n0123456789\r\n000\r\n\r\n",  # leading zeros, upper-case digits
]


@pytest.mark.parametrize("body", PLAIN)
def test_plain_chunked_bodies_end_where_llhttp_ends_them(body: bytes) -> None:
    scanner, payload = ChunkedScanner(), []
    assert scanner.feed(body + b"HTTP/1.1 200 OK\r\n", payload) == len(body)
    out: list[bytes] = []
    head = b"HTTP/1.1 200 OK\r\n\r\n"
    assert plain_chunked_end(head + body + b"next", len(head), 1 << 20, out) == len(head) + len(body)
    assert b"".join(out) == b"".join(payload)
    for cut in range(len(body)):  # every beginning waits for more
        assert plain_chunked_end(bytearray(head + body[:cut]), len(head), 1 << 20) == CHUNKED_MORE, cut


@pytest.mark.parametrize(
    "body",
    [
        b"4;ext=1\r\nWiki\r\n0\r\n\r\n",  # an extension
        b"0\r\nExpires: never\r\n\r\n",  # trailer fields
        b"5 \r\nhello\r\n0\r\n\r\n",  # whitespace
        b"0x5\r\nhello\r\n0\r\n\r\n",
        b"+5\r\nhello\r\n0\r\n\r\n",
        b"5_0\r\n",
        b"\r\n",
        b"5\r\nhelloX\r\n0\r\n\r\n",  # data longer than its size
        b"5\nhello\r\n0\r\n\r\n",
        b"111111111\r\n",  # more than 8 digits
        b"zz",  # refused before its line ends
        b"123456789",
        chunk(b"x" * 100) + LAST_CHUNK,  # over the limit (100 here)
    ],
)
def test_other_chunked_bodies_are_left_to_llhttp(body: bytes) -> None:
    assert plain_chunked_end(body, 0, 100) == CHUNKED_NOT_PLAIN


def test_a_chunked_request_body_read_whole() -> None:
    """Decoded as its pieces arrive, the pipelined request after it left in the buffer, its size bounded."""
    import asyncio

    from mkpolicy.sidecar.config import Limits
    from mkpolicy.sidecar.conn import Connection
    from mkpolicy.sidecar.listener import Exchange
    from mkpolicy.sidecar.status import StatusError

    post = req("Transfer-Encoding: chunked", start="POST /api/v1/namespaces/x/configmaps HTTP/1.1")
    pipelined = req()

    async def read(body: bytes, limit: int, max_body_bytes: int = 1 << 20, piece: int = 7) -> tuple[bytes, bytes]:
        conn = Connection()
        conn.limits = Limits(max_body_bytes=max_body_bytes)  # type: ignore[attr-defined]
        exchange = Exchange(conn, parse_request_head(post))  # type: ignore[arg-type]

        async def arrive() -> None:
            data = body + pipelined
            for i in range(0, len(data), piece):
                conn.data_received(data[i : i + piece])
                await asyncio.sleep(0)

        sender = asyncio.create_task(arrive())
        try:
            payload = await exchange.read_body(limit)
        finally:
            await sender
        return payload, bytes(conn.buffer)

    async def scenario() -> None:
        for piece in (1, 7, 10_000):
            assert await read(BODY, 100, piece=piece) == (b"Wikipedia in \r\n\r\nchunks.", pipelined), piece
        body = chunk(b"x" * 1500) + chunk(b"y" * 1000) + LAST_CHUNK
        assert await read(body, 2500, 2500, piece=1000) == (b"x" * 1500 + b"y" * 1000, pipelined)
        for limit, max_body_bytes in ((2499, 1 << 20), (1 << 20, 2499)):
            with pytest.raises(StatusError) as info:
                await read(body, limit, max_body_bytes, piece=1000)
            assert (info.value.code, info.value.message) == (
                413,
                "mkpolicy sidecar: the request body exceeds 2499 bytes",
            )

    asyncio.run(scenario())
