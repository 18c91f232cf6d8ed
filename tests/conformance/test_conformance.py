"""The transport conformance suite: every transport, the same behaviour.

Run against every case in ``case_*.py``. A transport that passes this can
carry the protocol: whole messages, in order, of any size up to the limit,
with peer closing and connection failures reported as the interface says.
"""

from __future__ import annotations

import trio
import pytest

from gemini_split.transport import (
    ConnectFailed,
    ConnectionBroken,
    ConnectionClosed,
    MessageTooLarge,
    ServeOptions,
    get_transport,
    scheme_of,
)

# Generous: these only bound a hang; a passing run takes milliseconds.
DEADLINE = 15


async def _connect(nursery, case, serve_options=None):
    address = await case.start(nursery, serve_options or ServeOptions())
    transport = get_transport(address)
    return await transport.open_connection(address, case.connect_options())


async def test_round_trip_keeps_text_exact(transport_case):
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            stream = await _connect(nursery, transport_case)
            for text in ["hello", "", "line one\nline two\r\n", '{"json": "quotes \\" and \\\\"}', "ünïcödé ✓ 日本 🙂", " padded "]:
                await stream.send(text)
                assert await stream.receive() == text
            await stream.aclose()
            nursery.cancel_scope.cancel()


async def test_many_messages_arrive_in_order(transport_case):
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            stream = await _connect(nursery, transport_case)
            await stream.send("burst:2000")
            received = [await stream.receive() for _ in range(2000)]
            assert received == [str(i) for i in range(2000)]
            await stream.aclose()
            nursery.cancel_scope.cancel()


async def test_concurrent_senders_never_interleave_messages(transport_case):
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


async def test_large_messages_both_ways(transport_case):
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


async def test_message_over_the_limit_is_refused_and_never_delivered(transport_case):
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


async def test_client_over_its_own_limit_raises_message_too_large(transport_case):
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            address = await transport_case.start(nursery, ServeOptions())
            options = transport_case.connect_options()
            options.max_message_size = 1000
            stream = await get_transport(address).open_connection(address, options)
            await stream.send("big:5000")
            with pytest.raises((MessageTooLarge, ConnectionBroken)):
                await stream.receive()
            await stream.aclose()
            nursery.cancel_scope.cancel()


async def test_server_closing_ends_client_receive(transport_case):
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


async def test_closed_stream_refuses_use_and_closes_idempotently(transport_case):
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


async def test_other_connections_survive_one_closing(transport_case):
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            address = await transport_case.start(nursery, ServeOptions())
            transport = get_transport(address)
            first = await transport.open_connection(address, transport_case.connect_options())
            second = await transport.open_connection(address, transport_case.connect_options())
            await first.send("close")
            with pytest.raises(ConnectionBroken):
                await first.receive()
            await second.send("still here")
            assert await second.receive() == "still here"
            await second.aclose()
            nursery.cancel_scope.cancel()


async def test_connecting_to_nothing_fails_clearly(transport_case):
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            address = await transport_case.start(nursery, ServeOptions())
            nursery.cancel_scope.cancel()
        dead = transport_case.dead_address or address
        transport = get_transport(dead)
        with pytest.raises(ConnectFailed) as info:
            stream = await transport.open_connection(dead, transport_case.connect_options())
            # Some transports (a spawned command) only notice on first use.
            await stream.send("x")
            await stream.receive()
        assert str(info.value)


def test_addresses_name_their_scheme():
    assert scheme_of("ws://127.0.0.1:1") == "ws"
    assert scheme_of("stdio:ssh box gemini-split serve --stdio") == "stdio"
    assert scheme_of("loopback:embedded") == "loopback"
