"""The WebSocket transport: ``ws://HOST:PORT`` and ``wss://HOST:PORT``.

One protocol message per WebSocket text frame. The server is trio-websocket
behind a small HTTP front; the client drives wsproto itself (see
:mod:`.client` for why). Registered through the ``gemini_split.transports``
entry points ``ws`` and ``wss`` like any third-party transport.

Server rules, applied to every connection before any handler runs
-----------------------------------------------------------------

Plain HTTP (no ``Upgrade: websocket``)
    ``GET /health`` answers 200 ``application/json`` with ``options.health()``
    — no auth, nothing else revealed. Other GETs get 426, other methods 405.

Origin (403)
    A request without an ``Origin`` header (any non-browser client) passes.
    With one: if ``allowed_origins`` is non-empty the origin must equal one of
    them (scheme://host[:port], case-insensitive; ``*`` allows any); if it is
    empty, only an origin whose host is loopback (``localhost``,
    ``127.0.0.0/8``, ``[::1]``) passes. So a web page elsewhere cannot drive
    a user's browser into a local daemon.

Token (401)
    When ``options.authenticate`` is set, the token is taken from
    ``Authorization: Bearer TOKEN``, else from an ``?auth=TOKEN`` query
    parameter (for clients that cannot set headers), and given to
    ``authenticate``; None refuses. The stream's ``principal`` is what it
    returned. Logs show the path without its query, never a token.

Per-user cap (429)
    With ``max_connections_per_user`` > 0, a principal's open connections
    are counted and one over the cap is refused. Without auth nothing is
    counted.

Limits
    A message over ``max_message_size`` closes that connection with 1009 and
    a logged reason; the handler's ``receive`` raises MessageTooLarge (the
    client's raises ConnectionBroken with code 1009). Every
    ``keepalive_interval`` seconds the server pings; no pong within
    ``keepalive_timeout`` drops the connection, so the handler's next call
    raises ConnectionBroken and its tasks end. Sends are never queued: a send
    waits for the socket (back-pressure), and one the peer accepts no bytes of
    for ``keepalive_timeout`` drops the connection. A frame once begun is
    always written whole, even if the sending task is cancelled. Pongs are
    read by the connection's reader, which stops once
    ``message_queue_size`` messages wait unreceived: a handler keeps a
    receive loop running, as a protocol session does.

Closing
    ``aclose(reason)`` sends a close frame whose reason (cut to 123 bytes)
    the client's ConnectionBroken carries. A handler cancelled because the
    server stops has its stream closed with "server shutting down", and the
    server waits at most 0.5 s for each client's answer.

``ServeOptions.extra`` may set ``handshake_timeout`` (10 s: time to send the
request), ``close_timeout`` (2 s: wait for the peer's close answer, also the
grace a cancelled send gets to finish its frame) and ``message_queue_size``
(8 incoming messages held for a handler not receiving). ``ConnectOptions.extra``
may set ``headers`` (extra upgrade-request headers), ``stall_timeout`` (60 s)
and ``close_timeout``.
"""

from __future__ import annotations

from typing import Any

import trio

from gemini_split.transport import (
    ConnectionHandler,
    ConnectOptions,
    MessageStream,
    ServeOptions,
    Transport,
)


class WebSocketTransport(Transport):
    name = "WebSocket"

    async def open_connection(self, address: str, options: ConnectOptions) -> MessageStream:
        from .client import open_websocket_stream

        return await open_websocket_stream(address, options)

    async def serve(
        self,
        address: str,
        handler: ConnectionHandler,
        options: ServeOptions,
        *,
        task_status: Any = trio.TASK_STATUS_IGNORED,
    ) -> None:
        # Imported here so a client never pays for trio-websocket.
        from .server import serve

        await serve(address, handler, options, task_status=task_status)


transport = WebSocketTransport()
