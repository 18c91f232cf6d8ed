"""Two ends of an in-process native connection joined by Trio memory
channels: what the loopback transport hands a client and its server's
handler, and what the gRPC face uses to talk to the service exactly as a
remote client would.

Each end is a :class:`~gemini_split.transport.MessageStream`: the same JSON
text as on any wire, the same errors (``ConnectionClosed`` when this end was
closed, ``ConnectionBroken`` when the other end went, with the reason the
first to close gave), and ``max_message_size`` enforced on receive (an
oversized message closes the receiving end). ``buffer`` messages may wait
unread before a sender waits: a stalled reader pushes back on its peer.
"""

from __future__ import annotations

import trio

from gemini_split.transport import ConnectionBroken, ConnectionClosed, MessageStream, MessageTooLarge, Principal


class _Link:
    """What both ends share: the reason the first one to close gave."""

    def __init__(self) -> None:
        self.close_reason: str | None = None


class MemoryStream(MessageStream):
    """One end of :func:`open_memory_pair`."""

    private = True  # the same process

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
            if self._closed:  # closed by another task of ours meanwhile
                raise ConnectionClosed(self._link.close_reason or "connection closed") from None
            raise ConnectionBroken(self._link.close_reason or "peer closed") from exc

    async def receive(self) -> str:
        if self._closed:
            raise ConnectionClosed(self._link.close_reason or "connection closed")
        try:
            message = await self._receive.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError) as exc:
            if self._closed:  # closed by another task of ours meanwhile
                raise ConnectionClosed(self._link.close_reason or "connection closed") from None
            raise ConnectionBroken(self._link.close_reason or "peer closed") from exc
        if len(message) > self._max:
            await self.aclose("message too large")
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


def open_memory_pair(*, buffer: int, client_peer: str, server_peer: str, client_max: int, server_max: int,
                     principal: Principal | None = None) -> tuple[MemoryStream, MemoryStream]:
    """``(client_end, server_end)``. Each end's ``peer`` names the other
    side (``client_peer`` is what the client end is connected to); the
    server end carries ``principal`` (who its listener authenticated)."""
    to_server_send, to_server_receive = trio.open_memory_channel[str](buffer)
    to_client_send, to_client_receive = trio.open_memory_channel[str](buffer)
    link = _Link()
    client_end = MemoryStream(to_server_send, to_client_receive, link, peer=client_peer, max_message_size=client_max)
    server_end = MemoryStream(to_client_send, to_server_receive, link, peer=server_peer, max_message_size=server_max)
    server_end.principal = principal
    return client_end, server_end
