"""Issue 44.1: a session taken over by another replica after its runner
stopped — what its clients see (found by bench/soak.py). Two replicas
(AgentService + Replica each) on a real redis-server, raw clients on the
loopback transport."""

from __future__ import annotations

import time

import pytest
import trio
from msgspec.structs import replace

from gemini_split.protocol import Error, Finished, GenerateContentRequest, GetState, RequestStarted, State, encode
from gemini_split.server.store import StoredEvent
from gemini_split.server.store.redis import RedisStore
from gemini_split.stamping import stamp
from gemini_split.testing import redis_server as rs

from tests.server.attach.test_attach_server import hello
from .test_relay import _turn, two_replicas

pytestmark = [pytest.mark.skipif(not rs.available(), reason=rs.MISSING), pytest.mark.timeout(60)]


async def test_a_request_whose_start_was_stored_but_not_its_running_mark_ends_interrupted(redis_server):
    """The runner stored a prompt's ``request_started`` (its clients saw
    it) and stopped before the session's "running" mark reached Redis: the
    replica taking the session over ends that request ``interrupted``, so
    the client waiting for it gets an end (before: it waited for ever)."""
    async with two_replicas(redis_server, [{"text": "first"}]) as ((service_a, _), (at_a, at_b)):
        async with hello(at_a, label="laptop") as (laptop, first):
            *_, done = await _turn(laptop, "first")
        # What the stopped runner left in Redis: the next prompt's start,
        # and no "running" mark (nor any end) for it.
        store = RedisStore(f"{service_a.store.url}?prefix={service_a.store.prefix}")  # the replicas' keys
        await store.open()
        try:
            with trio.fail_after(10):
                while not await store.events_after(first.session_id, done.seq):
                    await trio.sleep(0.02)  # the laptop's leave, stored
            [left] = await store.events_after(first.session_id, done.seq)
            started = replace(stamp(RequestStarted(request_id="r-left-running", prompt="second", client="laptop")),
                              seq=left.seq + 1)
            store.append_events(first.session_id, [StoredEvent(started.seq, started.request_id, encode(started),
                                                               int(time.time() * 1000), started.TYPE)])
            await store.flush()
            assert (await store.get(first.session_id)).running_request is None
        finally:
            await store.aclose()
        async with hello(at_b, session_id=first.session_id, resume_token=first.resume_token,
                         last_seq=done.seq, label="laptop") as (resumed, _):
            events = await resumed.receive_until(
                lambda m: isinstance(m, (Error, Finished)) and m.request_id == "r-left-running")
    seqs = [e.seq for e in events if e.seq is not None]
    assert seqs == list(range(done.seq + 1, seqs[-1] + 1)), seqs  # no gap, nothing twice
    end = events[-1]
    assert isinstance(end, Error) and end.code == "interrupted", end


async def test_just_after_redis_restarted_no_replica_takes_over_a_session_another_may_run(tmp_path):
    """A Redis killed while its append-only file was behind comes back
    without leases it had acknowledged: for a moment a session's lease
    looks free though its runner lives. A replica asked to take a session
    over then refuses (StoreError: the client is told and tries again)
    until the runners had time to renew theirs."""
    from gemini_split.server.replicas.replica import Replica
    from gemini_split.server.store import StoreError

    server = rs.RedisServer(tmp_path / "r").start()
    store = RedisStore(server.url, command_timeout=1)
    try:
        with trio.fail_after(30):
            await store.open()
            replica = Replica(store, replica_id="b", lease_ttl=1.5)
            await replica.check_restart()  # no restart seen: takes over as ever
            server.stop()
            server.start()
            refusal = None
            while refusal is None or "loading" in refusal:
                with pytest.raises(StoreError) as caught:
                    await replica.check_restart()
                refusal = str(caught.value)
                await trio.sleep(0.05)
            assert "restarted moments ago" in refusal
            await trio.sleep(1.5 / 3 + 1.1)
            await replica.check_restart()  # the runners had their time
    finally:
        with trio.fail_after(10):
            await store.aclose()
        server.stop()


async def test_among_replicas_a_resume_whose_replay_needs_redis_while_it_is_away_waits_for_it(tmp_path):
    """Alone, such a resume is told ``storage_error`` and redraws
    (test_redis_outage.py); among replicas answers pause while Redis is
    away, and the replay does too: once Redis is back the client gets every
    event it missed, with no gap."""
    from gemini_split.protocol import ClientsChanged

    server = rs.RedisServer(tmp_path / "r").start()
    script = [{"text": "".join(f"w{i} " for i in range(30)), "chunks": 30, "chunk_delay": 0.002}]
    try:
        async with two_replicas(server, script, replay_capacity=5) as (_, (at_a, _at_b)):
            async with hello(at_a, label="laptop") as (laptop, first):
                *_, done = await _turn(laptop, "go")
            server.stop()
            async with hello(at_a, session_id=first.session_id, resume_token=first.resume_token,
                             last_seq=1, label="laptop") as (resumed, again):
                with trio.move_on_after(1.5):
                    early = await resumed.receive()
                    assert isinstance(early, ClientsChanged), early  # nothing of the replay yet
                server.start()
                got = await resumed.receive_until(lambda m: m.seq is not None and m.seq >= done.seq)
    finally:
        server.stop()
    assert again.resumed
    seqs = [m.seq for m in got if m.seq is not None and m.seq <= done.seq]
    assert seqs == list(range(2, done.seq + 1)), seqs
    assert not any(isinstance(m, Error) for m in got)


