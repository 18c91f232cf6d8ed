"""A server's end of one WebSocket: wsproto, driven by one reader task.

wsproto (the sans-IO engine) checks every frame: masking, RSV bits, opcodes,
control-frame sizes, fragmentation, UTF-8 in text frames and close reasons.
This module does the I/O around it and answers each violation the way
RFC 6455 §7.1.7 says — a close frame with the code, then the TCP close —
instead of dropping the connection:

======================================================  =====
the client sent                                          close
======================================================  =====
text that is not UTF-8 (a text frame or close reason)    1007
an unmasked frame, RSV bits with no extension, a stray   1002
continuation, a fragmented or >125-byte control frame,
a reserved opcode, a bad close code
a frame header announcing more than the message limit    1009
======================================================  =====

A 1009 is decided on the frame *header*, before any payload is buffered: a
header announcing 2^63-1 bytes is refused at once (see
:class:`MessageSizeLimit`). Each of these ends the connection with one log
line (``ending()``), never a traceback.

Resource handling: :meth:`ServerStream.run` is the reader; the server starts
it in the connection's nursery. Whole messages wait for the handler in a
channel of ``message_queue_size``; when it is full the reader stops reading
(back-pressure reaches the client's socket). Pings are answered and pongs
seen only while the reader runs, so a handler keeps receiving.
"""

from __future__ import annotations

import logging
import math
import os
import struct
from collections.abc import Sequence
from typing import Any

import trio
from wsproto.connection import Connection, ConnectionState, ConnectionType
from wsproto.events import (
    BytesMessage,
    CloseConnection,
    Event,
    Message,
    Ping,
    Pong,
)
from wsproto.extensions import Extension
from wsproto.frame_protocol import CloseReason, Opcode, RsvBits
from wsproto.utilities import LocalProtocolError

from gemini_split.transport import (
    ConnectionBroken,
    ConnectionClosed,
    MessageStream,
    MessageTooLarge,
    Principal,
)

from .wire import RECEIVE_SIZE, FrameSafeStream, truncate_close_reason

log = logging.getLogger(__name__)

#: Seconds a stopping server waits for each client's answering close frame.
SHUTDOWN_CLOSE_WAIT = 0.5
#: The close reason a client sees when the server stops under it.
SHUTDOWN_REASON = "server shutting down"


class MessageSizeLimit(Extension):
    """Refuses a message by its frame headers, before its payload arrives.

    Not a negotiated extension (it is never offered, and uses no RSV bit):
    it is wsproto's one hook that sees each frame's announced length before
    the payload is read. A message is the first TEXT/BINARY frame plus its
    CONTINUATIONs; control frames do not count.
    """

    name = "gemini-split-message-size-limit"

    def __init__(self, limit: int):
        self.limit = limit
        self._message_size = 0

    def enabled(self) -> bool:
        return True

    def offer(self) -> bool:
        return False

    def frame_inbound_header(
        self, proto: Any, opcode: Opcode, rsv: RsvBits, payload_length: int
    ) -> CloseReason | RsvBits:
        if opcode in (Opcode.TEXT, Opcode.BINARY):
            self._message_size = payload_length
        elif opcode is Opcode.CONTINUATION:
            self._message_size += payload_length
        if self._message_size > self.limit:
            return CloseReason.MESSAGE_TOO_BIG
        return RsvBits(False, False, False)


def text_frame(message: str) -> bytes:
    """One whole, unmasked text frame holding ``message`` (RFC 6455 §5.2):
    what wsproto's server connection writes for a ``TextMessage`` (a test
    holds them equal), without its per-frame copies. A server's frames are
    never masked and this connection negotiates no extension, so a frame
    depends on the text alone."""
    payload = message.encode("utf-8")
    size = len(payload)
    if size < 126:
        return bytes((0x81, size)) + payload
    if size < 1 << 16:
        return struct.pack("!BBH", 0x81, 126, size) + payload
    return struct.pack("!BBQ", 0x81, 127, size) + payload


