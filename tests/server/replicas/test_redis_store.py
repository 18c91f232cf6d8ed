"""The Redis store beyond the shared contract (tests/store): what only a
store on another server has — credentials in the URL, the server going away
and coming back, the bounded buffer meanwhile."""

from __future__ import annotations

import time

import pytest
import trio

from gemini_split.server.store import SessionRecord, StoredEvent, StoreError, hash_token, open_store
from gemini_split.server.store.redis import RedisStore, redacted
from gemini_split.testing import redis_server as rs

pytestmark = pytest.mark.skipif(not rs.available(), reason=rs.MISSING)


def record(sid: str = "s-1") -> SessionRecord:
    now = time.time()
    return SessionRecord(id=sid, owner="alice", token_hash=hash_token("t"), created=now, updated=now)


def events(start: int, stop: int) -> list[StoredEvent]:
    return [StoredEvent(seq, "r-1", f'{{"seq":{seq}}}') for seq in range(start, stop + 1)]


def test_a_url_is_shown_without_its_credentials():
    assert redacted("redis://bob:s3cret@10.0.0.5:6380/2?prefix=x") == "redis://10.0.0.5:6380/2"
    assert redacted("rediss://:pw@[::1]:6379/0") == "rediss://[::1]:6379/0"


async def test_open_store_picks_redis_for_a_redis_url():
    assert isinstance(open_store("redis://127.0.0.1:1/0"), RedisStore)
    assert isinstance(open_store("rediss://127.0.0.1:1/0"), RedisStore)


async def test_an_unreachable_server_is_a_store_error_naming_it_without_the_password():
    store = RedisStore(f"redis://bob:s3cret@127.0.0.1:{rs.free_port()}/0", command_timeout=2)
    with trio.fail_after(10), pytest.raises(StoreError) as err:
        await store.open()
    message = str(err.value)
    assert "redis://127.0.0.1:" in message and "cannot reach Redis" in message
    assert "s3cret" not in message and "bob" not in message


@pytest.mark.timeout(60)  # a real redis-server starts; slow on a loaded machine
async def test_the_password_comes_from_the_url_and_a_wrong_one_is_refused(tmp_path):
    with rs.RedisServer(tmp_path / "r", password="pa55-word") as server:
        good = RedisStore(server.url)
        with trio.fail_after(25):
            await good.open()
            try:
                await good.create(record())
                assert (await good.get("s-1")).owner == "alice"
            finally:
                await good.aclose()
        bad = RedisStore(server.url.replace("pa55-word", "guess"))
        with trio.fail_after(25), pytest.raises(StoreError) as err:
            await bad.open()
        assert "guess" not in str(err.value) and "pa55-word" not in str(err.value)


async def test_events_appended_while_redis_is_down_are_written_when_it_is_back(tmp_path):
    server = rs.RedisServer(tmp_path / "r").start()
    store = RedisStore(server.url, command_timeout=1)
    try:
        with trio.fail_after(30):
            await store.open()
            await store.create(record())
            store.append_events("s-1", events(1, 5))
            await store.flush()
            server.stop()
            store.append_events("s-1", events(6, 20))
            while store.write_error is None:
                await trio.sleep(0.05)
            assert "redis://127.0.0.1" in str(store.write_error)
            with pytest.raises(StoreError):  # a durable call says so
                await store.save_turn("s-1", history=[], updated=time.time(), turns=1)
            server.start()  # same port, same append-only file
            await store.flush()
            assert store.write_error is None
            got = await store.events_after("s-1", 0)
            assert [e.seq for e in got] == list(range(1, 21))
            assert store.overflowed == set()
    finally:
        with trio.fail_after(10):
            await store.aclose()
        server.stop()


async def test_past_the_buffer_limit_the_sessions_that_lost_events_are_named(tmp_path):
    server = rs.RedisServer(tmp_path / "r").start()
    store = RedisStore(server.url, command_timeout=1, buffer_limit=10)
    try:
        with trio.fail_after(30):
            await store.open()
            await store.create(record("s-a"))
            await store.create(record("s-b"))
            server.stop()
            store.append_events("s-a", events(1, 8))
            store.append_events("s-b", events(1, 8))
            assert store.overflowed == {"s-a"}  # its oldest six went
    finally:
        with trio.fail_after(10):
            await store.aclose()
        server.stop()


async def test_a_replayed_batch_is_not_written_twice(redis_server):
    """The writer may send a batch again after a failure it could not tell
    from a lost answer: events at or below the stored last seq are skipped."""
    store = RedisStore(redis_server.url_with_prefix())
    with trio.fail_after(10):
        await store.open()
        try:
            await store.create(record())
            store.append_events("s-1", events(1, 3))
            store.append_events("s-1", events(2, 4))
            got = await store.events_after("s-1", 0)
        finally:
            await store.aclose()
    assert [e.seq for e in got] == [1, 2, 3, 4]


async def test_events_a_restarted_redis_lost_after_acknowledging_them_are_written_again(redis_server):
    """With ``appendfsync everysec`` a Redis killed while an fsync is slow
    comes back without writes it had acknowledged (its append-only file was
    behind). The replica's next write finds the hole and fills it from what
    it wrote lately: the log a resuming client replays has no gap."""
    store = RedisStore(redis_server.url_with_prefix())
    with trio.fail_after(10):
        await store.open()
        try:
            await store.create(record())
            store.append_events("s-1", events(1, 5))
            await store.flush()
            # What Redis has after such a restart: events 4 and 5 gone.
            key = store.key("s-1", "e")
            async with store._command("lose events"):
                kept = await store.client.xrange(key, "-", "3-0")
                await store.client.delete([key])
                for row in kept:
                    await store.client.xadd(key, dict(row.field_values), identifier=row.identifier)
                await store.client.hset(store.key("s-1", "s"), {"last_seq": "3", "kept": "3"})
            store.append_events("s-1", events(6, 7))
            got = await store.events_after("s-1", 0)
        finally:
            await store.aclose()
    assert [e.seq for e in got] == [1, 2, 3, 4, 5, 6, 7]


