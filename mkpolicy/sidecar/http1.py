"""HTTP/1.1 messages on the wire (RFC 9112), read by llhttp (Node.js's parser, through ``httptools``).

The sidecar relays bodies and answers as the bytes that came, so it needs more than a
parser that hands over decoded messages: it must know exactly where each message ends.
llhttp, in its strict mode (no leniency flag set), decides everything about the syntax:
request and status lines, field names and values (no obsolete folding, no whitespace
before a colon, no control characters, CRLF only), ``Content-Length`` (digits only, no
duplicates), ``Transfer-Encoding`` with ``Content-Length`` (refused), chunk sizes and
extensions, trailers. This module adds what a proxy decides itself (RFC 9110/9112):

* one ``Host`` (a request without or with two is a 400), methods the sidecar relays,
  HTTP/1.1 only (505 otherwise), ``Transfer-Encoding: chunked`` alone on requests (501);
* a ``Connection`` field that names a framing or routing field is a 400: a proxy drops
  what ``Connection`` names, and dropping ``Content-Length`` would turn the body into a
  second request on the sidecar's credentialed connection (request smuggling);
* the request target decoded once, as kube-apiserver decodes it
  (:mod:`mkpolicy.kube.target`): a target the server would split differently than a
  component reading the raw path (an encoded ``/``, dot or empty segments) is a 400;
* identity fields (``Impersonate-*``, ``X-Remote-*``) are refused (403): the worker would
  honour them with the sidecar's credentials;
* limits: head size and field count (431), each checked as the bytes arrive.

Heads are parsed incrementally (:class:`HeadReader`), so a malformed head is refused at
its first bad byte instead of waiting for an empty line that never comes. Chunked
bodies go through llhttp as well (:class:`ChunkedScanner`); it is fed up to each place a
chunked body can end, so the end is known to the byte and a pipelined request or a
worker's stray bytes after it are never taken for part of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from http import HTTPStatus
from typing import Literal

import httptools

from mkpolicy.kube.target import RequestTarget, TargetError, parse_target

#: Largest request or response head accepted by default (bytes).
MAX_HEAD = 1024 * 1024
#: Most header fields in a head by default.
MAX_FIELDS = 128

Framing = Literal["none", "length", "chunked", "close"]

#: Hop-by-hop headers (RFC 9110 §7.6.1) that a proxy never forwards as they are.
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "te", "upgrade", "proxy-authenticate"})
#: Fields a request's ``Connection`` may not name: dropping them would change how the
#: message is framed or routed (RFC 9110 §7.6.1: a sender must not list them).
PROTECTED = frozenset(
    # accept: the sidecar decides on it (a metadata-only read passes, a full one is transformed)
    {"content-length", "transfer-encoding", "host", "authorization", "trailer", "content-type", "accept"}
)
#: Fields an answer's ``Connection`` may not name: dropping them would unframe it.
FRAMING = frozenset({"content-length", "transfer-encoding", "trailer"})
#: Prefixes of identity fields kube-apiserver honours from a client it trusts: impersonation
#: (apiserver/pkg/endpoints/filters/impersonation.go: Impersonate-User, -Group, -Uid,
#: -Extra-*) and the front-proxy's request headers (apiserver/pkg/authentication/request/
#: headerrequest: X-Remote-User, -Group, -Uid, -Extra-* by default). The worker would
#: apply them with the sidecar's credentials: a request carrying one is refused (403).
IDENTITY_PREFIXES = ("impersonate-", "x-remote-")
#: Methods the sidecar relays (a Kubernetes API server answers no others).
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class HttpError(Exception):
    """A message that cannot be read as HTTP/1.1 (``code`` is what to answer a client with)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(slots=True)
class RequestHead:
    """A parsed request line and header section."""

    method: str
    #: The request target as sent (origin-form; absolute-form is reduced to it).
    target: str
    headers: list[tuple[str, str]]
    #: Lower-cased name -> value (repeated fields joined with ", ").
    fields: dict[str, str]
    #: The body's framing: none, length or chunked (a request body is never close-delimited).
    framing: Framing
    length: int
    #: The client asked to close the connection after this exchange.
    close: bool
    #: The target decoded as kube-apiserver decodes it.
    decoded: RequestTarget

    @property
    def path(self) -> str:
        """The target's path, still percent-encoded."""
        return self.target.partition("?")[0]

    @property
    def query(self) -> str:
        """The target's query string (without ``?``)."""
        return self.target.partition("?")[2]


