"""Limits: message size, keepalive, stalled readers, per-user cap, close
reasons — and every such event leaves other clients alone."""

from __future__ import annotations

import logging
import time

import pytest
import trio

from gemini_split.transport import (
    ConnectFailed,
    ConnectionBroken,
    ConnectOptions,
    MessageStream,
    MessageTooLarge,
    get_transport,
)

from .helpers import DEADLINE, Recorder, authenticate, start, tls_files

# Short keepalive so a dead peer is found in well under a second.
KEEPALIVE = {"keepalive_interval": 0.1, "keepalive_timeout": 0.3}
#: For the dead-peer test: the live peer must answer every ping in time on a
#: loaded machine too (a 0.3 s timeout dropped it now and then).
PING_KEEPALIVE = {"keepalive_interval": 0.2, "keepalive_timeout": 1.0}


async def _connect(address: str, token: str | None = None, **options) -> MessageStream:
    if address.startswith("wss://"):
        options.setdefault("ca_file", tls_files()["ca"])
    return await get_transport(address).open_connection(address, ConnectOptions(token=token, **options))


@pytest.fixture(params=["ws", "wss"])
def over(request) -> dict:
    """Server options for plain WebSocket, or for TLS."""
    if request.param == "ws":
        return {}
    files = tls_files()
    return {"address": "wss://127.0.0.1:0", "tls_cert": files["cert"], "tls_key": files["key"]}


async def _echo(stream: MessageStream, text: str) -> None:
    await stream.send(text)
    assert await stream.receive() == text


async def test_a_message_over_the_limit_closes_that_connection_with_1009(caplog):
    caplog.set_level(logging.WARNING)
    recorder = Recorder()
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            address = await start(nursery, recorder, max_message_size=1000)
            bystander = await _connect(address)
            await _echo(bystander, "before")
            offender = await _connect(address)
            await offender.send("z" * 5000)
            with pytest.raises(ConnectionBroken) as info:
                await offender.receive()
            assert info.value.code == 1009
            with pytest.raises(ConnectionBroken):
                await offender.send("again")
            await recorder.ended.wait()
            assert any(isinstance(e, MessageTooLarge) for e in recorder.endings)
            assert "1009" in caplog.text and "over the limit of 1000" in caplog.text
            await _echo(bystander, "after")  # unaffected
            await bystander.aclose()
            await offender.aclose()
            nursery.cancel_scope.cancel()


async def test_a_client_that_answers_no_pings_is_dropped(over):
    recorder = Recorder()
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            address = await start(nursery, recorder, **PING_KEEPALIVE, **over)
            lively = await _connect(address)
            echoing = trio.CancelScope()
            nursery.start_soon(_keep_echoing, lively, echoing)
            # Never receives, so never answers a ping: a dead peer.
            dead = await _connect(address)
            started = time.monotonic()
            await recorder.ended.wait()
            assert time.monotonic() - started < 3.0  # interval + timeout + slack
            [ending] = recorder.endings
            assert "no answer to a ping within 1s" in str(ending)
            await trio.sleep(0.7)  # several keepalive rounds
            assert recorder.started == 2 and len(recorder.endings) == 1  # lively survives
            with pytest.raises(ConnectionBroken):
                await dead.receive()
            echoing.cancel()
            await lively.aclose()
            nursery.cancel_scope.cancel()


async def _keep_echoing(stream: MessageStream, scope: trio.CancelScope) -> None:
    with scope:
        while True:
            await _echo(stream, "still here")
            await trio.sleep(0.05)


async def test_a_client_that_stops_reading_is_dropped_and_sends_do_not_pile_up(over):
    progress = {"sent": 0}
    ended = trio.Event()
    outcome: list[BaseException] = []

    async def firehose(stream: MessageStream) -> None:
        try:
            while True:
                await stream.send("x" * 65536)  # blocks once the socket is full
                progress["sent"] += 1
        except ConnectionBroken as exc:
            outcome.append(exc)
        finally:
            ended.set()

    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            address = await start(nursery, firehose, **KEEPALIVE, **over)
            stalled = await _connect(address)  # and never reads
            started = time.monotonic()
            await ended.wait()
            assert time.monotonic() - started < 2
            # Back-pressure: what was sent fits in socket buffers, not a queue.
            assert progress["sent"] * 65536 < 64 * 1024 * 1024
            assert isinstance(outcome[0], ConnectionBroken)
            await stalled.aclose()
            nursery.cancel_scope.cancel()


