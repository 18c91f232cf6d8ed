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

from gemini_split.transport.memory_pair import open_memory_pair
from gemini_split.transport import (
    AuthenticationFailed,
    ConnectFailed,
    ConnectionHandler,
    ConnectOptions,
    MessageStream,
    ServeOptions,
    Transport,
    TransportError,
    run_handler,
)

# Enough slack that a burst of deltas does not stall the sender, small enough
# that a stalled receiver pushes back on it.
_BUFFER = 256

_anonymous = itertools.count(1)


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
        # In-process callers may name the peer the server sees (a face: its
        # own caller's address, for the server's log) and hold fewer
        # messages in flight (a face relaying to a slow reader).
        client_end, server_end = open_memory_pair(
            buffer=int(options.extra.get("buffer", _BUFFER)), client_peer=address,
            server_peer=str(options.extra.get("peer", "loopback client")),
            client_max=options.max_message_size, server_max=listener.options.max_message_size, principal=principal,
        )
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
