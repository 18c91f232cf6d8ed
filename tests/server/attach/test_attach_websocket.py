"""Attach over real WebSocket connections (issue 11 "How it is checked"):
the replay query parameters of the seeds' ACP bridge, and a stalled watcher
on a real socket."""

from __future__ import annotations

from contextlib import asynccontextmanager

import pytest
import trio

from gemini_split.protocol import Connected, Error, Finished, GenerateContentRequest, Hello, RequestStarted, TextDelta
from gemini_split.server.model.scripted import ScriptedModel
from gemini_split.testing.service import open_test_service
from gemini_split.transport import ConnectOptions, get_transport

from tests.server.helpers import RawClient
from .test_attach_server import _text, _words

WEBSOCKET = "ws://127.0.0.1:0"


@asynccontextmanager
async def ws_hello(address, **fields):
    stream = await get_transport(address).open_connection(address, ConnectOptions())
    raw = RawClient(stream)
    try:
        await raw.send(Hello(client="raw-ws", **fields))
        yield raw, await raw.receive()
    finally:
        await stream.aclose()


async def test_the_websocket_query_limit_replays_the_current_turn_from_its_start():
    model = ScriptedModel([{"text": "older"}, {"text": _words(60), "chunks": 60, "chunk_delay": 0.01}])
    async with open_test_service(model, address=WEBSOCKET) as (_, address):
        async with ws_hello(address) as (driver, first):
            await driver.send(GenerateContentRequest(prompt="one"))
            await driver.receive_until(lambda m: isinstance(m, Finished))
            await driver.send(GenerateContentRequest(prompt="two"))
            for _ in range(5):
                await driver.receive_until(lambda m: isinstance(m, TextDelta))
            async with ws_hello(address + "/?limit=1", session_id=first.session_id) as (late, joined):
                seen = await late.receive_until(lambda m: isinstance(m, Finished))
    assert isinstance(joined, Connected)
    assert isinstance(seen[0], RequestStarted) and seen[0].prompt == "two" and seen[0].replayed
    assert _text(seen) == _words(60)


@pytest.mark.parametrize("query", ["limit=-1", "since=soon", "before=99999999999999999999"])
async def test_a_bad_query_parameter_is_invalid_field(query):
    async with open_test_service(ScriptedModel([]), address=WEBSOCKET) as (_, address):
        async with ws_hello(address) as (_, first):
            async with ws_hello(f"{address}/?{query}", session_id=first.session_id) as (_, reply):
                pass
    assert isinstance(reply, Error) and reply.code == "invalid_field" and reply.fatal


@pytest.mark.timeout(90)
async def test_a_stalled_watcher_on_a_real_socket_leaves_the_drivers_stream_unaffected():
    text = _words(600_000)  # about 4 MB: more than the kernel buffers a stalled socket
    # A chunk per millisecond: the driver, reading in this same Trio run,
    # drains its socket whenever the model waits, so only the watcher that
    # never reads can fall behind. With no wait at all the driver raced the
    # model for its own 64 KB outbox and lost now and then under load.
    model = ScriptedModel([{"text": text, "chunks": 2000, "chunk_delay": 0.001}])
    async with open_test_service(model, address=WEBSOCKET, outbox_limit=200, outbox_bytes=64 * 1024) as (service, address):
        async with ws_hello(address) as (driver, first):
            async with ws_hello(address, session_id=first.session_id, role="observer"):
                # This watcher never reads again: its socket fills, then its outbox.
                await driver.send(GenerateContentRequest(prompt="stream"))
                with trio.fail_after(60):
                    seen = await driver.receive_until(lambda m: isinstance(m, Finished), limit=1_000_000)
                (session,) = service.sessions.values()
                roles = [v.role for v in session.views]
    assert _text(seen) == text
    assert roles == ["driver"]  # the watcher was cut off