async def test_per_user_connection_cap():
    recorder = Recorder()
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            address = await start(nursery, recorder, authenticate=authenticate, max_connections_per_user=2)
            first = await _connect(address, "alice-token")
            second = await _connect(address, "alice-second-token")
            with pytest.raises(ConnectFailed) as info:
                await _connect(address, "alice-token")
            assert "HTTP 429" in str(info.value) and "'alice'" in str(info.value)
            bob = await _connect(address, "bob-token")  # another user is not affected
            await _echo(bob, "bob is in")
            assert recorder.started == 3
            await first.aclose()
            while True:  # the slot frees once the server has seen the close
                try:
                    third = await _connect(address, "alice-token")
                    break
                except ConnectFailed:
                    await trio.sleep(0.02)
            await _echo(third, "alice again")
            await _echo(second, "second unaffected")
            for stream in (second, third, bob):
                await stream.aclose()
            nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    "reason",
    ["server restarting for maintenance", "é" * 100 + " and more than fits in a close frame"],
)
async def test_the_client_sees_the_servers_close_reason(reason):
    async def closer(stream: MessageStream) -> None:
        await stream.receive()
        await stream.aclose(reason)

    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            address = await start(nursery, closer)
            stream = await _connect(address)
            await stream.send("go")
            with pytest.raises(ConnectionBroken) as info:
                await stream.receive()
            assert info.value.code == 1000
            assert reason.startswith(info.value.reason)
            assert len(info.value.reason.encode()) <= 123
            assert len(info.value.reason) >= min(len(reason), 60)
            nursery.cancel_scope.cancel()


async def test_stopping_the_server_sends_each_client_a_close_frame(over):
    with trio.fail_after(2):
        async with trio.open_nursery() as outer:
            async with trio.open_nursery() as server:
                address = await start(server, **over)
                stream = await _connect(address)
                await _echo(stream, "hi")
                server.cancel_scope.cancel()
            # This client was not even reading: the server still stopped promptly.
            with pytest.raises(ConnectionBroken) as info:
                await stream.receive()
            assert info.value.code == 1000  # a close frame, not a broken socket
            assert info.value.reason == "server shutting down"
            outer.cancel_scope.cancel()


async def test_a_cancelled_send_never_corrupts_the_stream(over):
    received: list[str] = []
    done = trio.Event()

    async def collector(stream: MessageStream) -> None:
        await trio.sleep(0.3)  # let the client's sends back up first
        try:
            while True:
                received.append(await stream.receive())
        except ConnectionBroken:
            done.set()

    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            address = await start(nursery, collector, **over)
            stream = await _connect(address)
            big = "y" * (1024 * 1024)
            for _ in range(8):
                with trio.move_on_after(0.01):
                    await stream.send(big)  # cancelled mid-frame once buffers fill
            await stream.send("last")
            await stream.aclose()
            await done.wait()
            assert received[-1] == "last"
            assert all(message == big for message in received[:-1])
            nursery.cancel_scope.cancel()


async def test_a_failing_handler_leaves_the_server_and_other_clients_alone(caplog):
    async def fragile(stream: MessageStream) -> None:
        while True:
            message = await stream.receive()
            if message == "boom":
                raise RuntimeError("handler bug")
            await stream.send(message)

    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            address = await start(nursery, fragile)
            bystander = await _connect(address)
            victim = await _connect(address)
            await victim.send("boom")
            with pytest.raises(ConnectionBroken):
                await victim.receive()
            await _echo(bystander, "unaffected")
            fresh = await _connect(address)
            await _echo(fresh, "new connections too")
            assert "handler bug" in caplog.text
            for stream in (bystander, victim, fresh):
                await stream.aclose()
            nursery.cancel_scope.cancel()


async def test_many_concurrent_clients():
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            address = await start(nursery)

            async def client(number: int) -> None:
                stream = await _connect(address)
                for round_ in range(5):
                    await _echo(stream, f"client {number} round {round_}")
                await stream.aclose()

            async with trio.open_nursery() as clients:
                for number in range(100):
                    clients.start_soon(client, number)
            nursery.cancel_scope.cancel()
