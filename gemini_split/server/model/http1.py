"""The model's HTTP/1.1 client: h11 over Trio's sockets, connections kept alive.

:class:`Http1Client` sends a model request (a ``POST`` with its whole body)
and hands back the response as it streams in (:class:`Http1Response`). It
is what httpx and httpcore do for such a request, cut to what a server
streaming model answers needs: HTTP/1.1 only, no cap on concurrent
requests (sessions bound them), idle connections kept alive per origin and
reused newest first. h11 writes the request and parses the response (and
:mod:`.h11_chunks` merges a streamed body's chunks, as under httpcore);
what the wire carries differs from httpx's only in the headers httpx adds
by default (``Accept``, ``Accept-Encoding``, ``Connection``).

Why not httpx: measured with 1,000 concurrent streams against the fake
Gemini, the CPU to the first byte of every answer was 1.44 ms a request
through httpx (1.14 ms over many smaller pools), 0.70 ms through httpx with
this module's connections as its transport, and 0.42 ms here
(docs/performance.md): httpx's request and response models, its pool's walk
over every connection and a timeout scope and exception-mapping context
per socket operation cost more than everything else of a streamed request.
:mod:`.gemini` still sends through httpx when a proxy is configured.

Contract:

- ``timeout``'s ``connect`` bounds the TCP connection and the TLS handshake,
  ``write`` sending the request, ``read`` each wait for response bytes
  (None: no bound).
- Errors are httpx's, so a caller handles both clients alike:
  ``ConnectError`` / ``ConnectTimeout`` before the request is sent,
  ``WriteError`` / ``WriteTimeout`` while sending it, ``ReadError`` /
  ``ReadTimeout`` after, ``RemoteProtocolError`` when the peer breaks HTTP.
  An idle connection the server has closed (it may close one at any time)
  is not reused: readable while idle means closed, as httpcore checks. If
  the server closes it just as a request reaches it, the request is sent
  once more on a new connection, provided nothing of an answer came back
  (a model request is safe to send again; GeminiModel's callers retry a
  broken one anyway); on a new connection that is a ``ReadError``.
- A connection goes back to the pool only when its response was read to
  the end and both sides may go on; a response closed early, cancelled or
  broken closes its connection.
- :meth:`Http1Client.close_idle` closes every idle connection now;
  :meth:`Http1Client.aclose` all of them (a response still being read then
  fails with ``ReadError``).
"""

from __future__ import annotations

import contextlib
import ipaddress
import select
import socket
import ssl
import time
from collections.abc import AsyncIterator
from typing import Any

import h11
import httpx2 as httpx
import trio

from gemini_split.dns_cache import shared_lookups

#: Bytes asked of the socket at a time (what httpcore asks too).
READ_SIZE = 64 * 1024
#: Bytes of an error response's body read at most (an API error is a few
#: hundred; a proxy's or a misconfigured endpoint's page can be anything).
MAX_ERROR_BODY = 1024 * 1024

Origin = tuple[bytes, str, int]


