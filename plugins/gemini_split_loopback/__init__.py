"""The in-process loopback transport: ``loopback:NAME``.

Both ends live in one Trio run. ``serve("loopback:NAME", …)`` makes NAME
connectable; ``open_connection("loopback:NAME")`` returns one end of a pair of
memory channels and runs the server's handler on the other end in the
listener's nursery. Messages are the same JSON text the other transports
carry, so embedded mode exercises exactly the code a remote client does.

It is registered through the ``gemini_split.transports`` entry point like any
third-party transport; gemini_split never imports it by name.
"""

from __future__ import annotations

import itertools
from typing import Any

import trio

from gemini_split.transport import (
    AuthenticationFailed,
    ConnectFailed,
    ConnectionBroken,
    ConnectionClosed,
    ConnectionHandler,
    ConnectOptions,
    MessageStream,
    MessageTooLarge,
    ServeOptions,
    Transport,
    TransportError,
    run_handler,
)

# Enough slack that a burst of deltas does not stall the sender, small enough
# that a stalled receiver pushes back on it.
_BUFFER = 256

_anonymous = itertools.count(1)


class _Link:
    """What both ends share: the reason the first one to close gave."""

    def __init__(self) -> None:
        self.close_reason: str | None = None


class LoopbackStream(MessageStream):
    def __init__(
        self,
        send: trio.MemorySendChannel[str],
        receive: trio.MemoryReceiveChannel[str],
        link: _Link,
        *,
        peer: str,
        max_message_size: int,
    ):
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
            raise MessageTooLarge(
                f"message of {len(message)} bytes is over the limit of {self._max} bytes"
            )
        return message

    async def aclose(self, reason: str = "closed") -> None:
        if self._closed:
            return
        self._closed = True
        if self._link.close_reason is None:
            self._link.close_reason = reason
        self._send.close()
        self._receive.close()


class _Listener:
    def __init__(self, nursery: trio.Nursery, handler: ConnectionHandler, options: ServeOptions):
        self.nursery = nursery
        self.handler = handler
        self.options = options


class LoopbackTransport(Transport):
    name = "loopback"

    def __init__(self) -> None:
        self._listeners: dict[str, _Listener] = {}

    async def open_connection(self, address: str, options: ConnectOptions) -> MessageStream:
        name = _name_of(address)
        listener = self._listeners.get(name)
        if listener is None:
            raise ConnectFailed(f"nothing is serving {address} in this process")
        if listener.options.authenticate is not None:
            principal = listener.options.authenticate(options.token)
            if principal is None:
                raise AuthenticationFailed(f"{address} refused the token")
        else:
            principal = None
        to_server_send, to_server_receive = trio.open_memory_channel[str](_BUFFER)
        to_client_send, to_client_receive = trio.open_memory_channel[str](_BUFFER)
        link = _Link()
        client_end = LoopbackStream(
            to_server_send, to_client_receive, link,
            peer=address, max_message_size=options.max_message_size,
        )
        server_end = LoopbackStream(
            to_client_send, to_server_receive, link,
            peer="loopback client", max_message_size=listener.options.max_message_size,
        )
        server_end.principal = principal
        listener.nursery.start_soon(run_handler, listener.handler, server_end)
        return client_end

    async def serve(
        self,
        address: str,
        handler: ConnectionHandler,
        options: ServeOptions,
        *,
        task_status: Any = trio.TASK_STATUS_IGNORED,
    ) -> None:
        name = _name_of(address) or f"anonymous-{next(_anonymous)}"
        if name in self._listeners:
            raise TransportError(f"loopback:{name} is already being served")
        async with trio.open_nursery() as nursery:
            self._listeners[name] = _Listener(nursery, handler, options)
            try:
                task_status.started(f"loopback:{name}")
                await trio.sleep_forever()
            finally:
                del self._listeners[name]
                nursery.cancel_scope.cancel()


def _name_of(address: str) -> str:
    _, _, rest = address.partition(":")
    return rest.lstrip("/")


transport = LoopbackTransport()
