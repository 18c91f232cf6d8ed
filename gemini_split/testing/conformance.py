"""The transport conformance suite, for any transport: the same messages,
the same errors.

A transport that passes it can carry the protocol: whole messages, in order,
of any size up to the limit, concurrent senders never interleaved, the
peer's close reported as :class:`~gemini_split.transport.ConnectionBroken`,
use after our own ``aclose`` as
:class:`~gemini_split.transport.ConnectionClosed`, and a connection failure
as :class:`~gemini_split.transport.ConnectFailed`. gemini-split runs it on
loopback, ``ws``, ``wss`` and ``stdio`` (``tests/transport/conformance/``); a
third-party transport runs it the same way, with pytest and pytest-trio
(``trio_mode = true``)::

    # tests/test_my_transport.py
    import pytest
    from gemini_split.testing.conformance import TransportCase, TransportConformance, echo_handler

    MY = MyTransport()

    async def start(nursery, options):
        return await nursery.start(MY.serve, "my://127.0.0.1:0", echo_handler, options)

    class TestMyTransport(TransportConformance):
        @pytest.fixture
        def transport_case(self):
            return TransportCase("my", start, transport=MY)

(``transport=`` may be left out once the transport is registered under the
``gemini_split.transports`` entry-point group.)

The server side is :func:`echo_handler` (run it in a separate process with
``python -m gemini_split.testing.conformance``, as the stdio case does).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import trio

from gemini_split.transport import (
    ConnectFailed,
    ConnectionBroken,
    ConnectionClosed,
    ConnectOptions,
    MessageStream,
    MessageTooLarge,
    ServeOptions,
    Transport,
    get_transport,
)

__all__ = ["TransportCase", "TransportConformance", "echo_handler"]

# Generous: these only bound a hang; a passing run takes milliseconds.
DEADLINE = 15


@dataclass
class TransportCase:
    """How to run the echo server over one transport.

    ``start`` starts the server (in ``nursery``, with ``serve_options``) and
    returns the address a client connects to; cancelling ``nursery`` stops
    it. ``connect_options`` returns the options a client needs (a CA file, a
    token…).
    """

    name: str
    start: Callable[[Any, ServeOptions], Awaitable[str]]
    connect_options: Callable[[], ConnectOptions] = field(default=ConnectOptions)
    #: An address where nothing listens (default: the case's own, once stopped).
    dead_address: str | None = None
    #: The transport clients connect with; None: the one registered (entry
    #: point ``gemini_split.transports``) for the address's scheme.
    transport: Transport | None = None

    def transport_for(self, address: str) -> Transport:
        return self.transport if self.transport is not None else get_transport(address)


# --- the server side ------------------------------------------------------------


async def echo_handler(stream: MessageStream) -> None:
    """Echo every message, with a few commands (a message that is exactly one of these):

    * ``close`` – the server closes the connection.
    * ``burst:N`` – the server sends ``0`` … ``N-1``, one message each.
    * ``big:N`` – the server sends one message of ``N`` characters.
    * anything else is sent back unchanged.

    A message over the server's size limit is answered ``error:too_large`` if the
    connection survives it."""
    while True:
        try:
            message = await stream.receive()
        except MessageTooLarge:
            try:
                await stream.send("error:too_large")
            except ConnectionBroken:
                return
            continue
        except ConnectionBroken:
            return
        if message == "close":
            await stream.aclose("asked to close")
            return
        if message.startswith("burst:"):
            for i in range(int(message[6:])):
                await stream.send(str(i))
        elif message.startswith("big:"):
            await stream.send("x" * int(message[4:]))
        else:
            await stream.send(message)



# --- the tests ------------------------------------------------------------------


async def _connect(nursery: trio.Nursery, case: TransportCase, serve_options: ServeOptions | None = None) -> MessageStream:
    address = await case.start(nursery, serve_options or ServeOptions())
    transport = case.transport_for(address)
    return await transport.open_connection(address, case.connect_options())


class TransportConformance:
    """The suite, as a base class: subclass it as ``Test…`` and provide a
    ``transport_case`` fixture returning a :class:`TransportCase`."""

    async def test_round_trip_keeps_text_exact(self, transport_case: TransportCase) -> None:
        with trio.fail_after(DEADLINE):
            async with trio.open_nursery() as nursery:
                stream = await _connect(nursery, transport_case)
                for text in ["hello", "", "line one\nline two\r\n", '{"json": "quotes \\" and \\\\"}', "ünïcödé ✓ 日本 🙂", " padded "]:
                    await stream.send(text)
                    assert await stream.receive() == text
                await stream.aclose()
                nursery.cancel_scope.cancel()


    async def test_many_messages_arrive_in_order(self, transport_case: TransportCase) -> None:
        with trio.fail_after(DEADLINE):
            async with trio.open_nursery() as nursery:
                stream = await _connect(nursery, transport_case)
                await stream.send("burst:2000")
                received = [await stream.receive() for _ in range(2000)]
                assert received == [str(i) for i in range(2000)]
                await stream.aclose()
                nursery.cancel_scope.cancel()


    async def test_concurrent_senders_never_interleave_messages(self, transport_case: TransportCase) -> None:
        with trio.fail_after(DEADLINE):
            async with trio.open_nursery() as nursery:
                stream = await _connect(nursery, transport_case)

                async def sender(tag: str) -> None:
                    for i in range(200):
                        await stream.send(f"{tag}-{i}-" + tag * 500)

                async with trio.open_nursery() as senders:
                    senders.start_soon(sender, "a")
                    senders.start_soon(sender, "b")
                    received = [await stream.receive() for _ in range(400)]
                for tag in "ab":
                    mine = [m for m in received if m.startswith(tag + "-")]
                    assert mine == [f"{tag}-{i}-" + tag * 500 for i in range(200)]
                await stream.aclose()
                nursery.cancel_scope.cancel()


    async def test_large_messages_both_ways(self, transport_case: TransportCase) -> None:
        size = 4 * 1024 * 1024
        with trio.fail_after(DEADLINE):
            async with trio.open_nursery() as nursery:
                stream = await _connect(nursery, transport_case)
                payload = "y" * size
                await stream.send(payload)
                assert await stream.receive() == payload
                await stream.send(f"big:{size}")
                assert await stream.receive() == "x" * size
                await stream.aclose()
                nursery.cancel_scope.cancel()


    async def test_message_over_the_limit_is_refused_and_never_delivered(self, transport_case: TransportCase) -> None:
        with trio.fail_after(DEADLINE):
            async with trio.open_nursery() as nursery:
                stream = await _connect(nursery, transport_case, ServeOptions(max_message_size=1000))
                try:
                    await stream.send("z" * 5000)
                    answer = await stream.receive()
                except ConnectionBroken:
                    answer = None  # closing the connection is a valid refusal
                assert answer in (None, "error:too_large")
                if answer is not None:
                    # The connection survived the refusal and still works.
                    await stream.send("after")
                    assert await stream.receive() == "after"
                await stream.aclose()
                nursery.cancel_scope.cancel()


    async def test_client_over_its_own_limit_raises_message_too_large(self, transport_case: TransportCase) -> None:
        with trio.fail_after(DEADLINE):
            async with trio.open_nursery() as nursery:
                address = await transport_case.start(nursery, ServeOptions())
                options = transport_case.connect_options()
                options.max_message_size = 1000
                stream = await transport_case.transport_for(address).open_connection(address, options)
                await stream.send("big:5000")
                with pytest.raises((MessageTooLarge, ConnectionBroken)):
                    await stream.receive()
                await stream.aclose()
                nursery.cancel_scope.cancel()


    async def test_server_closing_ends_client_receive(self, transport_case: TransportCase) -> None:
        with trio.fail_after(DEADLINE):
            async with trio.open_nursery() as nursery:
                stream = await _connect(nursery, transport_case)
                await stream.send("close")
                # The peer closed it: broken, not closed (closed means we did).
                with pytest.raises(ConnectionBroken):
                    await stream.receive()
                with pytest.raises(ConnectionBroken):
                    await stream.receive()
                nursery.cancel_scope.cancel()


    async def test_closed_stream_refuses_use_and_closes_idempotently(self, transport_case: TransportCase) -> None:
        with trio.fail_after(DEADLINE):
            async with trio.open_nursery() as nursery:
                stream = await _connect(nursery, transport_case)
                await stream.aclose()
                await stream.aclose()
                with pytest.raises(ConnectionClosed):
                    await stream.send("x")
                with pytest.raises(ConnectionClosed):
                    await stream.receive()
                nursery.cancel_scope.cancel()


    async def test_other_connections_survive_one_closing(self, transport_case: TransportCase) -> None:
        with trio.fail_after(DEADLINE):
            async with trio.open_nursery() as nursery:
                address = await transport_case.start(nursery, ServeOptions())
                transport = transport_case.transport_for(address)
                first = await transport.open_connection(address, transport_case.connect_options())
                second = await transport.open_connection(address, transport_case.connect_options())
                await first.send("close")
                with pytest.raises(ConnectionBroken):
                    await first.receive()
                await second.send("still here")
                assert await second.receive() == "still here"
                await second.aclose()
                nursery.cancel_scope.cancel()


    async def test_connecting_to_nothing_fails_clearly(self, transport_case: TransportCase) -> None:
        with trio.fail_after(DEADLINE):
            async with trio.open_nursery() as nursery:
                address = await transport_case.start(nursery, ServeOptions())
                nursery.cancel_scope.cancel()
            dead = transport_case.dead_address or address
            transport = transport_case.transport_for(dead)
            with pytest.raises(ConnectFailed) as info:
                stream = await transport.open_connection(dead, transport_case.connect_options())
                # Some transports (a spawned command) only notice on first use.
                await stream.send("x")
                await stream.receive()
            assert str(info.value)


def main(argv: list[str] | None = None) -> None:
    """``python -m gemini_split.testing.conformance [--max-message-size N]``:
    serve :func:`echo_handler` on this process's stdin/stdout through the
    stdio transport, until stdin closes (the stdio case's server)."""
    import argparse
    import functools

    from gemini_split.protocol import DEFAULT_MAX_MESSAGE_SIZE

    parser = argparse.ArgumentParser(prog="python -m gemini_split.testing.conformance")
    parser.add_argument("--max-message-size", type=int, default=DEFAULT_MAX_MESSAGE_SIZE)
    args = parser.parse_args(argv)
    options = ServeOptions(max_message_size=args.max_message_size)
    trio.run(functools.partial(get_transport("stdio:-").serve, "stdio:-", echo_handler, options))


if __name__ == "__main__":
    main()
