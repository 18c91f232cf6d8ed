"""The server half: listen, admit, and run the handler for each WebSocket.

One nursery, opened in :func:`serve`, owns the listeners and every
connection. Each TCP connection goes through :meth:`_Server.handle_connection`
from start to end:

1. the HTTP front reads the request head (TLS handshake included), bounded by
   ``handshake_timeout``; a plain request is answered there (``/health``…),
   a malformed one with 400/414/431;
2. admission (:mod:`.admission`) refuses the upgrade with 403, 429 (too many
   failed tokens from this address), 401 or 429 (per-user cap) — before any
   handler runs — or accepts it with a 101;
3. a per-connection nursery owns the reader (:class:`.connection.ServerStream`,
   wsproto underneath) and the keepalive task, and
   :func:`gemini_split.transport.run_handler` runs the handler; then the
   nursery is cancelled and the socket closed.

Nothing a connection does escapes ``handle_connection`` except cancellation,
so one connection can never take the listener or another connection down.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any
from urllib.parse import parse_qsl

import trio
from wsproto.utilities import generate_accept_token

from gemini_split._trio_util import serve_listeners_quietly
from gemini_split.errors import ConfigurationError, GeminiSplitError
from gemini_split.transport.throttle import FailedAuthThrottle, client_source, forwarded_https, parse_networks
from gemini_split.transport import (
    is_loopback_host,
    ConnectionBroken,
    ConnectionClosed,
    ConnectionHandler,
    Principal,
    ServeOptions,
    TransportError,
    run_handler,
)

from .address import WebSocketAddress
from .admission import ConnectionCounter, host_refusal, loopback_host_names, origin_refusal, presented_token
from .connection import ServerStream
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
from .wire import FrameSafeStream

log = logging.getLogger(__name__)


class _Refusal(Exception):
    """Admission said no: the status, the reason (for the log and the body)
    and extra headers."""

    def __init__(self, status: int, reason: str, headers: list[tuple[str, str]] | None = None,
                 source: str | None = None):
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.headers = headers or []
        #: The client a trusted proxy reported, when it is not the peer.
        self.source = source


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
    if is_loopback_host(where.host or "0.0.0.0") and options.authenticate is None:
        # Without auth a page that reached us as its own origin by DNS
        # rebinding would be a client; with auth it has no token, and a
        # proxy passing its public name in Host needs no extra flag.
        server.host_names = loopback_host_names(options.allowed_origins)
    async with trio.open_nursery() as nursery:
        # Not trio.serve_listeners: at the file-descriptor limit it logs a
        # traceback every 0.1 s.
        await nursery.start(partial(serve_listeners_quietly, server.handle_connection, listeners,
                                    where=f"{where.host or '0.0.0.0'}:{port}", logger=log, handler_nursery=nursery))
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
        self.throttle = FailedAuthThrottle(
            burst=int(extra.get("auth_failure_burst", 10)),
            refill_per_second=float(extra.get("auth_failure_refill_per_second", 1 / 6)),
        )
        #: On a loopback address: the names a request's Host may give
        #: (admission.host_refusal); None: any (not checked).
        self.host_names: frozenset[str] | None = None
        try:
            self.trusted_proxies = parse_networks(options.trusted_proxies)
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None

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
                log.info("bad HTTP request from %s: %s (HTTP %d)", peer, exc, exc.status,
                         extra={"refusal": "bad HTTP request"})
                await tcp.send_all(plain_response(exc.status, text(f"bad request: {exc}")))
                return
        if waiting.cancelled_caught:
            log.info("%s sent no request within %gs; closed", peer, self.handshake_timeout)
            return
        if head is None:
            return
        if self.host_names is not None:
            refused = host_refusal(head.header("host"), self.host_names)
            if refused is not None:
                log.warning("refused a request from %s on %s: %s (HTTP 421)", peer, head.path, refused,
                            extra={"refusal": "HTTP 421"})
                with trio.move_on_after(self.handshake_timeout):
                    await tcp.send_all(plain_response(421, text(refused)))
                return
        web = self.options.extra.get("web")
        if not head.wants_websocket and web is not None:
            # serve --web: the page, pairing, /api/* (gemini_split/web/face.py).
            secure = self._secure(tcp, head)
            with trio.move_on_after(self.handshake_timeout):
                host = _host_of(tcp)
                web_response = await web.answer(
                    head, tcp, secure=secure, peer_host=host,
                    source=lambda: client_source(host, forwarded_for=head.header("x-forwarded-for"),
                                                 real_ip=head.header("x-real-ip"), trusted=self.trusted_proxies))
                if web_response is not None:
                    log.debug("%s %s from %s: HTTP %s", head.method, head.path, peer, web_response[9:12].decode())
                    await tcp.send_all(web_response)
                    return
        if not head.wants_websocket:
            status, response = answer_plain_request(head, self.options.health, ready=self.options.ready,
                                                    metrics=self.options.metrics)
            log.debug("%s %s from %s: HTTP %d", head.method, head.path, peer, status)
            with trio.move_on_after(self.handshake_timeout):
                await tcp.send_all(response)
            return
        problem = websocket_handshake_problem(head)
        if problem is not None:
            status, message, headers = problem
            log.info("refused an upgrade from %s: %s (HTTP %d)", peer, message, status,
                     extra={"refusal": "bad upgrade"})
            with trio.move_on_after(self.handshake_timeout):
                await tcp.send_all(plain_response(status, text(message), headers=headers))
            return
        browser = None
        try:
            secure = self._secure(tcp, head)
            if web is not None and web.is_browser_request(head, secure):
                principal, browser = await self._admit_browser(web, head, _host_of(tcp))
            else:
                principal = self._admit(head, _host_of(tcp), secure=secure)
        except _Refusal as refusal:
            await self._refuse(tcp, peer, head, refusal)
            return
        with self.connections.hold(principal) as admitted:
            if not admitted:
                assert principal is not None
                await self._refuse(tcp, peer, head, _Refusal(
                    429, f"too many connections for user {principal.user_id!r} "
                         f"(limit {self.connections.limit})"))
                return
            with trio.move_on_after(self.handshake_timeout) as accepting:
                await tcp.send_all(_switching_protocols(head))
            if accepting.cancelled_caught:
                return
            if browser is None:
                await self._run(tcp, head, peer, principal)
                return
            # A paired browser's connection ends the moment it is revoked.
            with trio.CancelScope() as scope:
                release = web.hold_socket(browser.id, scope)
                try:
                    await self._run(tcp, head, peer, principal, paired_browser=browser.id)
                finally:
                    release()
            if scope.cancelled_caught:
                log.info("closed the connection from %s: browser %s was signed out", peer, browser.id)

    async def _run(self, tcp: trio.abc.Stream, head: RequestHead, peer: str, principal: Principal | None, *,
                   paired_browser: str | None = None) -> None:
        wire = FrameSafeStream(tcp, stall_timeout=self.stall_timeout, grace=self.close_timeout)
        stream = ServerStream(
            wire, peer=peer, principal=principal,
            max_message_size=self.options.max_message_size,
            close_timeout=self.close_timeout,
            message_queue_size=self.message_queue_size,
        )
        stream.paired_browser = paired_browser
        stream.private = isinstance(tcp, trio.SSLStream) or _is_loopback_peer(tcp)
        stream.query = query_parameters(head.target)
        # Late-joiner replay (issue 11), as the seeds' ACP bridge takes it.
        stream.replay_query = {k: v for k, v in stream.query.items() if k in ("limit", "since", "before")}
        log.info(
            "accepted a WebSocket from %s on %s%s",
            peer, head.path, f" for user {principal.user_id}" if principal else "",
        )
        # This nursery owns the connection's reader and keepalive tasks.
        async with trio.open_nursery() as nursery:
            await nursery.start(stream.run, head.rest)
            nursery.start_soon(self._keep_alive, stream)
            await run_handler(self.handler, stream)
            nursery.cancel_scope.cancel()
        log.info("connection from %s ended: %s", peer, stream.ending(),
                 extra={"refusal": "WebSocket protocol"} if stream.refused else None)

    def _secure(self, tcp: trio.abc.Stream, head: RequestHead) -> bool:
        """Whether the browser's origin is https: our own TLS, or a trusted
        proxy's ``X-Forwarded-Proto: https`` (``--trusted-proxy``), so a
        page behind a TLS-terminating proxy is on its own origin and its
        cookie is ``Secure``."""
        return isinstance(tcp, trio.SSLStream) or forwarded_https(
            _host_of(tcp), head.header("x-forwarded-proto"), self.trusted_proxies)

    def _admit(self, head: RequestHead, host: str, *, secure: bool = False) -> Principal | None:
        """The principal to run the connection as (None when auth is off);
        raises _Refusal (403, 401, 429 with Retry-After, 500).

        The token is always checked: a correct one is accepted even from an
        address that has run out of tries (someone else's wrong guesses never
        lock a user out, e.g. behind one proxy); a wrong one from such an
        address gets 429 instead of 401."""
        refusal = origin_refusal(head.header("origin"), self.options.allowed_origins,
                                 own_host=head.header("host"), secure=secure)
        if refusal is not None:
            raise _Refusal(403, refusal)
        if self.options.authenticate is None:
            return None
        token = presented_token(head.header("authorization"), head.target)
        try:
            principal = self.options.authenticate(token)
        except Exception:
            log.exception("the authenticator failed for a request from %s", host)
            raise _Refusal(500, "internal error while checking the token") from None
        if principal is not None:
            return principal
        source = None
        if token:
            source = client_source(host, forwarded_for=head.header("x-forwarded-for"),
                                   real_ip=head.header("x-real-ip"), trusted=self.trusted_proxies)
            now = trio.current_time()
            wait = self.throttle.retry_after(source, now)
            if not wait:
                self.throttle.failed(source, now)
            else:
                raise _Refusal(
                    429, f"too many failed tokens from this address; retry in {wait}s",
                    [("Retry-After", str(wait))], source=source if source != host else None,
                )
        raise _Refusal(
            401, "invalid token" if token else "a token is required",
            [("WWW-Authenticate", 'Bearer realm="gemini-split"')], source=source if source != host else None,
        )

    async def _admit_browser(self, web: Any, head: RequestHead, host: str) -> tuple[Principal | None, Any]:
        """A WebSocket from the server's own page (serve --web): admitted by
        its ``gs_browser`` cookie, never a token (the page has none); raises
        _Refusal (401, 429; 503 when the store of paired browsers cannot be
        reached). Failed cookies count against the address as failed tokens
        do."""
        try:
            with trio.fail_after(self.handshake_timeout):
                browser = await web.admit_cookie(head)
        except (GeminiSplitError, trio.TooSlowError) as exc:
            log.warning("cannot check a browser's cookie: %s", exc)
            raise _Refusal(503, "the server cannot check this browser's sign-in now; try again shortly",
                           [("Retry-After", "5")]) from None
        if browser is not None:
            if not browser.user:
                return None, browser
            return Principal(browser.user, tuple(browser.permissions)), browser
        source = client_source(host, forwarded_for=head.header("x-forwarded-for"),
                               real_ip=head.header("x-real-ip"), trusted=self.trusted_proxies)
        now = trio.current_time()
        wait = self.throttle.retry_after(source, now)
        if wait:
            raise _Refusal(429, f"too many failed sign-ins from this address; retry in {wait}s",
                           [("Retry-After", str(wait))])
        if (head.header("cookie") or ""):
            self.throttle.failed(source, now)
        raise _Refusal(401, "this browser is not signed in: pair it (gemini-split pair) and open the link")

    async def _refuse(self, tcp: trio.abc.Stream, peer: str, head: RequestHead, refusal: _Refusal) -> None:
        # head.path, never head.target: the query may hold ?auth=TOKEN.
        log.warning(
            "refused a WebSocket from %s%s on %s: %s (HTTP %d)", peer,
            f" (client {refusal.source}, as the proxy says)" if refusal.source else "", head.path, refusal.reason,
            refusal.status, extra={"refusal": f"HTTP {refusal.status}"},
        )
        with trio.move_on_after(self.handshake_timeout):
            await tcp.send_all(plain_response(refusal.status, text(refusal.reason), headers=refusal.headers))

    async def _keep_alive(self, stream: ServerStream) -> None:
        interval = self.options.keepalive_interval
        timeout = self.options.keepalive_timeout
        if interval <= 0 or timeout <= 0:
            return
        while True:
            await trio.sleep(interval)
            with trio.move_on_after(timeout) as waiting:
                try:
                    await stream.ping()
                except (ConnectionClosed, ConnectionBroken):
                    return
            if waiting.cancelled_caught:
                reason = f"no answer to a ping within {timeout:g}s"
                log.warning("dropping the connection from %s: %s", stream.peer, reason)
                await stream.abort(reason)
                return


def query_parameters(target: str) -> dict[str, str]:
    """The request's query parameters (the first of each name), without
    ``auth`` (a token is never handed on): e.g. the ACP bridge's
    ``?limit=N&since=MS``. Bounded: at most 32 parameters are read."""
    query = target.partition("?")[2]
    params: dict[str, str] = {}
    for name, value in parse_qsl(query, keep_blank_values=True, max_num_fields=None)[:32]:
        if name != "auth":
            params.setdefault(name, value)
    return params


def _switching_protocols(head: RequestHead) -> bytes:
    """The 101 answer accepting ``head``'s upgrade: no subprotocol, no
    extension (permessage-deflate offers are declined by not answering)."""
    accept = generate_accept_token((head.header("sec-websocket-key") or "").strip().encode("latin-1"))
    return (
        b"HTTP/1.1 101 Switching Protocols\r\n"
        b"Upgrade: websocket\r\n"
        b"Connection: Upgrade\r\n"
        b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n"
    )


def _host_of(stream: trio.abc.Stream) -> str:
    inner = getattr(stream, "transport_stream", stream)
    try:
        return str(inner.socket.getpeername()[0])
    except (AttributeError, OSError, IndexError):
        return "?"


def _is_loopback_peer(stream: trio.abc.Stream) -> bool:
    """Whether the TCP peer is on this machine (a proxy in front of us
    included: the client refuses to send a secret over ws:// elsewhere)."""
    inner = getattr(stream, "transport_stream", stream)
    try:
        host = inner.socket.getpeername()[0]
    except (AttributeError, OSError, IndexError):
        return False
    return is_loopback_host(host)


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