@dataclass(slots=True)
class ResponseHead:
    """A parsed status line and header section, with the bytes they came as."""

    status: int
    reason: str
    headers: list[tuple[str, str]]
    fields: dict[str, str]
    framing: Framing
    length: int
    #: The server will close the connection after this response.
    close: bool
    #: The head as received (status line to the empty line included).
    raw: bytes
    #: Hop-by-hop fields are present (they must not be relayed as they are).
    hop: bool


class _Head:
    """llhttp's callbacks for one message head."""

    __slots__ = ("complete", "headers", "max_fields", "reason", "url")

    def __init__(self, max_fields: int) -> None:
        self.url = b""
        self.reason = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.complete = False
        self.max_fields = max_fields

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_status(self, reason: bytes) -> None:
        self.reason += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(self.headers) >= self.max_fields:
            raise HttpError(431, f"more than {self.max_fields} header fields")
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self.complete = True


def _fields(raw: list[tuple[bytes, bytes]]) -> tuple[list[tuple[str, str]], dict[str, str], bool]:
    """Headers as text; lower-cased name -> value (repeated fields joined with ", ", in linear time); whether
    a name is repeated."""
    headers = [(name.decode("latin-1"), value.decode("latin-1").strip(" \t")) for name, value in raw]
    fields = {name.lower(): value for name, value in headers}
    repeated = len(fields) < len(headers)
    if repeated:  # (rare: the common case above is one pass)
        values: dict[str, list[str]] = {}
        for name, value in headers:
            values.setdefault(name.lower(), []).append(value)
        fields = {name: ", ".join(v) for name, v in values.items()}
    return headers, fields, repeated


def _tokens(value: str) -> set[str]:
    return {t.strip().lower() for t in value.split(",") if t.strip()}


def _feed(parser: httptools.HttpRequestParser | httptools.HttpResponseParser, data: bytes, code: int) -> bool:
    """Feed ``data``; True when an upgrade stopped the parser. HttpError ``code`` when llhttp refuses it."""
    try:
        parser.feed_data(data)
    except httptools.HttpParserUpgrade:
        return True
    except httptools.HttpParserCallbackError as exc:
        cause = exc.__context__
        if isinstance(cause, HttpError):
            raise cause from None
        raise HttpError(code, f"malformed message head: {exc}") from None
    except httptools.HttpParserError as exc:
        raise HttpError(code, f"malformed message head: {exc}") from None
    return False


