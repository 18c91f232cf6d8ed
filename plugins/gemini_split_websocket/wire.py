"""The byte stream under a WebSocket, made safe to cancel and to stall on.

Both ends write WebSocket frames through :class:`FrameSafeStream`. It exists
because of two facts about ``trio.abc.Stream.send_all``:

* Cancelled halfway, it leaves part of a frame on the wire, and every later
  frame is garbage to the peer — silently. Cancelling a task that happens to
  be sending (a turn cancelled while a delta waits for a slow client) must
  not corrupt the connection. So a frame, once begun, is written whole: the
  write is shielded from cancellation.
* Against a peer that stopped reading it blocks forever, which is the
  back-pressure we want, but not forever. So the shielded write is bounded
  by *progress*: if the peer accepts no bytes for ``stall_timeout`` seconds
  (or for ``grace`` seconds past our caller's deadline or cancellation), the
  stream is closed and the write raises :class:`trio.BrokenResourceError`.
"""

from __future__ import annotations

import os

import trio

#: Bytes asked of the socket per read.
RECEIVE_SIZE = 64 * 1024
#: Bytes written per shielded step; progress is checked between steps.
WRITE_CHUNK = 64 * 1024
#: RFC 6455 §5.5: a close frame's payload is at most 125 bytes, 2 of them the code.
MAX_CLOSE_REASON_BYTES = 123


def truncate_close_reason(reason: str) -> str:
    """``reason`` cut to fit a WebSocket close frame (123 UTF-8 bytes),
    never in the middle of a character."""
    encoded = reason.encode("utf-8")
    if len(encoded) <= MAX_CLOSE_REASON_BYTES:
        return reason
    return encoded[:MAX_CLOSE_REASON_BYTES].decode("utf-8", "ignore")


class FrameSafeStream(trio.abc.Stream):
    """Wraps ``stream``; see the module docstring.

    ``stall_reason`` is set (for error messages) when a stalled peer was cut off.
    """

    def __init__(
        self,
        stream: trio.abc.Stream,
        *,
        stall_timeout: float,
        grace: float,
    ):
        self.transport_stream = stream
        self._stall_timeout = stall_timeout
        self._grace = grace
        self.stall_reason: str | None = None

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        sent = self._send_nowait(view)
        if sent:
            view = view[sent:]
            if not view:
                # Trio's checkpoint contract, without the trip through the
                # scheduler the write did not need.
                await trio.lowlevel.checkpoint_if_cancelled()
                return
        for start in range(0, max(len(view), 1), WRITE_CHUNK):
            # Our caller's deadline (-inf once cancelled) is honoured, with
            # ``grace`` seconds more to finish the frame; the peer's progress
            # never gets more than ``stall_timeout``.
            now = trio.current_time()
            caller = max(trio.current_effective_deadline(), now)
            deadline = min(now + self._stall_timeout, caller + self._grace)
            with trio.CancelScope(shield=True, deadline=deadline) as scope:
                await self.transport_stream.send_all(view[start : start + WRITE_CHUNK])
            if scope.cancelled_caught:
                self.stall_reason = (
                    f"the peer accepted no data for {deadline - now:.3g}s "
                    "(stalled, or not reading)"
                )
                await trio.aclose_forcefully(self.transport_stream)
                raise trio.BrokenResourceError(self.stall_reason)
        # The shield swallowed any cancellation that arrived meanwhile; deliver it now.
        await trio.lowlevel.checkpoint_if_cancelled()

    def _send_nowait(self, data: memoryview) -> int:
        """Write what the socket takes at once, without waiting: the bytes
        written (0 when it would block, on TLS, or on any error — the
        shielded path below then writes the rest and reports errors).

        Trio's own ``send_all`` pays a scheduler round trip and several
        context managers around each ``send()`` (about three quarters of a
        loopback write's cost, profiled with 100 watchers on a session);
        a frame the kernel takes whole needs none of that. The fd is asked
        for at each call (-1 once the socket is closed), so a closed and
        reused fd number is never written to."""
        stream = self.transport_stream
        if not data or not isinstance(stream, trio.SocketStream) or stream.socket.did_shutdown_SHUT_WR:
            return 0
        fd = stream.socket.fileno()
        if fd < 0:
            return 0
        try:
            return os.write(fd, data)
        except OSError:  # BlockingIOError (full), a broken peer: the slow path says which
            return 0

    async def wait_send_all_might_not_block(self) -> None:
        await self.transport_stream.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        return await self.transport_stream.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self.transport_stream.aclose()