class Http1Client:
    """HTTP/1.1 to any origin; at most ``max_idle`` idle connections kept
    per origin, each for at most ``keepalive_expiry`` seconds.
    ``ssl_context`` is used for ``https`` origins."""

    def __init__(self, ssl_context: ssl.SSLContext, *, max_idle: int = 100, keepalive_expiry: float = 5.0):
        self._ssl_context = ssl_context
        self._max_idle = max_idle
        self._keepalive_expiry = keepalive_expiry
        #: origin → idle connections, oldest first.
        self._idle: dict[Origin, list[_Connection]] = {}
        #: Every open connection, idle or carrying a request.
        self._open: set[_Connection] = set()
        self._closed = False

    @property
    def connections(self) -> int:
        """Connections open now (idle or carrying a request)."""
        return len(self._open)

    @property
    def idle_connections(self) -> int:
        return sum(len(idle) for idle in self._idle.values())

    async def post(self, url: httpx.URL, headers: list[tuple[bytes, bytes]], body: bytes,
                   timeout: httpx.Timeout) -> Http1Response:
        """Send ``body`` to ``url`` with ``headers`` (``Host`` and
        ``Content-Length`` are added) and return the response once its head
        has come; read its body with :meth:`Http1Response.blocks` and always
        close it (:meth:`Http1Response.aclose`)."""
        if self._closed:
            raise httpx.ConnectError("the model's HTTP client is closed")
        scheme = url.raw_scheme
        origin = (scheme, url.raw_host.decode("ascii"), url.port or (443 if scheme == b"https" else 80))
        try:
            head = h11.Request(method=b"POST", target=url.raw_path,
                               headers=[(b"Host", url.netloc), *headers, (b"Content-Length", b"%d" % len(body))])
        except h11.LocalProtocolError as exc:
            raise httpx.LocalProtocolError(str(exc)) from None
        reused = self._take_idle(origin)
        if reused is not None:
            try:
                return await self._exchange(reused, head, body, timeout)
            except (httpx.WriteError, httpx.ReadError, httpx.RemoteProtocolError):
                if reused.answered_any_bytes:
                    raise
                # The server closed the kept-alive connection as we sent on
                # it: nothing was answered, so the request goes once more.
        connection = await self._connect(origin, timeout.connect)
        return await self._exchange(connection, head, body, timeout)

    async def _exchange(self, connection: _Connection, head: h11.Request, body: bytes,
                        timeout: httpx.Timeout) -> Http1Response:
        """Send the request on ``connection`` and read the response's head;
        the connection is closed if that fails."""
        try:
            conn = connection.h11
            await connection.send(conn.send(head) + conn.send(h11.Data(data=body)) + conn.send(h11.EndOfMessage()),
                                  timeout.write)
            while True:
                event = await connection.next_event(timeout.read)
                if type(event) is h11.Response:
                    break
                if type(event) is not h11.InformationalResponse:  # pragma: no cover - h11 allows nothing else here
                    raise httpx.RemoteProtocolError(f"unexpected {type(event).__name__} before the response")
        except BaseException:
            self._close(connection)
            raise
        return Http1Response(self, connection, event, timeout.read)

    def _take_idle(self, origin: Origin) -> _Connection | None:
        """The newest idle connection to ``origin`` that is still usable;
        older ones past their expiry, or closed by the server, are closed."""
        idle = self._idle.get(origin)
        now = time.monotonic()
        while idle:
            connection = idle.pop()
            if now - connection.idle_since < self._keepalive_expiry and connection.is_quiet():
                return connection
            self._close(connection)
        return None

    async def _connect(self, origin: Origin, timeout: float | None) -> _Connection:
        scheme, host, port = origin
        try:
            with trio.fail_after(_seconds(timeout)):
                stream: trio.abc.Stream = await _open_tcp(host, port)
                if scheme == b"https":
                    stream = trio.SSLStream(stream, self._ssl_context, server_hostname=host, https_compatible=True)
                    try:
                        await stream.do_handshake()
                    except BaseException:
                        await trio.aclose_forcefully(stream)
                        raise
        except trio.TooSlowError:
            raise httpx.ConnectTimeout(f"connecting to {host}:{port} took over {timeout:g} s") from None
        except OSError as exc:
            raise httpx.ConnectError(str(exc)) from None
        except trio.BrokenResourceError as exc:  # the TLS handshake failed: the cause says why
            raise httpx.ConnectError(str(exc.__cause__ or exc)) from None
        connection = _Connection(stream, origin)
        self._open.add(connection)
        return connection

    def _give_back(self, connection: _Connection) -> None:
        """A connection whose response was read whole: idle if both sides
        may go on (and there is room), else closed."""
        conn = connection.h11
        if self._closed or conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
            self._close(connection)
            return
        conn.start_next_cycle()
        idle = self._idle.setdefault(connection.origin, [])
        if len(idle) >= self._max_idle:
            self._close(idle.pop(0))
        connection.idle_since = time.monotonic()
        connection.answered_any_bytes = False
        idle.append(connection)

    def _close(self, connection: _Connection) -> None:
        """Close at once: TLS's close_notify is not sent (``https_compatible``
        servers expect none), a task reading it fails with ``ReadError``."""
        self._open.discard(connection)
        connection.close_socket()

    async def close_idle(self) -> None:
        """Close every idle connection (the next request opens a new one)."""
        idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                self._close(connection)
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        """Close every connection, idle or not. Idempotent."""
        self._closed = True
        await self.close_idle()
        for connection in list(self._open):
            self._close(connection)


