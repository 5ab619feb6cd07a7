"""HTTP/1.1 messages on the wire (RFC 9112): heads, body framing, chunked bodies.

The worker endpoints speak HTTP/1.1 themselves rather than through a web framework:
a pass-through request costs parsing its head, and its body and the worker's answer
are relayed as the bytes that came. This module holds the pure part — parsing heads,
deciding how a body is delimited, following a chunked body as it passes — and is
strict where a lenient parser would let a request be read two ways (smuggling):
bare CR or LF, obsolete line folding, whitespace before a colon, conflicting
``Content-Length``, ``Transfer-Encoding`` together with ``Content-Length``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from http import HTTPStatus
from typing import Literal

#: Largest request or response head accepted (bytes).
MAX_HEAD = 1024 * 1024
#: Longest chunk-size or trailer line accepted in a chunked body (bytes).
MAX_CHUNK_LINE = 64 * 1024

Framing = Literal["none", "length", "chunked", "close"]

#: Hop-by-hop headers (RFC 9110 §7.6.1) that a proxy never forwards as they are.
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "te", "upgrade", "proxy-authenticate"})

_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_METHOD = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_TARGET = re.compile(r"[!-~]+")
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")
_DIGITS = re.compile(r"[0-9]{1,18}")
_STATUS_LINE = re.compile(r"HTTP/1\.([01]) ([0-9]{3})(?: ([^\r\n\0]*))?")


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


#: A header section: field lines of a token, a colon and a value without CR or LF (no
#: obsolete folding, no whitespace before the colon), each ending with CRLF.
_FIELD_LINES = re.compile(r"(?:[!#$%&'*+\-.^_`|~0-9A-Za-z]+:[^\r\n\0]*\r\n)*")


def _split_head(raw: bytes, code: int) -> tuple[str, str]:
    """The start line and the header section (each field line ending with CRLF) of a head."""
    if not raw.endswith(b"\r\n\r\n"):
        raise HttpError(code, "incomplete message head")
    text = raw[:-2].decode("latin-1")
    start, _, section = text.partition("\r\n")
    if _FIELD_LINES.fullmatch(section) is None:
        # also bare CR or LF, NUL, obsolete line folding and "Name : value"
        bad = next((line for line in section.split("\r\n") if _FIELD_LINES.fullmatch(line + "\r\n") is None), "")
        raise HttpError(code, f"malformed header line {bad[:100]!r}")
    return start, section


def _parse_fields(section: str) -> tuple[list[tuple[str, str]], dict[str, str]]:
    headers: list[tuple[str, str]] = []
    fields: dict[str, str] = {}
    if not section:
        return headers, fields
    for line in section[:-2].split("\r\n"):
        name, _, value = line.partition(":")
        value = value.strip(" \t")
        headers.append((name, value))
        low = name.lower()
        old = fields.get(low)
        fields[low] = value if old is None else f"{old}, {value}"
    return headers, fields


def _content_length(value: str) -> int:
    values = {v.strip() for v in value.split(",")}
    if len(values) != 1:
        raise HttpError(400, f"conflicting Content-Length values: {value!r}")
    text = values.pop()
    if _DIGITS.fullmatch(text) is None:
        raise HttpError(400, f"invalid Content-Length {text!r}")
    return int(text)


def _tokens(value: str) -> set[str]:
    return {t.strip().lower() for t in value.split(",") if t.strip()}


def parse_request_head(raw: bytes) -> RequestHead:
    """Parse a request head (request line to the empty line, CRLFs included).

    Raises :class:`HttpError`: 400 for a malformed head, 501 for a transfer coding other
    than chunked, 505 for another HTTP version than 1.1.
    """
    start, section = _split_head(raw, 400)
    parts = start.split(" ")
    if len(parts) != 3 or _METHOD.fullmatch(parts[0]) is None or _TARGET.fullmatch(parts[1]) is None:
        raise HttpError(400, f"malformed request line {start[:100]!r}")
    method, target, version = parts
    if version != "HTTP/1.1":
        if re.fullmatch(r"HTTP/[0-9]\.[0-9]", version):
            raise HttpError(505, f"{version} is not supported; use HTTP/1.1")
        raise HttpError(400, f"malformed request line {start[:100]!r}")
    if not target.startswith("/"):
        scheme, sep, rest = target.partition("://")
        if sep and scheme.lower() in ("http", "https"):  # absolute-form: keep the path
            slash = rest.find("/")
            target = rest[slash:] if slash >= 0 else "/"
        else:
            raise HttpError(400, f"unsupported request target {target[:100]!r}")
    headers, fields = _parse_fields(section)
    framing: Framing = "none"
    length = 0
    coding = fields.get("transfer-encoding")
    if coding is not None:
        if "content-length" in fields:
            raise HttpError(400, "both Transfer-Encoding and Content-Length")
        if [c.strip().lower() for c in coding.split(",")] != ["chunked"]:
            raise HttpError(501, f"unsupported Transfer-Encoding {coding!r}")
        framing = "chunked"
    elif "content-length" in fields:
        length = _content_length(fields["content-length"])
        framing = "length" if length else "none"
    connection = fields.get("connection")
    close = connection is not None and "close" in _tokens(connection)
    return RequestHead(method, target, headers, fields, framing, length, close)


def parse_response_head(raw: bytes, method: str) -> ResponseHead:
    """Parse a response head for a request made with ``method`` (HEAD answers carry no body).

    Raises :class:`HttpError` (502) when it is not a valid HTTP/1.x response head.
    """
    start, section = _split_head(raw, 502)
    match = _STATUS_LINE.fullmatch(start)
    if match is None:
        raise HttpError(502, f"malformed status line {start[:100]!r}")
    minor, status, reason = match.group(1), int(match.group(2)), match.group(3) or ""
    headers, fields = _parse_fields(section)
    connection = fields.get("connection")
    tokens = _tokens(connection) if connection is not None else set()
    close = "close" in tokens or (minor == "0" and "keep-alive" not in tokens)
    hop = not HOP_BY_HOP.isdisjoint(fields)
    framing: Framing
    length = 0
    coding = fields.get("transfer-encoding")
    if method == "HEAD" or status < 200 or status in (204, 304):
        framing = "none"
    elif coding is not None:
        if "content-length" in fields:
            raise HttpError(502, "both Transfer-Encoding and Content-Length")
        codings = [c.strip().lower() for c in coding.split(",")]
        framing = "chunked" if codings[-1] == "chunked" else "close"
    elif "content-length" in fields:
        try:
            length = _content_length(fields["content-length"])
        except HttpError as exc:
            raise HttpError(502, exc.message) from None
        framing = "length" if length else "none"
    else:
        framing = "close"
    if framing == "close":
        close = True
    return ResponseHead(status, reason, headers, fields, framing, length, close, raw, hop)


class ChunkedScanner:
    """Follows a chunked body (RFC 9112 §7.1) as its bytes pass, finding where it ends.

    ``feed`` returns how many bytes of the data belong to the body; with ``out`` the
    payload (the chunks' data) is appended to it as well. Extensions and trailer fields
    are checked for framing only and passed over.
    """

    __slots__ = ("_left", "_line", "_state", "done")

    _SIZE, _DATA, _DATA_END, _TRAILER = range(4)

    def __init__(self) -> None:
        self._state = self._SIZE
        self._left = 0
        self._line = b""
        self.done = False

    @property
    def at_boundary(self) -> bool:
        """Between chunks (a clean place to end the body early)."""
        return self._state == self._SIZE and not self._line

    def feed(self, data: bytes, out: list[bytes] | None = None) -> int:
        """Scan ``data``; the number of its bytes up to the end of the body (``len(data)`` if it goes on)."""
        pos = 0
        size = len(data)
        while pos < size and not self.done:
            if self._state == self._DATA:
                take = min(self._left, size - pos)
                if out is not None:
                    out.append(data[pos : pos + take])
                pos += take
                self._left -= take
                if not self._left:
                    self._state = self._DATA_END
                continue
            end = data.find(b"\n", pos)
            if end < 0:
                self._line += data[pos:]
                if len(self._line) > MAX_CHUNK_LINE:
                    raise HttpError(400, "chunk line too long")
                return size
            line = self._line + data[pos : end + 1] if self._line else data[pos : end + 1]
            self._line = b""
            pos = end + 1
            self._line_done(line)
        return pos

    def _line_done(self, line: bytes) -> None:
        if len(line) > MAX_CHUNK_LINE:
            raise HttpError(400, "chunk line too long")
        if not line.endswith(b"\r\n") or b"\r" in line[:-2]:
            raise HttpError(400, "chunk line without CRLF")
        if self._state == self._SIZE:
            text = line[:-2].split(b";", 1)[0].strip(b" \t")
            if _HEX.fullmatch(text) is None:
                raise HttpError(400, f"invalid chunk size {text[:20]!r}")
            self._left = int(text, 16)
            self._state = self._DATA if self._left else self._TRAILER
        elif self._state == self._DATA_END:
            if line != b"\r\n":
                raise HttpError(400, "chunk data longer than its size")
            self._state = self._SIZE
        elif line == b"\r\n":  # trailer section ends
            self.done = True
        elif _TOKEN.fullmatch(line.partition(b":")[0]) is None:
            raise HttpError(400, "malformed trailer field")


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
