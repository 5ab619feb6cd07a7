"""A byte connection for the HTTP/1.1 endpoints: buffered reads that can be awaited, flow control.

One :class:`Connection` is the asyncio protocol of a TLS (or TCP) connection, on either
side of the sidecar. Bytes are buffered as they arrive; a coroutine awaits them with
:meth:`Connection.wait_readable` (one future, no task, no stream machinery) and takes
them with :meth:`Connection.take`. Reading pauses while the buffer holds more than
``HIGH_WATER`` bytes (a slow reader pushes back on the peer); writers wait in
:meth:`Connection.drain` while the transport's buffer is full.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import cast

from mkpolicy.sidecar.http1 import HttpError

#: Reading pauses above this many buffered bytes, and resumes below ``LOW_WATER``.
HIGH_WATER = 256 * 1024
LOW_WATER = 64 * 1024


def expire(waiter: asyncio.Future[None]) -> None:
    """End ``waiter`` with a TimeoutError unless it is done (a timer's callback)."""
    if not waiter.done():
        waiter.set_exception(TimeoutError())


class Connection(asyncio.Protocol):
    """The protocol of one connection: a read buffer, awaitable reads, write flow control."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        #: The peer will send nothing more (EOF or connection lost).
        self.eof = False
        #: The connection is gone (no more writes either).
        self.lost = False
        #: Called once when the connection is lost (set by the owner).
        self.on_lost: Callable[[], None] | None = None
        self._waiter: asyncio.Future[None] | None = None
        #: A wake-up (new bytes, EOF, the owner's) that came while nobody waited.
        self._woken = False
        self._drain: asyncio.Future[None] | None = None
        self._write_paused = False
        self._read_paused = False
        #: A message head is being read (its own limit bounds the buffer, not HIGH_WATER).
        self._in_head = False

    # -- asyncio.Protocol -------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # (uvloop's transports do not derive from asyncio.Transport, but have its methods)
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if not self._read_paused and len(self.buffer) > HIGH_WATER and not self._in_head and self.transport is not None:
            self._read_paused = True
            self.transport.pause_reading()
        self._on_data()

    def _on_data(self) -> None:
        """New bytes are buffered (subclasses may act on them before waking the reader)."""
        self.wake()

    def eof_received(self) -> bool | None:
        self.eof = True
        self.wake()
        return None  # close the transport: there is no half-closed HTTP/1.1 exchange

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self.lost = True
        self.wake()
        drain, self._drain = self._drain, None
        if drain is not None and not drain.done():
            drain.set_exception(ConnectionResetError("connection lost"))
        callback, self.on_lost = self.on_lost, None
        if callback is not None:
            callback()

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        drain, self._drain = self._drain, None
        if drain is not None and not drain.done():
            drain.set_result(None)

    # -- reading ----------------------------------------------------------------------------
    def wake(self) -> None:
        """Wake the coroutine waiting in :meth:`wait_readable` (also for reasons of the owner's).

        A wake-up while nobody waits is kept: the next wait returns at once.
        """
        waiter = self._waiter
        if waiter is not None:
            if not waiter.done():
                waiter.set_result(None)
        else:
            self._woken = True

    async def wait_readable(self, timeout: float | None = None) -> None:
        """Wait for news: bytes arriving after the last wait, the peer done, or :meth:`wake`.

        Bytes already buffered are not news (callers look at :attr:`buffer` first).
        TimeoutError when ``timeout`` seconds pass first.
        """
        if self._woken or self.eof:
            self._woken = False
            return
        waiter = self.loop.create_future()
        self._waiter = waiter
        timer = self.loop.call_later(timeout, expire, waiter) if timeout is not None else None
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()

    def take(self, size: int = -1) -> bytes:
        """Remove and return up to ``size`` buffered bytes (all of them by default)."""
        buffer = self.buffer
        if size < 0 or size >= len(buffer):
            data = bytes(buffer)
            buffer.clear()
        else:
            data = bytes(buffer[:size])
            del buffer[:size]
        if self._read_paused and len(buffer) < LOW_WATER and self.transport is not None and not self.lost:
            self._read_paused = False
            self.transport.resume_reading()
        return data

    async def read_head(self, timeout: float | None, limit: int) -> bytes | None:
        """The next message head (through the empty line), None at a clean EOF before any byte.

        HttpError 431 when the head exceeds ``limit``; ConnectionResetError when the
        connection ends inside a head; TimeoutError when no byte comes for ``timeout`` seconds.
        """
        start = 0
        while True:
            end = self.buffer.find(b"\r\n\r\n", start)
            if end >= 0 and end + 4 <= limit:
                return self.take(end + 4)
            if len(self.buffer) > limit:
                raise HttpError(431, f"message head larger than {limit} bytes")
            if self.eof:
                if not self.buffer:
                    return None
                raise ConnectionResetError("connection closed inside a message head")
            start = max(0, len(self.buffer) - 3)
            if self._read_paused and self.transport is not None:
                self._read_paused = False
                self.transport.resume_reading()
            self._in_head = True
            try:
                await self.wait_readable(timeout)
            finally:
                self._in_head = False

    # -- writing ----------------------------------------------------------------------------
    def write(self, data: bytes) -> None:
        """Send ``data`` (dropped when the connection is gone)."""
        if not self.lost and self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    @property
    def writable(self) -> bool:
        """Whether writes still reach the peer."""
        return not self.lost and self.transport is not None and not self.transport.is_closing()

    async def drain(self) -> None:
        """Wait while the transport's write buffer is full; ConnectionResetError when the connection is gone."""
        if self.lost:
            raise ConnectionResetError("connection lost")
        if not self._write_paused:
            return
        if self._drain is None:
            self._drain = self.loop.create_future()
        await self._drain

    def close(self) -> None:
        """Close after the buffered writes."""
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def abort(self) -> None:
        """Close now, dropping buffered writes (the peer sees a broken connection)."""
        if self.transport is not None and not self.lost:
            self.transport.abort()
