"""A turn's first delta does not wait for the session store (issue 18 §3).

The store writes a turn's start (the session's record at its first turn,
``running_request`` at every turn) beside the turn, not before it: with
1,000 sessions starting at once, each first delta waited seconds behind
every other session's writes in the store's one writer thread. What a
client is promised stays: ``finished`` comes after the turn is durable, and
every event reaches the store, in order, after the record — also the events
logged while the record was being written, however many (the in-memory log
is bounded; they are kept until the record exists).
"""

from __future__ import annotations

import pytest
import trio

from gemini_split.protocol import Error, Finished, GenerateContentRequest, RequestStarted, TextDelta
from gemini_split.server.config import ServerConfig
from gemini_split.server.model.scripted import ScriptedModel
from gemini_split.server.service import AgentService
from gemini_split.server.store import SessionRecord, StoreError
from gemini_split.server.store.sqlite import SQLiteStore
from gemini_split.transport import ServeOptions, get_transport

from .helpers import raw_client


class StalledStore(SQLiteStore):
    """The real SQLite store, whose record writes (``create``,
    ``set_running``) wait until :attr:`released` is set — a disk or writer
    thread that is busy with everyone else's writes. ``fail_creates``:
    that many ``create`` calls fail first, as a full disk would."""

    def __init__(self, directory, **kwargs):
        super().__init__(directory, **kwargs)
        self.released = trio.Event()
        self.writes_waiting = 0
        self.fail_creates = 0

    async def create(self, record: SessionRecord) -> None:
        self.writes_waiting += 1
        await self.released.wait()
        self.writes_waiting -= 1
        if self.fail_creates:
            self.fail_creates -= 1
            raise StoreError(f"{self.path}: cannot write the session database: disk full (test)")
        await super().create(record)

    async def set_running(self, session_id: str, request_id: str | None, *, updated: float) -> None:
        self.writes_waiting += 1
        await self.released.wait()
        self.writes_waiting -= 1
        await super().set_running(session_id, request_id, updated=updated)


async def _serve(nursery, model: ScriptedModel, store: SQLiteStore, **config) -> tuple[AgentService, str]:
    service = AgentService(model, ServerConfig(model="scripted", **config), store=store)
    await nursery.start(service.run)
    address = await nursery.start(get_transport("loopback:").serve, "loopback:", service.handle_connection,
                                  ServeOptions())
    return service, address


async def _stored_events(store: SQLiteStore, session_id: str) -> list:
    await store.flush()
    return await store.events_after(session_id, 0)


@pytest.mark.timeout(30)
async def test_the_first_delta_goes_out_while_the_store_still_writes_the_session(tmp_path):
    store = StalledStore(tmp_path / "state")
    model = ScriptedModel([{"text": "first answer", "chunks": 2}])
    async with trio.open_nursery() as nursery:
        service, address = await _serve(nursery, model, store)
        async with raw_client(address) as client:
            await client.send(GenerateContentRequest(prompt="hello"))
            with trio.fail_after(10):
                seen = await client.receive_until(lambda m: isinstance(m, TextDelta))
            session_id = next(iter(service.sessions))
            # The delta is out, and the session's record is not written yet.
            assert store.writes_waiting == 1
            assert await store.get(session_id) is None
            assert not any(isinstance(m, Finished) for m in seen)
            store.released.set()
            with trio.fail_after(10):
                seen += await client.receive_until(lambda m: isinstance(m, Finished | Error))
            assert isinstance(seen[-1], Finished) and seen[-1].reason == "stop"
            # finished came after the turn was durable: the record has it.
            record = await store.get(session_id)
            assert record is not None and record.turns == 1 and record.running_request is None
            assert record.history[-1]["parts"] == [{"text": "first answer"}]
            # Every event the client saw is stored, in order, none missing.
            stored = await _stored_events(store, session_id)
            numbered = [m.seq for m in seen if m.seq is not None]
            assert [e.seq for e in stored] == list(range(1, numbered[-1] + 1))
            assert [e.seq for e in stored if e.type in ("request_started", "text_delta", "finished")] == [
                m.seq for m in seen if isinstance(m, RequestStarted | TextDelta | Finished)]
        nursery.cancel_scope.cancel()
    await store.aclose()


@pytest.mark.timeout(30)
async def test_events_logged_while_the_record_is_written_all_reach_the_store(tmp_path):
    """More events than the in-memory log keeps (10) are logged before the
    record exists; the store gets every one of them after it."""
    store = StalledStore(tmp_path / "state")
    chunks = 60
    model = ScriptedModel([{"text": "".join(f"w{i:02d} " for i in range(chunks)), "chunks": chunks,
                            "chunk_delay": 0.001}])
    async with trio.open_nursery() as nursery:
        service, address = await _serve(nursery, model, store, replay_capacity=10)
        async with raw_client(address) as client:
            await client.send(GenerateContentRequest(prompt="count"))
            deltas = 0
            seen = []
            with trio.fail_after(10):
                while deltas < 30:  # the client reads each delta as it comes: no merging
                    message = await client.receive()
                    seen.append(message)
                    deltas += isinstance(message, TextDelta)
            session_id = next(iter(service.sessions))
            assert service.sessions[session_id].log.last_seq > 10 + 1  # beyond what memory keeps
            assert await store.get(session_id) is None
            store.released.set()
            with trio.fail_after(10):
                seen += await client.receive_until(lambda m: isinstance(m, Finished | Error))
            assert isinstance(seen[-1], Finished)
            stored = await _stored_events(store, session_id)
            assert stored is not None
            assert [e.seq for e in stored] == list(range(1, seen[-1].seq + 1))
            text = "".join(m.content for m in seen if isinstance(m, TextDelta))
            assert text == "".join(f"w{i:02d} " for i in range(chunks))
        nursery.cancel_scope.cancel()
    await store.aclose()


@pytest.mark.timeout(30)
async def test_a_failed_record_write_is_said_and_the_next_turn_writes_it(tmp_path):
    store = StalledStore(tmp_path / "state")
    store.released.set()
    store.fail_creates = 1
    model = ScriptedModel([{"text": "one"}, {"text": "two"}])
    async with trio.open_nursery() as nursery:
        service, address = await _serve(nursery, model, store)
        async with raw_client(address) as client:
            await client.send(GenerateContentRequest(prompt="first"))
            with trio.fail_after(10):
                first = await client.receive_until(lambda m: isinstance(m, Finished))
            storage = [m for m in first if isinstance(m, Error)]
            assert [e.code for e in storage] == ["storage_error"] and not storage[0].fatal
            assert "".join(m.content for m in first if isinstance(m, TextDelta)) == "one"
            session_id = next(iter(service.sessions))
            assert await store.get(session_id) is None
            await client.send(GenerateContentRequest(prompt="second"))
            with trio.fail_after(10):
                second = await client.receive_until(lambda m: isinstance(m, Finished))
            assert not any(isinstance(m, Error) for m in second)
            record = await store.get(session_id)
            assert record is not None and record.turns == 2
            stored = await _stored_events(store, session_id)
            # The first turn's events (still in memory) were written with the record.
            assert [e.seq for e in stored] == list(range(1, second[-1].seq + 1))
        nursery.cancel_scope.cancel()
    await store.aclose()
