"""Two ends of an in-process native connection, for the face.

The face (one per ``Chat`` stream) talks to the server's connection handler
exactly as a remote client would, through a pair of :class:`MessageStream`
ends joined by Trio memory channels. The buffer is small on purpose: a
``Chat`` client that reads slowly makes the handler's writer wait, so the
session's outbox merges deltas instead of queueing one per token.
"""

from __future__ import annotations

import trio

from gemini_split.transport import ConnectionBroken, ConnectionClosed, MessageStream, MessageTooLarge, Principal

#: Messages either end may hold unread before the sender waits.
BUFFER = 8


class _Link:
    def __init__(self) -> None:
        self.close_reason: str | None = None


class PairEnd(MessageStream):
    """One end. ``max_message_size`` bounds what this end receives."""

    def __init__(self, send: trio.MemorySendChannel[str], receive: trio.MemoryReceiveChannel[str], link: _Link,
                 *, peer: str, max_message_size: int):
        self._send = send
        self._receive = receive
        self._link = link
        self._max = max_message_size
        self._closed = False
        self.peer = peer

    async def send(self, message: str) -> None:
        if self._closed:
            raise ConnectionClosed(self._link.close_reason or "connection closed")
        try:
            await self._send.send(message)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            if self._closed:
                raise ConnectionClosed(self._link.close_reason or "connection closed") from None
            raise ConnectionBroken(self._link.close_reason or "peer closed") from exc

    async def receive(self) -> str:
        if self._closed:
            raise ConnectionClosed(self._link.close_reason or "connection closed")
        try:
            message = await self._receive.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError) as exc:
            if self._closed:
                raise ConnectionClosed(self._link.close_reason or "connection closed") from None
            raise ConnectionBroken(self._link.close_reason or "peer closed") from exc
        if len(message) > self._max:
            raise MessageTooLarge(f"message of {len(message)} bytes is over the limit of {self._max} bytes")
        return message

    async def aclose(self, reason: str = "closed") -> None:
        if self._closed:
            return
        self._closed = True
        if self._link.close_reason is None:
            self._link.close_reason = reason
        self._send.close()
        self._receive.close()


def open_pair(*, peer: str, principal: Principal | None, max_message_size: int) -> tuple[PairEnd, PairEnd]:
    """``(client_end, server_end)``; the server end carries ``principal``
    (who the gRPC listener authenticated) and ``peer`` (the gRPC peer)."""
    to_server_send, to_server_receive = trio.open_memory_channel[str](BUFFER)
    to_client_send, to_client_receive = trio.open_memory_channel[str](BUFFER)
    link = _Link()
    client_end = PairEnd(to_server_send, to_client_receive, link, peer="in-process server",
                         max_message_size=max_message_size)
    server_end = PairEnd(to_client_send, to_server_receive, link, peer=peer, max_message_size=max_message_size)
    server_end.principal = principal
    return client_end, server_end