class HeadReader:
    """Reads one request head as its bytes arrive (llhttp, strict), refusing it at the first bad byte.

    Call :meth:`scan` with the connection's buffer whenever bytes arrive; it returns the
    head's length once the empty line is there (then :meth:`head` is the parsed head).
    """

    __slots__ = ("_collector", "_parser", "_scanned", "max_fields", "max_head")

    def __init__(self, max_head: int = MAX_HEAD, max_fields: int = MAX_FIELDS) -> None:
        self.max_head = max_head
        self.max_fields = max_fields
        self._collector = _Head(max_fields)
        self._parser = httptools.HttpRequestParser(self._collector)
        self._scanned = 0

    @property
    def started(self) -> bool:
        """Some bytes of the head have been read."""
        return self._scanned > 0

    def scan(self, buffer: bytes | bytearray) -> int | None:
        """The head's length when ``buffer`` holds all of it, else None. HttpError when it is malformed or too large."""
        start = self._scanned
        if start == 0 and buffer[:1] in (b"\r", b"\n"):
            raise HttpError(400, "malformed request: an empty line before the request line")
        end = buffer.find(b"\r\n\r\n", max(0, start - 3))
        stop = len(buffer) if end < 0 else end + 4
        if stop > self.max_head:
            raise HttpError(431, f"request head larger than {self.max_head} bytes")
        if stop > start:
            _feed(self._parser, bytes(buffer[start:stop]), 400)
            self._scanned = stop
        if end < 0:
            return None
        if not self._collector.complete:
            raise HttpError(400, "malformed request head")
        return stop

    def head(self) -> RequestHead:
        """The head :meth:`scan` found complete, checked for what a proxy decides itself."""
        parser, collector = self._parser, self._collector
        version = parser.get_http_version()
        if version != "1.1":
            raise HttpError(505, f"HTTP/{version} is not supported; use HTTP/1.1")
        method = parser.get_method().decode("ascii")
        if method not in METHODS:
            raise HttpError(405, f"method {method} is not relayed (expected one of {', '.join(sorted(METHODS))})")
        target = collector.url.decode("latin-1")
        if not target.startswith("/"):
            scheme, sep, rest = target.partition("://")
            if sep and scheme.lower() in ("http", "https"):  # absolute-form: keep the path
                # the authority ends at the first '/', '?' or '#' (RFC 3986 3.2): a '/' in the query is not the path
                end = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
                target = rest[end:] if rest[end : end + 1] == "/" else "/" + rest[end:]
            else:
                raise HttpError(400, f"unsupported request target {target[:100]!r}")
        try:
            decoded = parse_target(target)
        except TargetError as exc:
            raise HttpError(400, f"bad request target: {exc}") from None
        if decoded.ambiguous:
            raise HttpError(
                400, f"the request path holds {decoded.ambiguous}; send the canonical path (segments separated by '/')"
            )
        headers, fields, repeated = _fields(collector.headers)
        identity = sorted(name for name in fields if name.startswith(IDENTITY_PREFIXES))
        if identity:
            names = ", ".join(identity)
            raise HttpError(403, f"identity fields are not relayed with the worker's credentials: {names}")
        hosts = sum(1 for name, _ in headers if name.lower() == "host") if repeated else int("host" in fields)
        if hosts != 1:
            raise HttpError(400, f"expected one Host field; found {hosts}")
        connection = _tokens(fields.get("connection", ""))
        named = sorted(connection & PROTECTED)
        if named:
            raise HttpError(400, f"the Connection field names {', '.join(named)}, which a proxy must keep")
        framing: Framing = "none"
        length = 0
        coding = fields.get("transfer-encoding")
        if coding is not None:
            if "content-length" in fields:  # (llhttp refuses it too)
                raise HttpError(400, "both Transfer-Encoding and Content-Length")
            if [c.strip().lower() for c in coding.split(",")] != ["chunked"]:
                raise HttpError(501, f"unsupported Transfer-Encoding {coding!r}")
            framing = "chunked"
        elif "content-length" in fields:
            length = int(fields["content-length"])  # digits only, one value: llhttp checked
            framing = "length" if length else "none"
        close = "close" in connection or parser.should_upgrade()
        return RequestHead(method, target, headers, fields, framing, length, close, decoded)


def parse_request_head(raw: bytes, max_fields: int = MAX_FIELDS) -> RequestHead:
    """Parse a whole request head (request line to the empty line, CRLFs included).

    Raises :class:`HttpError`: 400 for a malformed head, 405 for a method not relayed,
    431 for too many fields, 501 for a transfer coding other than chunked, 505 for
    another HTTP version than 1.1.
    """
    reader = HeadReader(max(len(raw), 1), max_fields)
    end = reader.scan(raw)
    if end is None or end != len(raw):
        raise HttpError(400, "incomplete message head")
    return reader.head()


