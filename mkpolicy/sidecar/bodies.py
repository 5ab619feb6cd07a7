"""Request bodies of policy kinds, decoded into JSON values: JSON, or CBOR as client-go sends it.

client-go sends CBOR (``application/cbor``) when its ``ClientsAllowCBOR`` and
``ClientsPreferCBOR`` gates are on. The body is decoded with cbor2, then held to what
kube-apiserver accepts when it decodes CBOR into an unstructured object
(k8s.io/apimachinery pkg/runtime/serializer/cbor/internal/modes/decode.go): strings may
come as byte strings (Kubernetes encodes them so), byte strings tagged 21/22/23 ("expected
later encoding") become their base64url/base64/base16 text, map keys must be strings,
duplicate keys, NaN, infinities, integers outside int64, undefined and other simple values
are refused, time tags become RFC 3339 text, other tags give their content. The
transformed copy is sent to the worker as JSON.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as _dt
import math
from collections.abc import Mapping
from typing import Any

import cbor2

from mkpolicy.jsonvalues import loads_kube
from mkpolicy.sidecar.status import StatusError

JSON = "application/json"
CBOR = "application/cbor"
#: Deepest nesting decoded (kube-apiserver's JSON and CBOR limit is 10000; Python's stack is the bound here).
MAX_DEPTH = 400

_INT64 = (-(2**63), 2**63 - 1)
#: Most values (scalars, strings, arrays, maps) in one body: a real job's object holds thousands. Counted
#: before decoding (JSON: its commas and brackets, CBOR: its item heads), so that a decoded body's memory
#: (about 100 bytes a value) and time are bounded whatever its 3 MiB hold.
MAX_VALUES = 250_000
#: Bodies larger than this are decoded on a thread (two at a time): the event loop keeps answering.
THREADED = 256 * 1024
_DECODES: asyncio.Semaphore | None = None


async def decode_body(raw: bytes, content_type: str | None) -> Any:
    """:func:`decode`, on a thread for a large body (at most two such decodes at once)."""
    global _DECODES
    if len(raw) <= THREADED:
        return decode(raw, content_type)
    if _DECODES is None:
        _DECODES = asyncio.Semaphore(2)
    async with _DECODES:
        return await asyncio.to_thread(decode, raw, content_type)


def media_type(content_type: str | None) -> str:
    """The media type of a ``Content-Type`` value (parameters dropped, lower case); JSON when absent."""
    return (content_type or JSON).split(";")[0].strip().lower()


def decode(raw: bytes, content_type: str | None) -> Any:
    """The JSON value of a request body; StatusError 415 for other media types, 400 for bad bodies."""
    kind = media_type(content_type)
    if kind == JSON:
        values = raw.count(b",") + raw.count(b"[") + raw.count(b"{") + 1
        if values > MAX_VALUES:
            raise _too_many(f"about {values}")
        try:
            return loads_kube(raw)  # numbers as Kubernetes' Go decoding reads them
        except ValueError as exc:
            raise StatusError(400, f"mkpolicy sidecar: the body is not JSON: {exc}") from None
        except RecursionError:
            raise StatusError(400, "mkpolicy sidecar: the body nests too deeply") from None
    if kind == CBOR:
        return decode_cbor(raw)
    raise StatusError(415, f"mkpolicy sidecar: expected an {JSON} or {CBOR} body; found {kind}")


def decode_cbor(raw: bytes) -> Any:
    """One CBOR data item (a leading self-described CBOR tag allowed) as a JSON value."""
    cbor_values(raw, MAX_VALUES)
    try:
        value = cbor2.loads(raw, tag_hook=_tag, max_depth=MAX_DEPTH, allow_duplicate_keys=False)
    except StatusError:
        raise
    except (cbor2.CBORDecodeError, ValueError, RecursionError) as exc:
        raise StatusError(400, f"mkpolicy sidecar: the body is not valid CBOR: {exc}") from None
    return _json(value, "")


def _too_many(found: str) -> StatusError:
    return StatusError(413, f"mkpolicy sidecar: the body holds {found} values; at most {MAX_VALUES} are decoded")


def cbor_values(raw: bytes, limit: int) -> int:
    """The number of data items in ``raw`` (RFC 8949 item heads walked, nothing decoded); StatusError
    413 as soon as it exceeds ``limit``, 400 when the heads are malformed or cut short."""
    i, n, count = 0, len(raw), 0
    stack = [1]  # items left in each open container (-1: indefinite length, until a break)
    while stack:
        top = stack[-1]
        if top == 0:
            stack.pop()
            continue
        if i >= n:
            raise StatusError(400, "mkpolicy sidecar: the body is not valid CBOR: it ends inside an item")
        head = raw[i]
        i += 1
        if head == 0xFF:  # break
            if top != -1:
                raise StatusError(400, "mkpolicy sidecar: the body is not valid CBOR: a break outside an item")
            stack.pop()
            continue
        if top > 0:
            stack[-1] = top - 1
        count += 1
        if count > limit:
            raise _too_many(f"more than {limit}")
        major, info = head >> 5, head & 0x1F
        if info < 24:
            arg = info
        elif info <= 27:
            size = 1 << (info - 24)
            arg = int.from_bytes(raw[i : i + size], "big")
            i += size
        elif info == 31 and major in (2, 3, 4, 5):
            arg = -1
        else:
            raise StatusError(400, f"mkpolicy sidecar: the body is not valid CBOR: reserved head 0x{head:02x}")
        if major in (2, 3):
            if arg < 0:
                stack.append(-1)  # chunks follow
            else:
                i += arg
        elif major == 4:
            stack.append(arg)
        elif major == 5:
            stack.append(2 * arg if arg >= 0 else -1)
        elif major == 6:
            stack.append(1)  # the tagged item follows
    if i > n:
        raise StatusError(400, "mkpolicy sidecar: the body is not valid CBOR: it ends inside an item")
    return count


def _tag(*args: Any) -> Any:
    """Tags cbor2 does not decode itself: "expected later encoding" byte strings, anything else's content.

    cbor2 6 calls ``hook(tag, immutable)``, cbor2 5 ``hook(decoder, tag)``.
    """
    tag = next(a for a in args if isinstance(a, cbor2.CBORTag))
    value = tag.value
    if isinstance(value, bytes | bytearray):
        if tag.tag == 21:
            return base64.urlsafe_b64encode(value).rstrip(b"=").decode("ascii")
        if tag.tag == 22:
            return base64.b64encode(value).decode("ascii")
        if tag.tag == 23:
            return bytes(value).hex()
    return value


def _json(value: Any, where: str) -> Any:
    """``value`` as JSON types, refusing what kube-apiserver refuses."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            raise _bad(where, "an integer outside the int64 range")
        return value
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise _bad(where, "NaN or an infinite number (JSON has none)")
        return value
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, list | tuple):
        return [_json(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, Mapping):  # cbor2 gives a frozendict where a map must be hashable
        out: dict[str, Any] = {}
        for key, item in value.items():
            if isinstance(key, bytes | bytearray):
                key = bytes(key).decode("utf-8", "replace")
            if not isinstance(key, str):
                raise _bad(where, "a map key that is not a string")
            if key in out:
                raise _bad(where, f"the key {key!r} twice")
            out[key] = _json(item, f"{where}.{key}")
        return out
    if isinstance(value, _dt.datetime):
        return value.isoformat().replace("+00:00", "Z")
    if value is cbor2.undefined or isinstance(value, cbor2.CBORSimpleValue):
        raise _bad(where, "a simple value other than true, false or null")
    raise _bad(where, "a value JSON cannot hold")


def _bad(where: str, what: str) -> StatusError:
    return StatusError(400, f"mkpolicy sidecar: the CBOR body holds {what} at {where or 'the top'}")


__all__ = ["CBOR", "JSON", "MAX_VALUES", "cbor_values", "decode", "decode_body", "decode_cbor", "media_type"]
