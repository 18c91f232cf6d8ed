"""The client half: connect, handshake, and a pull-driven WebSocket stream.

:class:`gemini_split.transport.Transport.open_connection` returns a stream, not
a context manager, so there is no nursery a background reader task could live
in. Rather than hide an unowned task, the client drives wsproto (the sans-IO
WebSocket engine the server uses too) from
the calling tasks, as :class:`trio.SSLStream` does TLS: ``receive`` reads the
socket and answers pings and close frames as it goes; ``send`` writes. The
consequence to know: **pings are answered while a task is in receive()**. A
client keeps one receiving at all times (ProtocolClient's reader does); one
that stops reading for longer than the server's keepalive timeout is, by
design, a stalled peer and is dropped.
"""

from __future__ import annotations

import errno
import socket
import ssl

import trio
from wsproto import ConnectionType, WSConnection
from wsproto.connection import ConnectionState
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Event,
    Message,
    Ping,
    RejectConnection,
    RejectData,
    Request,
    TextMessage,
)
from wsproto.utilities import LocalProtocolError, RemoteProtocolError

from gemini_split.transport import (
    is_loopback_host,
    AuthenticationFailed,
    ConnectFailed,
    ConnectionBroken,
    ConnectionClosed,
    ConnectOptions,
    MessageStream,
    MessageTooLarge,
)

from .address import WebSocketAddress
from .tls import client_context, describe_handshake_failure
from .wire import RECEIVE_SIZE, FrameSafeStream, truncate_close_reason

#: Most of a refusal's body kept for the error message.
MAX_REFUSAL_BODY = 4096


async def open_websocket_stream(address: str, options: ConnectOptions) -> ClientStream:
    """Connect and handshake within ``options.connect_timeout``; raises
    ConnectFailed / AuthenticationFailed with a message that says what to do."""
    where = WebSocketAddress.parse(address)
    if not where.host:
        raise ConnectFailed(f"{where.public} names no host to connect to")
    tls = client_context(options.ca_file, options.insecure) if where.secure else None
    try:
        with trio.fail_after(options.connect_timeout):
            return await _connect(where, tls, options)
    except trio.TooSlowError:
        raise ConnectFailed(
            f"timed out after {options.connect_timeout:g}s connecting to {where.public}: "
            "the server is unreachable or not answering; check the address and that "
            "`gemini-split serve` is running there"
        ) from None


async def _connect(
    where: WebSocketAddress, tls: ssl.SSLContext | None, options: ConnectOptions
) -> ClientStream:
    try:
        tcp = await trio.open_tcp_stream(where.host, where.port)
    except OSError as exc:
        raise ConnectFailed(_describe_connect_error(where, exc)) from exc
    stream: trio.abc.Stream = tcp
    try:
        if tls is not None:
            stream = trio.SSLStream(tcp, tls, server_hostname=where.host, https_compatible=True)
            try:
                await stream.do_handshake()
            except trio.BrokenResourceError as exc:
                raise ConnectFailed(describe_handshake_failure(where.public, exc)) from exc
        stall_timeout = float(options.extra.get("stall_timeout", 60.0))
        close_timeout = float(options.extra.get("close_timeout", 2.0))
        wire = FrameSafeStream(stream, stall_timeout=stall_timeout, grace=close_timeout)
        ws = WSConnection(ConnectionType.CLIENT)
        headers = [
            (name.encode("latin-1"), value.encode("latin-1"))
            for name, value in dict(options.extra.get("headers") or {}).items()
        ]
        if options.token:
            headers.append((b"Authorization", b"Bearer " + options.token.encode("latin-1")))
        request = Request(host=where.host_header, target=where.target, extra_headers=headers)
        try:
            await wire.send_all(ws.send(request))
            await _read_handshake_answer(wire, ws, where, options)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise ConnectFailed(
                f"the connection to {where.public} broke during the WebSocket handshake"
                f"{_tls_hint(where)}"
            ) from exc
    except BaseException:
        await trio.aclose_forcefully(stream)
        raise
    client = ClientStream(
        wire, ws, peer=where.public,
        max_message_size=options.max_message_size, close_timeout=close_timeout,
    )
    client.private = where.scheme == "wss" or is_loopback_host(where.host)
    return client


