"""A TCP proxy that cuts connections where it is told to, for testing how
clients and servers survive a broken network.

It sits between a client and a server on loopback and copies bytes both
ways. It can cut every connection at once (:meth:`FaultProxy.cut`), or at
chosen points of the server-to-client byte stream (:meth:`cut_at`), counted
over every connection it has carried: a cut at byte N forwards exactly the
bytes before N and then resets both sides (RST, as a dropped route or a
killed NAT entry would), so a cut lands in the middle of a WebSocket frame,
between two events, or while the connection is idle, wherever N falls.
:meth:`random_cuts` picks the points from a seeded ``random.Random``, so a
failure can be replayed with the same seed.

Use::

    proxy = FaultProxy("127.0.0.1", server_port)
    port = await nursery.start(proxy.serve)
    proxy.random_cuts(seed=7, count=20, total_bytes=2_000_000)
"""

from __future__ import annotations

import bisect
import random
import socket
import struct
from dataclasses import dataclass, field
from typing import Any

import trio


@dataclass(eq=False)
class _Link:
    client: trio.SocketStream
    server: trio.SocketStream
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)


class FaultProxy:
    def __init__(self, host: str, port: int):
        self.target = (host, port)
        #: Bytes forwarded from server to client, over all connections.
        self.downstream_bytes = 0
        #: Connections accepted so far, and cuts made (byte offsets).
        self.connections = 0
        self.cuts_made: list[int] = []
        self._cut_points: list[int] = []
        self._links: set[_Link] = set()
        self.cut_event = trio.Event()

    # --- faults --------------------------------------------------------------

    def cut(self) -> None:
        """Reset every open connection now."""
        self.cuts_made.append(self.downstream_bytes)
        for link in list(self._links):
            self._reset(link)
        self.cut_event.set()
        self.cut_event = trio.Event()

    def cut_at(self, *offsets: int) -> None:
        """Cut whichever connection carries server-to-client byte ``offset``
        (counted over all connections), right before that byte."""
        for offset in offsets:
            bisect.insort(self._cut_points, offset)

    def random_cuts(self, *, seed: int, count: int, total_bytes: int, start: int = 0) -> list[int]:
        """``count`` cut points spread at random over ``start..total_bytes``;
        returns them (sorted)."""
        rng = random.Random(seed)
        points = sorted(rng.sample(range(start + 1, total_bytes), count))
        self.cut_at(*points)
        return points

    # --- serving ----------------------------------------------------------------

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        task_status.started(listeners[0].socket.getsockname()[1])
        await trio.serve_listeners(self._handle, listeners)

    async def _handle(self, client: trio.SocketStream) -> None:
        self.connections += 1
        try:
            server = await trio.open_tcp_stream(*self.target)
        except OSError:
            self._reset_stream(client)
            return
        link = _Link(client, server)
        self._links.add(link)
        try:
            with link.scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._pump, link, client, server, False)
                    nursery.start_soon(self._pump, link, server, client, True)
        finally:
            self._links.discard(link)
            for stream in (client, server):
                with trio.CancelScope(shield=True):
                    await stream.aclose()

    async def _pump(self, link: _Link, source: trio.SocketStream, sink: trio.SocketStream, downstream: bool) -> None:
        try:
            while True:
                data = await source.receive_some(65536)
                if not data:
                    await sink.send_eof()
                    return
                if downstream:
                    while self._cut_points and self._cut_points[0] < self.downstream_bytes + len(data) + 1:
                        point = self._cut_points.pop(0)
                        keep = max(0, point - 1 - self.downstream_bytes)
                        if keep:
                            await sink.send_all(data[:keep])
                            await _drained(sink)
                        self.downstream_bytes += keep
                        self.cuts_made.append(self.downstream_bytes)
                        self._reset(link)
                        self.cut_event.set()
                        self.cut_event = trio.Event()
                        return
                    self.downstream_bytes += len(data)
                await sink.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            link.scope.cancel()

    def _reset(self, link: _Link) -> None:
        for stream in (link.client, link.server):
            self._reset_stream(stream)
        link.scope.cancel()

    @staticmethod
    def _reset_stream(stream: trio.SocketStream) -> None:
        """Make the coming close an RST: the peer sees a reset, not an EOF."""
        try:
            stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass


async def _drained(stream: trio.SocketStream, timeout: float = 2.0) -> None:
    """Wait until the kernel has sent everything written (an abortive close
    would drop what is still queued, and the cut would land earlier)."""
    import fcntl
    import termios

    with trio.move_on_after(timeout):
        while True:
            queued = struct.unpack("i", fcntl.ioctl(stream.socket.fileno(), termios.TIOCOUTQ, b"\0\0\0\0"))[0]
            if queued == 0:
                return
            await trio.sleep(0.001)