async def test_after_a_restart_that_lost_events_an_idle_session_gets_them_back(tmp_path):
    """The session writes nothing more after the restart (no next write to
    find the hole): the store sees Redis's ``run_id`` change and writes the
    events it wrote lately again."""
    server = rs.RedisServer(tmp_path / "r").start()
    store = RedisStore(server.url, command_timeout=1)
    try:
        with trio.fail_after(30):
            await store.open()
            await store.create(record())
            store.append_events("s-1", events(1, 5))
            await store.flush()
            key = store.key("s-1", "e")
            async with store._command("lose events"):  # what the append-only file had: 1-3
                kept = await store.client.xrange(key, "-", "3-0")
                await store.client.delete([key])
                for row in kept:
                    await store.client.xadd(key, dict(row.field_values), identifier=row.identifier)
                await store.client.hset(store.key("s-1", "s"), {"last_seq": "3", "kept": "3"})
            server.stop()
            server.start()  # a new run_id, the append-only file without 4-5
            while [e.seq for e in await _events_or_none(store)] != [1, 2, 3, 4, 5]:
                await trio.sleep(0.1)
    finally:
        with trio.fail_after(10):
            await store.aclose()
        server.stop()


async def _events_or_none(store: RedisStore) -> list[StoredEvent]:
    try:
        return await store.events_after("s-1", 0) or []
    except StoreError:
        return []  # still loading


async def test_many_relays_blocked_in_xread_do_not_hold_up_writes(redis_server, monkeypatch):
    """Each relay waits in XREAD BLOCK on a connection of its own. With
    more relays than the command pool has connections (64), writes and
    lease renewals must not queue behind them: blocking reads have a pool
    of their own."""
    from gemini_split.server.replicas import replica as redis_replica

    monkeypatch.setattr(redis_replica, "BLOCK_MS", 60_000)  # a read blocks for the whole test
    store = RedisStore(redis_server.url_with_prefix())
    replica = redis_replica.Replica(store)
    got: list[list[str]] = []
    with trio.fail_after(20):
        await store.open()
        try:
            await store.create(record("s-busy"))
            async with trio.open_nursery() as nursery:
                async def follow(sid: str) -> None:
                    async for batch in replica.follow(sid, 0):
                        got.append(batch)
                        return

                for i in range(80):
                    nursery.start_soon(follow, f"s-idle-{i}")
                nursery.start_soon(follow, "s-busy")
                await trio.sleep(0.5)  # the reads are blocked in Redis by now
                with trio.fail_after(5):  # before the fix: until a 60-s read returns
                    store.append_events("s-busy", events(1, 1))
                    await store.flush()
                    assert (await store.get("s-busy")).last_seq == 1
                    while not got:
                        await trio.sleep(0.01)
                nursery.cancel_scope.cancel()
        finally:
            await store.aclose()
    assert got == [['{"seq":1}']]


async def test_a_session_does_not_wait_for_the_events_another_session_queued(redis_server):
    """A turn's durable calls wait for that session's own queued events,
    not for the whole queue (1,000 sessions streaming at once)."""
    store = RedisStore(redis_server.url_with_prefix())
    with trio.fail_after(20):
        await store.open()
        try:
            await store.create(record("s-a"))
            await store.create(record("s-b"))
            gate = trio.Event()
            write_batch = store._write_batch

            async def held(batch):  # s-a's writes are slow to land
                if any(sid == "s-a" for sid, _ in batch):
                    await gate.wait()
                await write_batch(batch)

            store._write_batch = held
            store.append_events("s-a", events(1, 3))
            with trio.fail_after(5):  # before: until s-a's batch landed, i.e. never
                await store.set_running("s-b", "r-1", updated=time.time())
                assert (await store.get("s-b")).running_request == "r-1"
            gate.set()
            assert [e.seq for e in await store.events_after("s-a", 0)] == [1, 2, 3]  # s-a's reads wait
        finally:
            await store.aclose()


async def test_each_caller_waiting_while_redis_is_down_gets_an_error_of_its_own(tmp_path):
    """Not the writer's one StoreError raised again and again: every raise
    would add the raiser's frames to its traceback (found by the soak: a
    replica's memory grew while Redis was away)."""
    server = rs.RedisServer(tmp_path / "r").start()
    store = RedisStore(server.url, command_timeout=1)
    try:
        with trio.fail_after(30):
            await store.open()
            await store.create(record())
            server.stop()
            store.append_events("s-1", events(1, 3))
            while store.write_error is None:
                await trio.sleep(0.05)
            caught = []
            for _ in range(3):
                with pytest.raises(StoreError) as err:
                    await store.set_running("s-1", "r-2", updated=time.time())
                caught.append(err.value)
            assert len({id(exc) for exc in caught}) == 3
            assert all(exc is not store.write_error for exc in caught)
            assert all(str(exc) == str(store.write_error) for exc in caught)
    finally:
        with trio.fail_after(10):
            await store.aclose()
        server.stop()