class ServerStream(MessageStream):
    """A server's end of one WebSocket; see the module docstring.

    Error handling: ``send`` and ``receive`` raise ConnectionClosed after our
    own ``aclose()``, and ConnectionBroken once the connection is otherwise
    over (``code``: the client's when it closed, 1002/1007/1009 when we
    refused what it sent, 1006 when it broke or was dropped); ``receive``
    raises MessageTooLarge once, first, when a message was over the limit.
    """

    def __init__(
        self,
        wire: FrameSafeStream,
        *,
        peer: str,
        principal: Principal | None,
        max_message_size: int,
        close_timeout: float,
        message_queue_size: int = 8,
    ):
        self._wire = wire
        self.peer = peer
        self.principal = principal
        #: The upgrade request's query parameters (never ``auth``).
        self.query: dict[str, str] = {}
        self._max = max_message_size
        self._close_timeout = close_timeout
        self._ws = Connection(ConnectionType.SERVER, extensions=[MessageSizeLimit(max_message_size)])
        self._send_lock = trio.Lock()
        self._incoming, self._messages = trio.open_memory_channel[str](max(message_queue_size, 0))
        self._parts: list[Any] = []
        self._pings: dict[bytes, trio.Event] = {}
        self._reader_done = trio.Event()
        self._closed = False  # aclose() was called
        #: Why our side ended the connection (aclose, keepalive), if it did first.
        self._local_reason: str | None = None
        #: (code, reason) of a close we sent because the client broke the protocol.
        self._refusal: tuple[int, str] | None = None
        #: (code, reason) of the client's own close frame.
        self._peer_close: tuple[int, str] | None = None
        self._too_large_reported = False

    # --- the reader ------------------------------------------------------

    async def run(self, received: bytes = b"", *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Read and handle frames until the connection is over, then close the
        socket. ``received``: bytes the client sent after its request head.
        Never raises but Cancelled."""
        task_status.started()
        try:
            await self._read(received)
        finally:
            self._incoming.close()
            for waiting in self._pings.values():
                waiting.set()
            self._reader_done.set()
        # Not when cancelled: then aclose() still sends its close frame.
        await trio.aclose_forcefully(self._wire)

    async def _read(self, received: bytes) -> None:
        if received:
            self._ws.receive_data(received)
        while True:
            for event in self._ws.events():
                await self._on_event(event)
                if self._refused_or_closed:
                    return
            if self._refused_or_closed:
                return
            try:
                data = await self._wire.receive_some(RECEIVE_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
            if not data:
                return
            self._ws.receive_data(data)

    async def _on_event(self, event: Event) -> None:
        if isinstance(event, Message):
            self._parts.append(event.data)
            if event.message_finished:
                await self._deliver(event)
        elif isinstance(event, Ping):
            if self._ws.state is ConnectionState.OPEN:
                await self._write_quietly(event.response())
        elif isinstance(event, Pong):
            waiting = self._pings.pop(bytes(event.payload), None)
            if waiting is not None:
                waiting.set()
        elif isinstance(event, CloseConnection):
            if self._ws.state is ConnectionState.REMOTE_CLOSING:
                # The client's close: answer it; the reader then ends.
                self._peer_close = (event.code, event.reason or "")
                await self._write_quietly(event.response())
            elif self._ws.state is ConnectionState.OPEN:
                # wsproto found a protocol violation (it reports one as a
                # CloseConnection while the connection is still open).
                await self._refuse(event.code, event.reason or "protocol error")
            # CLOSED: the answer to our own close.

    async def _deliver(self, event: Message) -> None:
        parts, self._parts = self._parts, []
        if isinstance(event, BytesMessage):
            try:
                message = b"".join(parts).decode("utf-8")
            except UnicodeDecodeError:
                await self._refuse(CloseReason.INVALID_FRAME_PAYLOAD_DATA, "binary frames must hold UTF-8 text")
                return
        else:
            message = "".join(parts)
        try:
            await self._incoming.send(message)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the handler closed the stream: drop it, keep reading for the close

    async def _refuse(self, code: int, reason: str) -> None:
        """Fail the connection (RFC 6455 §7.1.7): a close frame with ``code``;
        the reader then ends and closes the socket."""
        if code == CloseReason.MESSAGE_TOO_BIG:
            reason = f"message too big: over the limit of {self._max} bytes"
        self._refusal = (int(code), reason)
        self._parts = []
        if self._ws.state is ConnectionState.OPEN:
            await self._write_quietly(CloseConnection(code=int(code), reason=truncate_close_reason(reason)))
        # Nothing more from this client is read: the reader ends here.

    @property
    def _refused_or_closed(self) -> bool:
        return self._refusal is not None or self._ws.state is ConnectionState.CLOSED

    # --- MessageStream ---------------------------------------------------

    async def send(self, message: str) -> None:
        await self.send_many((message,))

    async def send_many(self, messages: Sequence[str]) -> None:
        """The messages' text frames, built here (see :func:`text_frame`),
        in one write: a client that fell behind gets what its outbox holds
        with one ``send()`` call instead of one per message."""
        if self._closed or self._reader_done.is_set():
            raise self._closed_error()
        data = b"".join(map(text_frame, messages))
        await self._lock()
        try:
            if self._ws.state is not ConnectionState.OPEN:
                # The close handshake has begun: nothing but a close may be sent.
                raise self._closed_error()
            await self._write_bytes(data)
        finally:
            self._send_lock.release()

    async def receive(self) -> str:
        if self._closed:
            raise self._closed_error()
        try:
            return await self._messages.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            pass
        if self._refusal is not None and self._refusal[0] == CloseReason.MESSAGE_TOO_BIG and not self._too_large_reported:
            self._too_large_reported = True
            log.warning(
                "closed the connection from %s with code 1009: a message was over the limit of %d bytes",
                self.peer, self._max, extra={"refusal": "message too large"},
            )
            raise MessageTooLarge(
                f"a message from {self.peer} was over the limit of {self._max} bytes; "
                "the connection is closed (1009)"
            )
        raise self._closed_error()

    async def ping(self) -> None:
        """Send a ping and wait for its pong. Raises ConnectionBroken (or
        ConnectionClosed) if the connection ends first."""
        payload = os.urandom(8)
        answered = trio.Event()
        self._pings[payload] = answered
        await self._write(Ping(payload=payload))
        await answered.wait()
        if self._reader_done.is_set():
            raise self._closed_error()

    async def aclose(self, reason: str | None = None) -> None:
        """Send a close frame carrying ``reason`` and wait for the client's
        answer: at most ``close_timeout``, or SHUTDOWN_CLOSE_WAIT when we are
        being cancelled (the server is stopping). The frame is sent even then.
        Without a reason it says "closed", or "server shutting down" when
        cancelled (run_handler closes the stream of a cancelled handler)."""
        if self._closed:
            return
        self._closed = True
        cancelled = trio.current_effective_deadline() == -math.inf
        if reason is None:
            reason = SHUTDOWN_REASON if cancelled else "closed"
        if self._local_reason is None and self._ws.state is ConnectionState.OPEN:
            self._local_reason = reason
        self._messages.close()  # a reader waiting to hand us a message goes on
        wait = min(self._close_timeout, SHUTDOWN_CLOSE_WAIT) if cancelled else self._close_timeout
        with trio.CancelScope(shield=True, deadline=trio.current_time() + wait):
            if self._ws.state is ConnectionState.OPEN:
                await self._write_quietly(CloseConnection(code=1000, reason=truncate_close_reason(reason)))
            await self._reader_done.wait()
        await trio.aclose_forcefully(self._wire)

    async def abort(self, reason: str) -> None:
        """End the connection at once, without a close handshake (dead peer)."""
        if self._local_reason is None:
            self._local_reason = reason
        await trio.aclose_forcefully(self._wire)

    @property
    def refused(self) -> bool:
        """Whether we ended the connection for something the client sent."""
        return self._refusal is not None

    def ending(self) -> str:
        """Why the connection ended, for the log: one line."""
        if self._wire.stall_reason:
            return self._wire.stall_reason
        if self._refusal is not None:
            code, reason = self._refusal
            return f"refused what the client sent: {reason} ({code})"
        if self._local_reason is not None:
            return self._local_reason
        if self._peer_close is not None:
            code, reason = self._peer_close
            return f"closed by the client ({code}{': ' + reason if reason else ''})"
        if not self._reader_done.is_set():
            return "closed"
        return "the connection broke (no close frame)"

    # --- internals -------------------------------------------------------

    async def _write(self, event: Event) -> None:
        await self._lock()
        try:
            try:
                data = self._ws.send(event)
            except LocalProtocolError:
                # The close handshake has begun: nothing but a close may be sent.
                raise self._closed_error() from None
            await self._write_bytes(data)
        finally:
            self._send_lock.release()

    async def _write_bytes(self, data: bytes | bytearray) -> None:
        try:
            await self._wire.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise self._closed_error() from exc

    async def _lock(self) -> None:
        """Take the send lock (the caller releases it): without a trip
        through the scheduler when nobody holds it — the common case, one
        writer task per connection."""
        try:
            self._send_lock.acquire_nowait()
        except trio.WouldBlock:
            await self._send_lock.acquire()

    async def _write_quietly(self, event: Event) -> None:
        """Write a control frame the connection can do without (a pong, a
        close): a peer already gone is no error here."""
        try:
            await self._write(event)
        except (ConnectionClosed, ConnectionBroken):
            pass

    def _closed_error(self) -> ConnectionClosed | ConnectionBroken:
        """ConnectionClosed once our aclose() ran; otherwise the client, the
        network, or a dead or stalled peer ended it: ConnectionBroken."""
        if self._closed:
            return ConnectionClosed(self._local_reason or "connection closed", 1000)
        if self._wire.stall_reason:
            return ConnectionBroken(f"dropped the connection: {self._wire.stall_reason}", 1006)
        if self._refusal is not None:
            code, reason = self._refusal
            return ConnectionBroken(f"closed the connection: {reason}", code)
        if self._local_reason is not None:
            return ConnectionBroken(self._local_reason, 1006)
        if self._peer_close is not None:
            code, reason = self._peer_close
            return ConnectionBroken(reason or f"the client closed the connection (code {code})", code)
        if self._reader_done.is_set():
            return ConnectionBroken("the connection broke (closed without a close frame)", 1006)
        return ConnectionBroken("connection closed")
