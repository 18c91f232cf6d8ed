"""A serve on Redis while Redis is away: what a client sees is an error it
can read, never its connection closed without a word (found by the chaos
soak, bench/soak.py)."""

from __future__ import annotations

from contextlib import asynccontextmanager

import pytest
import trio

from gemini_split.protocol import ClientsChanged, Error, Finished, GenerateContentRequest, Hello, History, State
from gemini_split.server.model.scripted import ScriptedModel
from gemini_split.server.store.redis import RedisStore
from gemini_split.testing import redis_server as rs
from gemini_split.testing.service import open_test_service
from gemini_split.transport import ConnectOptions, get_transport
from tests.server.helpers import RawClient

pytestmark = pytest.mark.skipif(not rs.available(), reason=rs.MISSING)


@asynccontextmanager
async def hello(address, **fields):
    """A raw connection after ``hello(**fields)``; yields (raw, first reply)."""
    stream = await get_transport(address).open_connection(address, ConnectOptions())
    raw = RawClient(stream)
    try:
        await raw.send(Hello(client="raw-test", **fields))
        yield raw, await raw.receive()
    finally:
        await stream.aclose()


@pytest.mark.timeout(60)  # a real redis-server starts; slow on a loaded machine
async def test_a_resume_whose_replay_needs_redis_while_it_is_away_is_told_so_and_kept(tmp_path):
    """The events a resuming client asks for are no longer in memory and
    Redis is away: the client hears ``storage_error``, then the session's
    state and history to redraw, and its connection stays open."""
    server = rs.RedisServer(tmp_path / "r").start()
    store = RedisStore(server.url, command_timeout=1)
    model = ScriptedModel([{"text": "".join(f"w{i} " for i in range(30)), "chunks": 30, "chunk_delay": 0.002}])
    try:
        with trio.fail_after(40):
            await store.open()
            async with open_test_service(model, store=store, replay_capacity=5) as (_, address):
                async with hello(address) as (raw, connected):
                    await raw.send(GenerateContentRequest(prompt="go"))
                    await raw.receive_until(lambda m: isinstance(m, Finished))
                server.stop()
                async with hello(address, session_id=connected.session_id, resume_token=connected.resume_token,
                                 last_seq=1) as (raw, again):
                    seen = await raw.receive_until(lambda m: isinstance(m, History))
                    told = [m for m in seen if not isinstance(m, ClientsChanged)]
                    assert again.resumed
                    error, state, history = told
                    assert isinstance(error, Error) and error.code == "storage_error" and not error.fatal
                    assert "redis://127.0.0.1" in error.message
                    assert isinstance(state, State) and not state.busy
                    assert isinstance(history, History) and [m["role"] for m in history.messages] == [
                        "user", "model"]
    finally:
        with trio.fail_after(10):
            await store.aclose()
        server.stop()
