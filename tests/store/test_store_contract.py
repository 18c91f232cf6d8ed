"""The contract every session-store backend keeps (see
``gemini_split/server/store/__init__.py``).

Each test runs once per backend: a new backend (Redis, …) adds one entry to
``BACKENDS`` and must pass every test here unchanged.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import trio

from gemini_split.server.store import (
    SessionRecord,
    SessionStore,
    StoredEvent,
    hash_token,
    make_title,
    open_store,
    token_matches,
)

CAPACITY = 50


def _memory(tmp_path: Path) -> SessionStore:
    return open_store(":memory:", replay_capacity=CAPACITY)


def _sqlite(tmp_path: Path) -> SessionStore:
    return open_store(tmp_path / "state", replay_capacity=CAPACITY)


def _redis(url: str) -> SessionStore:
    from gemini_split.server.store.redis import RedisStore

    return RedisStore(url, replay_capacity=CAPACITY)


BACKENDS: dict[str, Callable[[Path], SessionStore]] = {"memory": _memory, "sqlite": _sqlite}
#: Backends on a server: built from a URL (a real redis-server, started once
#: per test process on a free loopback port: the ``redis_server`` fixture).
SERVER_BACKENDS: dict[str, Callable[[str], SessionStore]] = {"redis": _redis}


@pytest.fixture(params=sorted(BACKENDS) + sorted(SERVER_BACKENDS))
async def store(request, tmp_path) -> AsyncIterator[SessionStore]:
    if request.param in SERVER_BACKENDS:
        s = SERVER_BACKENDS[request.param](request.getfixturevalue("redis_server").url_with_prefix())
    else:
        s = BACKENDS[request.param](tmp_path)
    with trio.fail_after(10):
        await s.open()
    try:
        yield s
    finally:
        with trio.fail_after(10):
            await s.aclose()


def record(sid: str = "s-1", owner: str = "alice", *, updated: float | None = None, token: str = "tok") -> SessionRecord:
    now = time.time() if updated is None else updated
    return SessionRecord(id=sid, owner=owner, token_hash=hash_token(token), created=now, updated=now,
                         model="m", title="t")


def events(start: int, stop: int, request_id: str | None = "r-1") -> list[StoredEvent]:
    return [StoredEvent(seq, request_id, f'{{"type":"text_delta","seq":{seq}}}') for seq in range(start, stop + 1)]


async def test_a_created_session_reads_back_as_written(store):
    with trio.fail_after(5):
        r = record()
        r.history = [{"role": "user", "parts": [{"text": "héllo ✓"}]}]
        r.approval = {"mode": "yolo"}
        await store.create(r)
        got = await store.get("s-1")
    assert got == r


async def test_an_unknown_id_is_none(store):
    with trio.fail_after(5):
        assert await store.get("s-nope") is None
        assert await store.events_after("s-nope", 0) is None
        assert await store.delete("s-nope") is False


async def test_sessions_are_listed_per_owner_newest_first(store):
    with trio.fail_after(5):
        await store.create(record("s-old", updated=100.0))
        await store.create(record("s-new", updated=300.0))
        await store.create(record("s-mid", updated=200.0))
        await store.create(record("s-bob", owner="bob", updated=400.0))
        mine = await store.list_sessions("alice")
        assert [s.id for s in mine] == ["s-new", "s-mid", "s-old"]
        assert [s.id for s in await store.list_sessions("bob")] == ["s-bob"]
        assert await store.list_sessions("carol") == []


async def test_save_turn_replaces_history_and_moves_the_session_up(store):
    with trio.fail_after(5):
        await store.create(record("s-a", updated=100.0))
        await store.create(record("s-b", updated=200.0))
        history = [{"role": "user", "parts": [{"text": "hi"}]}, {"role": "model", "parts": [{"text": "yo"}]}]
        await store.save_turn("s-a", history=history, updated=300.0, turns=1, title="hi", model="gemini-x")
        got = await store.get("s-a")
        assert (got.history, got.turns, got.title, got.model, got.updated) == (history, 1, "hi", "gemini-x", 300.0)
        assert [s.id for s in await store.list_sessions("alice")] == ["s-a", "s-b"]
        # title and model are kept when not given
        await store.save_turn("s-a", history=history * 2, updated=301.0, turns=2)
        got = await store.get("s-a")
        assert (got.title, got.model, got.turns, len(got.history)) == ("hi", "gemini-x", 2, 4)


async def test_the_rewind_timeline_and_archive_are_kept_and_left_alone_when_not_given(store):
    """(1.4) What rewinding needs survives with the session: a turn saved
    without them leaves them as they were; the archive (large) is written
    only when given."""
    timeline = {"prefix": 2, "marks": [["r-1", 0, 3], ["r-2", 2, 9]], "calls": {"s-4": ["r-1", 1, 0, 5, 3]},
                "hidden": [[12, None]], "requests": {"r-1": 3, "r-2": 9}}
    archive = [{"role": "user", "parts": [{"text": "é, the first prompt"}]},
               {"role": "model", "parts": [{"text": "x"}]}]
    with trio.fail_after(5):
        await store.create(record())
        assert ((await store.get("s-1")).timeline, (await store.get("s-1")).archive) == ({}, [])
        await store.save_turn("s-1", history=[], updated=time.time(), turns=1, timeline=timeline, archive=archive)
        got = await store.get("s-1")
        assert (got.timeline, got.archive) == (timeline, archive)
        await store.save_turn("s-1", history=[], updated=time.time(), turns=2)
        got = await store.get("s-1")
        assert (got.timeline, got.archive) == (timeline, archive)
        await store.save_turn("s-1", history=[], updated=time.time(), turns=2, timeline={"prefix": 0})
        got = await store.get("s-1")
        assert (got.timeline, got.archive) == ({"prefix": 0}, archive)


async def test_a_running_request_is_remembered_until_the_turn_is_saved(store):
    with trio.fail_after(5):
        await store.create(record())
        await store.set_running("s-1", "r-7", updated=time.time())
        assert (await store.get("s-1")).running_request == "r-7"
        await store.save_turn("s-1", history=[], updated=time.time(), turns=1)
        assert (await store.get("s-1")).running_request is None


async def test_the_log_says_which_request_was_left_without_an_end(store):
    def typed(seq: int, kind: str, request_id: str | None) -> StoredEvent:
        return StoredEvent(seq, request_id, f'{{"type":"{kind}","seq":{seq}}}', 0, kind)

    with trio.fail_after(5):
        await store.create(record())
        assert await store.unended_request("s-1") == (False, None)
        store.append_events("s-1", [typed(1, "request_started", "r-1"), typed(2, "text_delta", "r-1"),
                                    typed(3, "finished", "r-1")])
        assert await store.unended_request("s-1") == (True, None)
        # The next request started and nothing ended it (the record's running mark not written).
        store.append_events("s-1", [typed(4, "clients_changed", None), typed(5, "request_started", "r-2"),
                                    typed(6, "text_delta", "r-2")])
        assert (await store.get("s-1")).running_request is None
        assert await store.unended_request("s-1") == (True, "r-2")
        store.append_events("s-1", [typed(7, "error", "r-2")])
        assert await store.unended_request("s-1") == (True, None)


async def test_appended_events_are_read_back_in_order_without_a_flush(store):
    with trio.fail_after(5):
        await store.create(record())
        store.append_events("s-1", events(1, 3))
        store.append_events("s-1", events(4, 10))
        got = await store.events_after("s-1", 0)
        assert [e.seq for e in got] == list(range(1, 11))
        assert got[0] == events(1, 1)[0]
        assert [e.seq for e in await store.events_after("s-1", 7)] == [8, 9, 10]
        assert await store.events_after("s-1", 10) == []
        assert [e.seq for e in await store.events_after("s-1", 2, limit=3)] == [3, 4, 5]
        assert (await store.get("s-1")).last_seq == 10


async def test_events_beyond_capacity_are_dropped_and_a_gap_is_reported(store):
    with trio.fail_after(5):
        await store.create(record())
        last = 3 * CAPACITY
        for start in range(1, last, 10):
            store.append_events("s-1", events(start, start + 9))
        await store.flush()
        kept = await store.events_after("s-1", last - CAPACITY)
        assert [e.seq for e in kept] == list(range(last - CAPACITY + 1, last + 1))
        assert await store.events_after("s-1", last - CAPACITY - 1) is None
        assert await store.events_after("s-1", 0) is None


async def test_events_are_kept_apart_per_session(store):
    with trio.fail_after(5):
        await store.create(record("s-a"))
        await store.create(record("s-b"))
        store.append_events("s-a", events(1, 3))
        store.append_events("s-b", events(1, 2, request_id="r-b"))
        assert [e.request_id for e in await store.events_after("s-b", 0)] == ["r-b", "r-b"]
        assert len(await store.events_after("s-a", 0)) == 3


async def test_delete_removes_the_session_and_its_events(store):
    with trio.fail_after(5):
        await store.create(record())
        store.append_events("s-1", events(1, 5))
        assert await store.delete("s-1") is True
        assert await store.get("s-1") is None
        assert await store.events_after("s-1", 0) is None
        assert await store.list_sessions("alice") == []


async def test_idle_sessions_expire(store):
    with trio.fail_after(5):
        await store.create(record("s-idle", updated=1000.0))
        await store.create(record("s-busy", updated=5000.0))
        store.append_events("s-idle", events(1, 3))
        assert await store.expire(idle_before=2000.0) == ["s-idle"]
        assert await store.get("s-idle") is None
        assert await store.get("s-busy") is not None


async def test_the_store_keeps_a_hash_of_the_resume_token_never_the_token(store):
    with trio.fail_after(5):
        token = "secret-resume-token-123"
        await store.create(record(token=token))
        got = await store.get("s-1")
    assert token not in repr(got)
    assert token_matches(token, got.token_hash)
    assert not token_matches("secret-resume-token-124", got.token_hash)
    assert not token_matches(None, got.token_hash)
    with trio.fail_after(5):
        await store.set_token_hash("s-1", hash_token("a-new-token"))
        got = await store.get("s-1")
    assert token_matches("a-new-token", got.token_hash) and not token_matches(token, got.token_hash)


def test_titles_are_the_first_line_shortened():
    assert make_title("  fix   the bug\nin foo.py") == "fix the bug"
    long = make_title("word " * 40)
    assert len(long) <= 60 and long.endswith("…")


# --- late-joiner replay (issue 11): timestamps and types ----------------------


async def test_events_keep_their_timestamp_and_type_and_marks_list_them(store):
    with trio.fail_after(5):
        await store.create(record())
        kept = [StoredEvent(1, "r-1", '{"type":"request_started"}', 1_000, "request_started"),
                StoredEvent(2, "r-1", '{"type":"text_delta"}', 1_005, "text_delta"),
                StoredEvent(3, None, '{"type":"clients_changed"}', 2_000, "clients_changed")]
        store.append_events("s-1", kept)
        assert await store.events_after("s-1", 0) == kept
        marks = await store.event_marks("s-1")
        assert await store.event_marks("s-nope") is None
    assert [(m.seq, m.timestamp, m.request_id, m.type) for m in marks] == [
        (1, 1_000, "r-1", "request_started"), (2, 1_005, "r-1", "text_delta"), (3, 2_000, None, "clients_changed")]


async def test_marks_cover_only_the_events_still_kept(store):
    with trio.fail_after(5):
        await store.create(record())
        store.append_events("s-1", events(1, CAPACITY + 10))
        marks = await store.event_marks("s-1")
    assert [m.seq for m in marks] == list(range(11, CAPACITY + 11))