def parse_response_head(raw: bytes, method: str, max_fields: int = MAX_FIELDS) -> ResponseHead:
    """Parse a response head for a request made with ``method`` (HEAD answers carry no body).

    Raises :class:`HttpError` (502) when it is not a valid HTTP/1.x response head.
    """
    if not raw.endswith(b"\r\n\r\n") or raw.find(b"\r\n\r\n") != len(raw) - 4:
        raise HttpError(502, "incomplete message head")
    collector = _Head(max_fields)
    parser = httptools.HttpResponseParser(collector)
    try:
        _feed(parser, raw, 502)
    except HttpError as exc:
        raise HttpError(502, exc.message) from None
    if not collector.complete:
        raise HttpError(502, "malformed response head")
    version = parser.get_http_version()
    if version not in ("1.0", "1.1"):
        raise HttpError(502, f"HTTP/{version} answer; expected HTTP/1.1")
    status = parser.get_status_code()
    headers, fields, _ = _fields(collector.headers)
    tokens = _tokens(fields.get("connection", ""))
    if tokens & FRAMING:
        raise HttpError(
            502, f"the Connection field names {', '.join(sorted(tokens & FRAMING))}, which frames the answer"
        )
    close = "close" in tokens or (version == "1.0" and "keep-alive" not in tokens)
    hop = not HOP_BY_HOP.isdisjoint(fields)
    framing: Framing
    length = 0
    coding = fields.get("transfer-encoding")
    if method == "HEAD" or status < 200 or status in (204, 304):
        framing = "none"
    elif coding is not None:
        codings = [c.strip().lower() for c in coding.split(",")]
        framing = "chunked" if codings[-1] == "chunked" else "close"
    elif "content-length" in fields:
        length = int(fields["content-length"])
        framing = "length" if length else "none"
    else:
        framing = "close"
    if framing == "close":
        close = True
    reason = collector.reason.decode("latin-1")
    return ResponseHead(status, reason, headers, fields, framing, length, close, raw, hop)


class _Chunks:
    """llhttp's callbacks for a chunked body."""

    __slots__ = ("done", "last", "out")

    def __init__(self) -> None:
        self.out: list[bytes] | None = None
        self.done = False
        #: The last event: "chunk" (a chunk's header), "body" (data), "end" (a chunk complete).
        self.last = "end"

    def on_body(self, data: bytes) -> None:
        self.last = "body"
        if self.out is not None:
            self.out.append(data)

    def on_chunk_header(self) -> None:
        self.last = "chunk"

    def on_chunk_complete(self) -> None:
        self.last = "end"

    def on_message_complete(self) -> None:
        self.done = True


#: A message head after which llhttp reads a chunked body (the scanner's parser starts there).
_CHUNKED_HEAD = b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"


class ChunkedScanner:
    """Follows a chunked body (RFC 9112 §7.1) as its bytes pass, finding where it ends (llhttp).

    ``feed`` returns how many bytes of the data belong to the body; with ``out`` the
    payload (the chunks' data) is appended to it as well. A chunked body ends with an
    empty line, so the data is fed up to each CRLF CRLF in turn: the end is known to
    the byte, and what follows it is left to the caller.
    """

    __slots__ = ("_boundary", "_events", "_parser", "_tail")

    def __init__(self) -> None:
        self._events = _Chunks()
        self._parser = httptools.HttpRequestParser(self._events)
        self._parser.feed_data(_CHUNKED_HEAD)
        self._boundary = True
        #: The last bytes fed (an empty line may straddle two feeds).
        self._tail = b""

    @property
    def done(self) -> bool:
        """The last chunk and the trailer section have been read."""
        return self._events.done

    @property
    def at_boundary(self) -> bool:
        """Between chunks (a clean place to end the body early)."""
        return self._boundary

    def feed(self, data: bytes, out: list[bytes] | None = None) -> int:
        """Scan ``data``; the number of its bytes up to the end of the body (``len(data)`` if it goes on)."""
        events = self._events
        if events.done or not data:
            return 0
        events.out = out
        pos, size = 0, len(data)
        tail = self._tail
        # an empty line that began in the previous feed ends within the first bytes of this one
        straddle = (tail + data[:3]).find(b"\r\n\r\n") if tail else -1
        try:
            while pos < size:
                if straddle >= 0:
                    stop, straddle = straddle + 4 - len(tail), -1
                else:
                    end = data.find(b"\r\n\r\n", max(0, pos - 3))
                    stop = size if end < 0 else end + 4
                _feed(self._parser, data[pos:stop] if pos or stop < size else data, 400)
                pos = stop
                if self.done:  # (set by llhttp's callback)
                    break
        except HttpError as exc:
            reason = exc.message.removeprefix("malformed message head: ")
            raise HttpError(400, f"malformed chunked body: {reason}") from None
        finally:
            events.out = None
        self._tail = (tail + data[:pos])[-3:] if pos < 3 else data[pos - 3 : pos]
        self._boundary = events.last == "end" and not events.done and self._tail.endswith(b"\r\n")
        return pos


