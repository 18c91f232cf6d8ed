"""The WebSocket transport: ``ws://HOST:PORT`` and ``wss://HOST:PORT``.

One protocol message per WebSocket text frame. Both ends drive wsproto (the
sans-IO WebSocket engine) from Trio: the server behind a small HTTP front
(:mod:`.front`) with one reader task per connection (:mod:`.connection`), the
client from its calling tasks (see :mod:`.client` for why). Registered through the ``gemini_split.transports``
entry points ``ws`` and ``wss`` like any third-party transport.

Server rules, applied to every connection before any handler runs
-----------------------------------------------------------------

Plain HTTP (no ``Upgrade: websocket``)
    ``GET /health`` answers 200 ``application/json`` with ``options.health()``
    — no auth, nothing else revealed. Other GETs get 426, other methods 405.

Host (421), on a loopback address without auth only
    Every request's ``Host`` must be ``localhost`` or a loopback address
    (any port, or none: a proxy on this machine may drop it) or the host of
    an ``allowed_origins`` entry; no ``Host`` passes (not a browser). So a
    DNS-rebinding page (``attacker.example`` pointed at 127.0.0.1) reads
    nothing from a local server that would take it for a client. With auth
    on, such a page has no token (and no cookie: it is another site), so
    Host is not checked and a proxy may pass its public name.

Origin (403)
    A request without an ``Origin`` header (any non-browser client) passes.
    With one, it must be the server's own origin (``http(s)://`` + the
    request's ``Host``; https under TLS) or equal one of ``allowed_origins``
    (scheme://host[:port], case-insensitive, default ports filled in; ``*``
    allows any). So a page anywhere else, another local port included,
    cannot drive a user's browser into the server.

Malformed requests (400, 414, 431)
    Garbage, or Content-Length with Transfer-Encoding → 400; a request line
    over 8 KiB → 414; a request head over 16 KiB → 431 — however the bytes
    arrive, and before any auth.

Failed tokens (429 + Retry-After)
    Per client address (IPv6: per /64), 10 wrong tokens may fail at once,
    then one more every 6 s; meanwhile that address's upgrades are refused
    with 429 and ``Retry-After`` before any token is checked. Correct tokens
    spend nothing; other addresses are never slowed.

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

Frames (RFC 6455)
    A frame that breaks the protocol gets a close frame with its code, then
    the TCP close: 1002 (unmasked, RSV bits, reserved opcode, stray
    continuation, fragmented or >125-byte control frame, bad close code),
    1007 (text that is not UTF-8). One log line says why; never a traceback.

Limits
    A message over ``max_message_size`` closes that connection with 1009 —
    decided on the frame header, before its payload is read — and a logged
    reason; the handler's ``receive`` raises MessageTooLarge (the
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
grace a cancelled send gets to finish its frame), ``message_queue_size``
(8 incoming messages held for a handler not receiving),
``auth_failure_burst`` (10) and ``auth_failure_refill_per_second`` (1/6). ``ConnectOptions.extra``
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
        # Imported here so a client never pays for the server's modules.
        from .server import serve

        await serve(address, handler, options, task_status=task_status)


transport = WebSocketTransport()
