"""The server half: listen, admit, and run the handler for each WebSocket.

One nursery, opened in :func:`serve`, owns the listeners and every
connection. Each TCP connection goes through :meth:`_Server.handle_connection`
from start to end:

1. the HTTP front reads the request head (TLS handshake included), bounded by
   ``handshake_timeout``; a plain request is answered there (``/health``…);
2. an upgrade is handed, bytes unread, to trio-websocket's
   ``wrap_server_stream`` in a per-connection nursery that owns the reader
   task and the keepalive task;
3. admission (:mod:`.admission`) accepts the upgrade or rejects it with 403,
   401 or 429 — before any handler runs;
4. :func:`gemini_split.transport.run_handler` runs the handler, then the
   per-connection nursery is cancelled and the socket closed.

Nothing a connection does escapes ``handle_connection`` except cancellation,
so one connection can never take the listener or another connection down.
"""

from __future__ import annotations

import logging
import math
from functools import partial
from typing import Any

import trio
import trio_websocket

from gemini_split.errors import ConfigurationError
from gemini_split.transport import (
    ConnectionBroken,
    ConnectionClosed,
    ConnectionHandler,
    MessageStream,
    MessageTooLarge,
    Principal,
    ServeOptions,
    TransportError,
    run_handler,
)

from .address import WebSocketAddress
from .admission import ConnectionCounter, origin_refusal, presented_token
from .front import (
    BadRequest,
    RequestHead,
    answer_plain_request,
    plain_response,
    read_request_head,
    text,
    websocket_handshake_problem,
)
from .tls import server_context
from .wire import RECEIVE_SIZE, FrameSafeStream, truncate_close_reason

log = logging.getLogger(__name__)

#: Seconds a stopping server waits for each client's answering close frame.
SHUTDOWN_CLOSE_WAIT = 0.5
#: The close reason a client sees when the server stops under it.
SHUTDOWN_REASON = "server shutting down"


class _Refused:
    """The upgrade was rejected; nothing more to do."""


_REFUSED = _Refused()

# trio-websocket closes with this text when a message is over its limit.
_TOO_BIG_PREFIX = "Exceeded maximum message size"