async def test_a_new_sessions_first_prompt_is_shown_only_once_its_record_is_in_redis(tmp_path):
    """Among replicas a client sees an event only once Redis has it. A new
    session's first ``request_started`` used to be shown at once, before
    the session's record was even being written (``Saving.written`` saw
    nothing unsaved yet): a runner killed then left a client waiting for a
    prompt no other replica had heard of (the 10 min soak lost 4 so). Here
    Redis is paused (SIGSTOP) as the first prompt is sent: nothing of it is
    shown until Redis answers again, then all of it, in order."""
    import os
    import signal

    server = rs.RedisServer(tmp_path / "r").start()
    try:
        async with two_replicas(server, [{"text": "first"}]) as (_, (at_a, _at_b)):
            async with hello(at_a, label="laptop") as (laptop, _first):
                assert server.process is not None
                os.kill(server.process.pid, signal.SIGSTOP)
                try:
                    await laptop.send(GenerateContentRequest(id="r-first", prompt="first"))
                    early = []
                    with trio.move_on_after(1.0):
                        while True:
                            early.append(await laptop.receive())
                    assert not [m for m in early if m.seq is not None], early  # nothing shown unstored
                finally:
                    os.kill(server.process.pid, signal.SIGCONT)
                with trio.fail_after(20):
                    events = await laptop.receive_until(lambda m: isinstance(m, (Error, Finished)))
    finally:
        server.stop()
    assert isinstance(events[-1], Finished), events[-1]
    assert [type(e) for e in events if isinstance(e, RequestStarted)] == [RequestStarted]
    seqs = [e.seq for e in events if e.seq is not None]
    assert seqs == list(range(seqs[0], seqs[-1] + 1)), seqs


async def test_a_prompt_sent_again_with_the_running_requests_id_is_that_request_not_busy(tmp_path):
    """A client that reconnected before its prompt's ``request_started``
    reached it sends the prompt again, same id (client/reconnect.py,
    bench/soak.py): under load that request may already run, its start not
    yet shown. The resend is neither refused ``busy`` (before: the client's
    own prompt ended in that error while it ran on) nor run twice: the
    client sees that one request through to its one end. Here the start is
    held by a paused Redis while the second connection resends."""
    import os
    import signal

    server = rs.RedisServer(tmp_path / "r").start()
    request = GenerateContentRequest(id="r-mine", prompt="mine")
    try:
        async with two_replicas(server, [{"text": "the answer"}]) as (services, (at_a, _at_b)):
            async with hello(at_a, label="laptop") as (old, first):
                async with hello(at_a, session_id=first.session_id, resume_token=first.resume_token,
                                 label="laptop") as (new, _):
                    assert server.process is not None
                    os.kill(server.process.pid, signal.SIGSTOP)
                    try:
                        await old.send(request)
                        await trio.sleep(0.3)  # it runs, its start unshown
                        await new.send(request)  # the reconnected client's resend
                        await trio.sleep(0.3)
                    finally:
                        os.kill(server.process.pid, signal.SIGCONT)
                    with trio.fail_after(20):
                        seen = await new.receive_until(
                            lambda m: isinstance(m, (Error, Finished)) and m.request_id == "r-mine")
                        with trio.move_on_after(0.5):
                            while True:
                                seen.append(await new.receive())
            model = services[0].model
    finally:
        server.stop()
    assert not [m for m in seen if isinstance(m, Error)], seen
    assert [m.request_id for m in seen if isinstance(m, RequestStarted)] == ["r-mine"]
    assert [m.request_id for m in seen if isinstance(m, Finished)] == ["r-mine"]
    assert len(model.requests) == 1  # run once


async def test_a_prompt_sent_again_while_its_request_ends_is_not_run_twice(redis_server):
    """The request's body is over and its turn is being saved — ``state``
    already says nothing runs — and the client that reconnected has not yet
    been shown its start (events are shown once Redis has them, and Redis is
    slow here), so it resends the prompt, same id (client/reconnect.py). It
    is that request: the client sees its one end, the model is asked once
    (before: a second run with the same id)."""
    request = GenerateContentRequest(id="r-mine", prompt="mine")
    script = [{"text": "the answer"}, {"text": "a second run"}]
    async with two_replicas(redis_server, script) as (services, (at_a, _at_b)):
        store = services[0].store
        write_batch, save_turn = store._write_batch, store.save_turn
        saving = trio.Event()

        async def slow_write_batch(batch):  # a busy Redis: events are shown 1 s late
            await trio.sleep(1)
            await write_batch(batch)

        async def slow_save_turn(*args, **kwargs):
            saving.set()
            await trio.sleep(1)
            await save_turn(*args, **kwargs)

        async with hello(at_a, label="laptop") as (old, first):
            async with hello(at_a, session_id=first.session_id, resume_token=first.resume_token,
                             label="laptop") as (new, _):
                store._write_batch, store.save_turn = slow_write_batch, slow_save_turn
                await old.send(request)
                with trio.fail_after(10):
                    await saving.wait()
                    await new.send(GetState())  # what the reconnected client asks first
                    seen = await new.receive_until(lambda m: isinstance(m, State))
                assert seen[-1].active_request_id is None and not any(isinstance(m, RequestStarted) for m in seen)
                await new.send(request)  # so it resends
                with trio.fail_after(20):
                    seen += await new.receive_until(
                        lambda m: isinstance(m, Error | Finished) and m.request_id == "r-mine")
                    with trio.move_on_after(1.5):
                        while True:
                            seen.append(await new.receive())
        model = services[0].model
    assert not [m for m in seen if isinstance(m, Error)], seen
    assert [m.request_id for m in seen if isinstance(m, RequestStarted)] == ["r-mine"]
    assert [m.request_id for m in seen if isinstance(m, Finished)] == ["r-mine"]
    assert len(model.requests) == 1  # run once