class Http1Response:
    """A response whose head has come: ``status_code``, ``reason`` and
    ``headers`` (h11's, names lowercased); its body from :meth:`blocks`."""

    def __init__(self, client: Http1Client, connection: _Connection, head: h11.Response, timeout: float | None):
        self.status_code: int = head.status_code
        self.reason: bytes = head.reason
        self.headers: list[tuple[bytes, bytes]] = list(head.headers)
        self._client = client
        self._connection: _Connection | None = connection
        self._timeout = timeout
        self._complete = False

    async def blocks(self) -> AsyncIterator[bytes]:
        """The body, as it comes (one block per read, or per chunk h11 hands over)."""
        connection = self._connection
        if connection is None:
            raise httpx.ReadError("the response was closed")
        while True:
            event = await connection.next_event(self._timeout)
            kind = type(event)
            if kind is h11.Data:
                yield bytes(event.data)
            elif kind is h11.EndOfMessage:
                self._complete = True
                return
            else:  # pragma: no cover - h11 reports a cut body as an error first
                raise httpx.RemoteProtocolError(f"unexpected {kind.__name__} in the body")

    async def as_httpx(self, request: httpx.Request | None = None) -> httpx.Response:
        """The response (its body read now, its first :data:`MAX_ERROR_BODY`
        bytes at most: the rest is left unread and the connection closed)
        as httpx's: what google-genai reads an error status from."""
        blocks, size = [], 0
        async with contextlib.aclosing(self.blocks()) as body:
            async for block in body:
                blocks.append(block)
                size += len(block)
                if size >= MAX_ERROR_BODY:
                    break
        content = b"".join(blocks)[:MAX_ERROR_BODY]
        return httpx.Response(self.status_code, headers=self.headers, content=content, request=request,
                              extensions={"http_version": b"HTTP/1.1", "reason_phrase": self.reason})

    async def aclose(self) -> None:
        """Done with the response: its connection goes back to the pool if
        the body was read whole, and is closed otherwise. Idempotent."""
        connection, self._connection = self._connection, None
        if connection is None:
            return
        if self._complete:
            self._client._give_back(connection)
        else:
            self._client._close(connection)
        await trio.lowlevel.checkpoint()


class _Connection:
    """One socket (TLS or not) and its h11 state."""

    __slots__ = ("stream", "origin", "h11", "idle_since", "answered_any_bytes")

    def __init__(self, stream: trio.abc.Stream, origin: Origin):
        self.stream = stream
        self.origin = origin
        self.h11 = h11.Connection(h11.CLIENT)
        self.idle_since = 0.0
        #: The server sent something for the request in progress: it was
        #: received, so it must not be sent again.
        self.answered_any_bytes = False

    async def send(self, data: bytes, timeout: float | None) -> None:
        try:
            with trio.fail_after(_seconds(timeout)):
                await self.stream.send_all(data)
        except trio.TooSlowError:
            raise httpx.WriteTimeout(f"sending the request took over {timeout:g} s") from None
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise httpx.WriteError(f"the connection broke while sending: {exc.__cause__ or exc}") from None

    async def next_event(self, timeout: float | None) -> Any:
        conn = self.h11
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as exc:
                raise httpx.RemoteProtocolError(str(exc)) from None
            if event is not h11.NEED_DATA:
                return event
            try:
                with trio.fail_after(_seconds(timeout)):
                    data = await self.stream.receive_some(READ_SIZE)
            except trio.TooSlowError:
                raise httpx.ReadTimeout(f"no answer for {timeout:g} s") from None
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                raise httpx.ReadError(f"the connection broke: {exc.__cause__ or exc}") from None
            if data:
                self.answered_any_bytes = True
            elif conn.their_state is h11.SEND_RESPONSE and not self.answered_any_bytes:
                # Closed before a byte of the answer: h11 would call it a
                # protocol error; it is a broken connection (maybe a stale one).
                raise httpx.ReadError("the server closed the connection before answering")
            conn.receive_data(data)

    def is_quiet(self) -> bool:
        """An idle connection the server has neither closed nor written on
        (anything readable now means it is closed or unusable)."""
        sock = self._socket()
        fd = -1 if sock is None else sock.fileno()
        if fd < 0:
            return False
        poll = select.poll()
        poll.register(fd, select.POLLIN)
        return not poll.poll(0)

    def _socket(self) -> Any:
        stream = self.stream
        if isinstance(stream, trio.SSLStream):
            stream = stream.transport_stream
        return getattr(stream, "socket", None)

    def close_socket(self) -> None:
        sock = self._socket()
        if sock is not None:
            sock.close()


async def _open_tcp(host: str, port: int) -> trio.SocketStream:
    """A TCP connection to ``host``: an address is connected to directly (a
    third of the CPU of ``trio.open_tcp_stream``, whose resolving and
    happy-eyeballs nursery have only that one address to try); a name
    through ``trio.open_tcp_stream``, its lookup one that may be shared."""
    try:
        family = socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
    except ValueError:
        # The model's endpoint, which the operator named: its answer may be
        # kept and shared (serve's resolver, gemini_split/dns_cache.py).
        with shared_lookups():
            return await trio.open_tcp_stream(host, port)
    sock = trio.socket.socket(family, socket.SOCK_STREAM)
    try:
        await sock.connect((host, port))
    except BaseException:
        sock.close()
        raise
    return trio.SocketStream(sock)


def _seconds(timeout: float | None) -> float:
    return float("inf") if timeout is None else timeout