async def _read_handshake_answer(
    wire: FrameSafeStream, ws: WSConnection, where: WebSocketAddress, options: ConnectOptions
) -> None:
    status: int | None = None
    retry_after: str | None = None
    body = bytearray()
    while True:
        try:
            for event in ws.events():
                if isinstance(event, AcceptConnection):
                    return
                if isinstance(event, RejectConnection):
                    status = event.status_code
                    retry_after = _header(event.headers, b"retry-after")
                    if not event.has_body:
                        raise _refusal(where, status, b"", options, retry_after)
                elif isinstance(event, RejectData):
                    if len(body) < MAX_REFUSAL_BODY:
                        body += event.data
                    if event.body_finished:
                        raise _refusal(where, status or 0, bytes(body), options, retry_after)
        except RemoteProtocolError as exc:
            raise ConnectFailed(
                f"{where.public} did not answer as a WebSocket server ({exc})"
            ) from None
        data = await wire.receive_some(RECEIVE_SIZE)
        if not data:
            if status is not None:
                raise _refusal(where, status, bytes(body), options, retry_after)
            raise ConnectFailed(
                f"{where.public} closed the connection during the WebSocket handshake"
                f"{_tls_hint(where)}"
            )
        ws.receive_data(data)


def _header(headers: object, name: bytes) -> str | None:
    for key, value in headers or ():  # type: ignore[attr-defined]
        if bytes(key).lower() == name:
            return bytes(value).decode("latin-1").strip()
    return None


def _refusal(
    where: WebSocketAddress,
    status: int,
    body: bytes,
    options: ConnectOptions,
    retry_after: str | None = None,
) -> ConnectFailed:
    detail = body.decode("utf-8", "replace").strip()[:300]
    said = f": {detail}" if detail else ""
    if status == 401:
        if options.token or "auth=" in where.query:
            return AuthenticationFailed(
                f"server refused the token (HTTP 401{said}) at {where.public}: check "
                "--token / GEMINI_SERVER_TOKEN against the server's auth config"
            )
        return AuthenticationFailed(
            f"server requires a token (HTTP 401) at {where.public}: pass one with "
            "--token or GEMINI_SERVER_TOKEN"
        )
    if status == 403:
        return AuthenticationFailed(
            f"server refused the connection (HTTP 403{said}) at {where.public}"
        )
    if status == 429 and retry_after is not None:
        return AuthenticationFailed(
            f"server refused the connection (HTTP 429{said}) at {where.public}: too many "
            f"wrong tokens came from this address; wait {retry_after}s, and check --token / "
            "GEMINI_SERVER_TOKEN"
        )
    if status == 429:
        return ConnectFailed(
            f"server refused the connection (HTTP 429{said}) at {where.public}: close "
            "another session of this user, or ask the operator to raise the limit"
        )
    return ConnectFailed(
        f"{where.public} refused the WebSocket upgrade (HTTP {status}{said}); "
        "is it a gemini-split server?"
    )


def _describe_connect_error(where: WebSocketAddress, exc: OSError) -> str:
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve host {where.host!r} ({exc.strerror}); check the server address"
    causes = getattr(exc.__cause__, "exceptions", None) or [exc]
    if any(getattr(cause, "errno", None) == errno.ECONNREFUSED for cause in causes):
        return (
            f"cannot connect to {where.public}: connection refused; is "
            f"`gemini-split serve` running on port {where.port}?"
        )
    reasons = "; ".join(sorted({getattr(c, "strerror", None) or str(c) for c in causes}))
    return f"cannot connect to {where.public}: {reasons}"


def _tls_hint(where: WebSocketAddress) -> str:
    return "" if where.secure else " (if the server uses TLS, connect with wss://)"