#: :func:`plain_chunked_end`: more bytes are needed; the body is not plain (llhttp must read it).
CHUNKED_MORE, CHUNKED_NOT_PLAIN = -1, -2
#: A plain chunk-size line: at most this many hex digits (a 4 GiB chunk), then CRLF.
_SIZE_DIGITS = 8
_HEX = frozenset(b"0123456789abcdefABCDEF")


def plain_chunked_end(buffer: bytes | bytearray, start: int, limit: int, out: list[bytes] | None = None) -> int:
    """Where the chunked body that begins at ``buffer[start]`` ends, when it is plain and whole.

    Plain: every chunk size is hex digits alone (no extension, no whitespace), every
    chunk's data is followed by CRLF, the last chunk has no trailer fields, and the body
    is at most ``limit`` bytes: what Go's ``net/http`` (kube-apiserver) writes. Such a
    body is read here without llhttp and ends where :class:`ChunkedScanner` would end
    it; ``out`` gets the chunks' data. :data:`CHUNKED_MORE` when the bytes so far are
    the beginning of a plain body; :data:`CHUNKED_NOT_PLAIN` for anything else (which
    :class:`ChunkedScanner` reads, and refuses when it is malformed).
    """
    size_all = len(buffer)
    pos = start
    while True:
        eol = buffer.find(b"\r\n", pos, pos + _SIZE_DIGITS + 2)
        if eol < 0:
            partial = bytes(buffer[pos : pos + _SIZE_DIGITS + 2]).removesuffix(b"\r")
            if len(partial) > _SIZE_DIGITS or not _HEX.issuperset(partial):
                return CHUNKED_NOT_PLAIN
            return CHUNKED_MORE
        digits = buffer[pos:eol]
        if not digits or not _HEX.issuperset(digits):
            return CHUNKED_NOT_PLAIN
        size = int(digits, 16)
        data = eol + 2
        end = data + size
        if end + 2 - start > limit:
            return CHUNKED_NOT_PLAIN
        if size_all < end + 2:
            return CHUNKED_MORE
        if buffer[end : end + 2] != b"\r\n":
            return CHUNKED_NOT_PLAIN  # trailer fields, or data longer than its size
        if not size:
            return end + 2
        if out is not None:
            out.append(bytes(buffer[data:end]))
        pos = end + 2


def dechunk(body: bytes) -> bytes:
    """The payload of a complete chunked body (HttpError when it is incomplete or malformed)."""
    scanner = ChunkedScanner()
    out: list[bytes] = []
    scanner.feed(body, out)
    if not scanner.done:
        raise HttpError(400, "incomplete chunked body")
    return b"".join(out)


def chunk(data: bytes) -> bytes:
    """``data`` as one chunk of a chunked body."""
    return b"%x\r\n%b\r\n" % (len(data), data)


#: The end of a chunked body (the zero-size chunk, no trailers).
LAST_CHUNK = b"0\r\n\r\n"


def reason_phrase(code: int) -> str:
    """The standard reason phrase of ``code`` (empty when unknown)."""
    try:
        return HTTPStatus(code).phrase
    except ValueError:
        return ""


def response_head(code: int, headers: list[tuple[str, str]], reason: str | None = None) -> bytes:
    """A response head: status line, ``headers``, the empty line."""
    lines = [f"HTTP/1.1 {code} {reason_phrase(code) if reason is None else reason}"]
    lines.extend(f"{name}: {value}" for name, value in headers)
    lines.append("\r\n")
    return "\r\n".join(lines).encode("latin-1")


def without_hop_by_hop(headers: list[tuple[str, str]], fields: dict[str, str]) -> list[tuple[str, str]]:
    """``headers`` without hop-by-hop fields and those the ``Connection`` field names."""
    drop = HOP_BY_HOP | _tokens(fields.get("connection", ""))
    return [(name, value) for name, value in headers if name.lower() not in drop]