async def serve(
    address: str,
    handler: ConnectionHandler,
    options: ServeOptions,
    *,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    """See :meth:`gemini_split.transport.Transport.serve`. With
    ``options.tls_cert`` the server speaks wss:// whatever the scheme asked."""
    where = WebSocketAddress.parse(address)
    if options.tls_cert:
        tls_context = server_context(options.tls_cert, options.tls_key)
    elif where.secure:
        raise ConfigurationError(
            f"serving {where.public} needs a TLS certificate: pass --tls-cert and --tls-key"
        )
    else:
        tls_context = None
    try:
        listeners: list[Any] = await trio.open_tcp_listeners(where.port, host=where.host or None)
    except OSError as exc:
        raise TransportError(
            f"cannot listen on {where.netloc}: {exc.strerror or exc}"
        ) from exc
    if where.port == 0:
        # Port 0 on several interfaces gives each its own port: keep one.
        for extra in listeners[1:]:
            await extra.aclose()
        listeners = listeners[:1]
    port = listeners[0].socket.getsockname()[1]
    if tls_context is not None:
        listeners = [trio.SSLListener(l, tls_context, https_compatible=True) for l in listeners]
    scheme = "wss" if tls_context is not None else "ws"
    bound = WebSocketAddress(scheme, where.host or "0.0.0.0", port).public
    server = _Server(handler, options)
    async with trio.open_nursery() as nursery:
        await nursery.start(
            partial(trio.serve_listeners, server.handle_connection, listeners, handler_nursery=nursery)
        )
        log.info(
            "listening on %s (auth %s, max message %d bytes)",
            bound,
            "on" if options.authenticate else "off",
            options.max_message_size,
        )
        task_status.started(bound)


class _Server:
    def __init__(self, handler: ConnectionHandler, options: ServeOptions):
        self.handler = handler
        self.options = options
        extra = options.extra
        #: Seconds a new connection has to send its request (and finish TLS).
        self.handshake_timeout = float(extra.get("handshake_timeout", 10.0))
        #: Seconds a close waits for the peer's answering close frame.
        self.close_timeout = float(extra.get("close_timeout", 2.0))
        #: Whole incoming messages queued for a handler that is not receiving.
        self.message_queue_size = int(extra.get("message_queue_size", 8))
        self.stall_timeout = options.keepalive_timeout if options.keepalive_timeout > 0 else 3600.0
        self.connections = ConnectionCounter(options.max_connections_per_user)

    async def handle_connection(self, tcp: trio.abc.Stream) -> None:
        """Serve one TCP connection start to end. Raises nothing but Cancelled."""
        peer = _peer_of(tcp)
        try:
            await self._serve(tcp, peer)
        except* (trio.BrokenResourceError, trio.ClosedResourceError) as group:
            # TLS handshake failures and peers vanishing land here: routine.
            log.debug("connection from %s broke: %s", peer, _describe(group))
        except* Exception:
            log.exception("connection from %s failed", peer)
        finally:
            await trio.aclose_forcefully(tcp)

    async def _serve(self, tcp: trio.abc.Stream, peer: str) -> None:
        with trio.move_on_after(self.handshake_timeout) as waiting:
            try:
                head = await read_request_head(tcp)
            except BadRequest as exc:
                log.info("bad HTTP request from %s: %s", peer, exc)
                await tcp.send_all(plain_response(400, text("bad request")))
                return
        if waiting.cancelled_caught:
            log.info("%s sent no request within %gs; closed", peer, self.handshake_timeout)
            return
        if head is None:
            return
        if not head.wants_websocket:
            status, response = answer_plain_request(head, self.options.health)
            log.debug("%s %s from %s: HTTP %d", head.method, head.path, peer, status)
            with trio.move_on_after(self.handshake_timeout):
                await tcp.send_all(response)
            return
        problem = websocket_handshake_problem(head)
        if problem is not None:
            status, message, headers = problem
            log.info("refused an upgrade from %s: %s (HTTP %d)", peer, message, status)
            with trio.move_on_after(self.handshake_timeout):
                await tcp.send_all(plain_response(status, text(message), headers=headers))
            return
        wire = FrameSafeStream(
            tcp, stall_timeout=self.stall_timeout, grace=self.close_timeout, prefix=head.received
        )
        # This nursery owns the connection's reader and keepalive tasks.
        async with trio.open_nursery() as nursery:
            await self._serve_websocket(nursery, wire, head, peer)
            nursery.cancel_scope.cancel()

    async def _serve_websocket(
        self, nursery: trio.Nursery, wire: FrameSafeStream, head: RequestHead, peer: str
    ) -> None:
        principal: Principal | None | _Refused = _REFUSED
        with trio.move_on_after(self.handshake_timeout):
            request = await trio_websocket.wrap_server_stream(
                nursery,
                wire,
                message_queue_size=self.message_queue_size,
                max_message_size=self.options.max_message_size,
                receive_buffer_size=RECEIVE_SIZE,
            )
            principal = await self._admit(request, head, peer)
        if isinstance(principal, _Refused):
            return
        with self.connections.hold(principal) as admitted:
            with trio.move_on_after(self.handshake_timeout) as accepting:
                if not admitted:
                    assert principal is not None
                    await self._refuse(
                        request, peer, head, 429,
                        f"too many connections for user {principal.user_id!r} "
                        f"(limit {self.connections.limit})",
                    )
                    return
                connection = await request.accept()
            if accepting.cancelled_caught:
                return
            stream = ServerStream(
                connection, wire, peer=peer, principal=principal,
                max_message_size=self.options.max_message_size,
                close_timeout=self.close_timeout,
            )
            log.info(
                "accepted a WebSocket from %s on %s%s",
                peer, head.path, f" for user {principal.user_id}" if principal else "",
            )
            nursery.start_soon(self._keep_alive, stream, connection)
            await run_handler(self.handler, stream)
            log.info("connection from %s ended: %s", peer, stream.ending())

    async def _admit(
        self, request: trio_websocket.WebSocketRequest, head: RequestHead, peer: str
    ) -> Principal | None | _Refused:
        """The principal to run the connection as (None when auth is off), or
        _REFUSED once the upgrade has been rejected (403, 401)."""
        refusal = origin_refusal(head.header("origin"), self.options.allowed_origins)
        if refusal is not None:
            await self._refuse(request, peer, head, 403, refusal)
            return _REFUSED
        if self.options.authenticate is None:
            return None
        token = presented_token(head.header("authorization"), head.target)
        try:
            principal = self.options.authenticate(token)
        except Exception:
            log.exception("the authenticator failed for a request from %s", peer)
            await self._refuse(request, peer, head, 500, "internal error while checking the token")
            return _REFUSED
        if principal is None:
            await self._refuse(
                request, peer, head, 401,
                "invalid token" if token else "a token is required",
                [(b"WWW-Authenticate", b'Bearer realm="gemini-split"')],
            )
            return _REFUSED
        return principal

    async def _refuse(
        self,
        request: trio_websocket.WebSocketRequest,
        peer: str,
        head: RequestHead,
        status: int,
        reason: str,
        headers: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        # head.path, never head.target: the query may hold ?auth=TOKEN.
        log.warning("refused a WebSocket from %s on %s: %s (HTTP %d)", peer, head.path, reason, status)
        await request.reject(
            status,
            extra_headers=[(b"Content-Type", b"text/plain; charset=utf-8"), *(headers or [])],
            body=text(reason),
        )

    async def _keep_alive(
        self, stream: ServerStream, connection: trio_websocket.WebSocketConnection
    ) -> None:
        interval = self.options.keepalive_interval
        timeout = self.options.keepalive_timeout
        if interval <= 0 or timeout <= 0:
            return
        while True:
            await trio.sleep(interval)
            with trio.move_on_after(timeout) as waiting:
                try:
                    await connection.ping()
                except trio_websocket.ConnectionClosed:
                    return
            if waiting.cancelled_caught:
                reason = f"no answer to a ping within {timeout:g}s"
                log.warning("dropping the connection from %s: %s", stream.peer, reason)
                await stream.abort(reason)
                return


class ServerStream(MessageStream):
    """A server's end of one WebSocket (a trio-websocket connection)."""

    def __init__(
        self,
        connection: trio_websocket.WebSocketConnection,
        wire: FrameSafeStream,
        *,
        peer: str,
        principal: Principal | None,
        max_message_size: int,
        close_timeout: float,
    ):
        self._connection = connection
        self._wire = wire
        self.peer = peer
        self.principal = principal
        self._max = max_message_size
        self._close_timeout = close_timeout
        self._closed = False  # aclose() was called
        #: Why our side ended the connection (aclose, keepalive), if it did first.
        self._local_reason: str | None = None
        self._too_large_reported = False

    async def send(self, message: str) -> None:
        if self._closed:
            raise self._closed_error(None)
        try:
            await self._connection.send_message(message)
        except trio_websocket.ConnectionClosed as exc:
            raise self._closed_error(exc.reason) from exc

    async def receive(self) -> str:
        if self._closed:
            raise self._closed_error(None)
        try:
            message = await self._connection.get_message()
        except trio_websocket.ConnectionClosed as exc:
            if _is_our_size_refusal(exc.reason) and not self._too_large_reported:
                self._too_large_reported = True
                log.warning(
                    "closed the connection from %s with code 1009: a message was "
                    "over the limit of %d bytes", self.peer, self._max,
                )
                raise MessageTooLarge(
                    f"a message from {self.peer} was over the limit of {self._max} "
                    "bytes; the connection is closed (1009)"
                ) from None
            raise self._closed_error(exc.reason) from exc
        if isinstance(message, bytes):
            try:
                return message.decode("utf-8")
            except UnicodeDecodeError:
                await self.aclose("binary frames must hold UTF-8 text")
                raise ConnectionBroken("the client sent a binary frame that is not UTF-8", 1007) from None
        return message

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
        if self._local_reason is None and self._connection.closed is None:
            self._local_reason = reason
        wait = min(self._close_timeout, SHUTDOWN_CLOSE_WAIT) if cancelled else self._close_timeout
        with trio.CancelScope(shield=True, deadline=trio.current_time() + wait):
            await self._connection.aclose(1000, truncate_close_reason(reason))

    async def abort(self, reason: str) -> None:
        """End the connection at once, without a close handshake (dead peer)."""
        if self._local_reason is None:
            self._local_reason = reason
        await trio.aclose_forcefully(self._wire)

    def ending(self) -> str:
        """Why the connection ended, for the log."""
        if self._wire.stall_reason:
            return self._wire.stall_reason
        if self._local_reason is not None:
            return self._local_reason
        closed = self._connection.closed
        if closed is None:
            return "closed"
        if closed.code == 1006:
            return "the connection broke (no close frame)"
        if _is_our_size_refusal(closed):
            return f"{closed.reason} (1009)"
        said = f": {closed.reason}" if closed.reason else ""
        return f"closed by the client ({closed.code}{said})"

    def _closed_error(self, reason: trio_websocket.CloseReason | None) -> ConnectionClosed | ConnectionBroken:
        """ConnectionClosed once our aclose() ran; otherwise the client, the
        network, or a dead or stalled peer ended it: ConnectionBroken."""
        if self._closed:
            return ConnectionClosed(self._local_reason or "connection closed", 1000)
        if self._wire.stall_reason:
            return ConnectionBroken(f"dropped the connection: {self._wire.stall_reason}", 1006)
        if self._local_reason is not None:
            return ConnectionBroken(self._local_reason, 1006)
        reason = reason or self._connection.closed
        if reason is None:
            return ConnectionBroken("connection closed")
        if reason.code == 1006:
            return ConnectionBroken("the connection broke (closed without a close frame)", 1006)
        return ConnectionBroken(
            reason.reason or f"the client closed the connection (code {reason.code})", reason.code
        )


def _is_our_size_refusal(reason: trio_websocket.CloseReason | None) -> bool:
    return (
        reason is not None
        and reason.code == 1009
        and (reason.reason or "").startswith(_TOO_BIG_PREFIX)
    )


def _peer_of(stream: trio.abc.Stream) -> str:
    inner = getattr(stream, "transport_stream", stream)
    try:
        host, port, *_ = inner.socket.getpeername()
    except (AttributeError, OSError):
        return "?"
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _describe(group: BaseExceptionGroup) -> str:
    first = group.exceptions[0]
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    cause = first.__cause__
    return f"{first}" + (f" ({cause})" if cause else "")