class ClientStream(MessageStream):
    """A client's end of one WebSocket; see the module docstring."""

    def __init__(
        self,
        wire: FrameSafeStream,
        ws: WSConnection,
        *,
        peer: str,
        max_message_size: int,
        close_timeout: float,
    ):
        self._wire = wire
        self._ws = ws
        self.peer = peer
        self._max = max_message_size
        self._close_timeout = close_timeout
        self._send_lock = trio.StrictFIFOLock()
        self._receive_lock = trio.StrictFIFOLock()
        self._parts: list[str | bytes] = []
        self._size = 0
        self._closing = False
        #: Raised (a fresh copy) by every call once the connection is over:
        #: ConnectionClosed if we closed it, ConnectionBroken if the server
        #: or the network ended it.
        self._ended: ConnectionClosed | ConnectionBroken | None = None

    # --- MessageStream ---------------------------------------------------

    async def send(self, message: str) -> None:
        await self._write(TextMessage(data=message))

    async def receive(self) -> str:
        async with self._receive_lock:
            while True:
                self._raise_if_ended()
                for event in self._ws.events():
                    message = await self._on_event(event)
                    if message is not None:
                        return message
                await self._read_more()

    async def aclose(self, reason: str = "closed") -> None:
        """Send a close frame carrying ``reason``, wait briefly for the server
        to close (RFC 6455 §7.1.1) unless another task is receiving, and
        close the socket. Bounded by ``close_timeout`` even when cancelled."""
        if self._closing:
            return
        self._closing = True
        with trio.CancelScope(shield=True, deadline=trio.current_time() + self._close_timeout):
            if self._ended is None and self._ws.state is ConnectionState.OPEN:
                try:
                    await self._write(CloseConnection(code=1000, reason=truncate_close_reason(reason)))
                except (ConnectionClosed, ConnectionBroken):
                    pass
                else:
                    if not self._receive_lock.locked():
                        await self._await_server_close()
        self._end(f"connection closed: {reason}", 1000, by_us=True)
        await trio.aclose_forcefully(self._wire)

    # --- internals -------------------------------------------------------

    def _end(self, reason: str, code: int | None, *, by_us: bool = False) -> ConnectionClosed | ConnectionBroken:
        """Record why the connection is over (the first reason wins) and
        return the error to raise for it."""
        if self._ended is None:
            self._ended = (ConnectionClosed if by_us else ConnectionBroken)(reason, code)
        return type(self._ended)(self._ended.reason, self._ended.code)

    def _raise_if_ended(self) -> None:
        if self._ended is not None:
            raise type(self._ended)(self._ended.reason, self._ended.code)

    async def _write(self, event: Event) -> None:
        async with self._send_lock:
            if not isinstance(event, CloseConnection):
                self._raise_if_ended()
            try:
                data = self._ws.send(event)
            except LocalProtocolError:
                # wsproto refuses to send once the server has started closing.
                raise self._end("connection closed by the server", None) from None
            try:
                await self._wire.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise self._broken() from exc

    async def _read_more(self) -> None:
        try:
            data = await self._wire.receive_some(RECEIVE_SIZE)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise self._broken() from exc
        if not data:
            await trio.aclose_forcefully(self._wire)
            raise self._end(
                f"{self.peer} closed the connection without a close frame", 1006
            )
        self._ws.receive_data(data)

    def _broken(self) -> ConnectionClosed | ConnectionBroken:
        if self._wire.stall_reason:
            return self._end(f"dropped the connection: {self._wire.stall_reason}", 1006)
        return self._end(f"the connection to {self.peer} broke", 1006)

    async def _on_event(self, event: Event) -> str | None:
        """Handle one event; the message it completes, if any."""
        if isinstance(event, Message):
            self._size += len(event.data)
            if self._size > self._max:
                self._parts, self._size = [], 0
                await self._refuse_too_large()
            self._parts.append(event.data)
            if not event.message_finished:
                return None
            parts, self._parts, self._size = self._parts, [], 0
            if isinstance(event, BytesMessage):
                try:
                    return b"".join(parts).decode("utf-8")  # type: ignore[arg-type]
                except UnicodeDecodeError:
                    await self.aclose("binary frames must hold UTF-8 text")
                    raise self._end("the server sent a binary frame that is not UTF-8", 1007) from None
            return "".join(parts)  # type: ignore[arg-type]
        if isinstance(event, Ping):
            await self._write(event.response())
        elif isinstance(event, CloseConnection):
            if self._ws.state is ConnectionState.OPEN:
                # wsproto reports a frame that broke the protocol this way:
                # fail the connection with its code (RFC 6455 §7.1.7).
                try:
                    await self._write(CloseConnection(code=event.code, reason=truncate_close_reason(event.reason or "")))
                except (ConnectionClosed, ConnectionBroken):
                    pass
                await trio.aclose_forcefully(self._wire)
                raise self._end(f"the server broke the WebSocket protocol: {event.reason}", event.code)
            if self._ws.state is ConnectionState.REMOTE_CLOSING:
                try:
                    await self._write(event.response())
                except (ConnectionClosed, ConnectionBroken):
                    pass
            await trio.aclose_forcefully(self._wire)
            reason = event.reason or f"the server closed the connection (code {event.code})"
            raise self._end(reason, event.code)
        return None  # Pong, and anything else: nothing to do

    async def _refuse_too_large(self) -> None:
        message = f"a message from {self.peer} was over the limit of {self._max} bytes"
        try:
            await self._write(CloseConnection(code=1009, reason="message too big"))
        except (ConnectionClosed, ConnectionBroken):
            pass
        self._end(f"connection closed: {message}", 1009)
        await trio.aclose_forcefully(self._wire)
        raise MessageTooLarge(message + "; the connection is closed (1009)")

    async def _await_server_close(self) -> None:
        async with self._receive_lock:
            while self._ws.state is not ConnectionState.CLOSED:
                try:
                    data = await self._wire.receive_some(RECEIVE_SIZE)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return
                if not data:
                    return
                self._ws.receive_data(data)
                for _ in self._ws.events():
                    pass  # messages after our close are dropped; the close answer ends it
