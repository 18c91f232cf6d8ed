"""Fan-out to many views (issue 11): what a view that falls behind gets,
and a session with many watchers streaming a long answer."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from gemini_split.protocol import ClientsChanged, Finished, GenerateContentRequest, TextDelta
from gemini_split.protocol.event_log import EventLog
from gemini_split.server.model.scripted import ScriptedModel
from gemini_split.server.session.views import FAN_OUT_INTERVAL_PER_VIEW, MIN_BATCH_INTERVAL, View, fan_out_interval
from gemini_split.stamping import stamp
from gemini_split.testing.service import open_test_service

from .test_attach_server import _text, _words, hello

pytestmark = pytest.mark.timeout(30)


async def _never(reason: str) -> None:
    raise AssertionError("not closed in these tests")


def _logged(log: EventLog, *events):
    return [log.append(stamp(event)) for event in events]


def test_a_view_that_keeps_up_gets_the_sessions_own_text():
    log, view = EventLog(), View(close=_never)
    batch = _logged(log, TextDelta(content="a", request_id="r"), TextDelta(content="b", request_id="r"))
    assert view.offer(batch)
    taken = view._queue
    # Each event encoded once, by the session: the same text objects.
    assert [text for _, text in taken] == [text for _, text in batch]
    assert all(mine is theirs for (_, mine), (_, theirs) in zip(taken, batch))


def test_a_view_still_behind_by_more_than_its_bounds_is_refused():
    log, view = EventLog(), View(close=_never, limit=3, max_bytes=10_000)
    one = lambda: _logged(log, TextDelta(content="x", request_id="r"))  # noqa: E731
    assert view.offer(one())  # not taken: the view is behind from here on
    assert all(view.offer(one()) for _ in range(3))  # 4 waiting: past its limit of 3
    assert not view.offer(one()) and len(view) == 4  # refused, nothing queued
    log, view = EventLog(), View(close=_never, max_bytes=1000)
    offered = 0
    while view.offer(_logged(log, TextDelta(content="x" * 10, request_id="r"))):
        offered += 1
    assert view._bytes <= 1000 + 200  # its bounds, plus one batch at most
    # Every event kept as the session sent it: nothing merged per view.
    assert [e.seq for e, _ in view._queue] == list(range(1, offered + 1))


def test_a_session_hands_its_views_at_most_one_batch_per_interval_longer_for_many():
    # One client or twenty: a batch per millisecond at most (a fast model's
    # deltas merge meanwhile); more views: 50 µs more per view.
    assert fan_out_interval(1) == fan_out_interval(20) == MIN_BATCH_INTERVAL == 0.001
    assert fan_out_interval(101) == pytest.approx(101 * FAN_OUT_INTERVAL_PER_VIEW) == pytest.approx(0.00505)


async def test_a_fast_model_reaches_one_client_whole_in_order_in_far_fewer_deltas(autojump_clock):
    """A model chunk every 0.1 ms (faster than any eye, and than a write per
    chunk can keep up with): the client gets the text exactly, in order, in
    about one delta per millisecond — and so the session logs, stores and
    writes ten times fewer events."""
    chunks = 400
    model = ScriptedModel([{"text": _words(chunks), "chunks": chunks, "chunk_delay": 0.0001}])
    async with open_test_service(model) as (_, address):
        async with hello(address) as (driver, _):
            await driver.send(GenerateContentRequest(prompt="stream"))
            events = await driver.receive_until(lambda m: isinstance(m, Finished), limit=100_000)
    assert _text(events) == _words(chunks)
    seqs = [e.seq for e in events if e.seq is not None]
    assert seqs == sorted(set(seqs))
    deltas = sum(isinstance(e, TextDelta) for e in events)
    assert 2 <= deltas <= chunks // 5, deltas  # 40 ms of answer: about 40 batches


async def test_forty_watchers_get_the_whole_answer_in_order_in_fewer_frames(autojump_clock):
    chunks = 400
    model = ScriptedModel([{"text": _words(chunks), "chunks": chunks, "chunk_delay": 0.0005}])
    async with open_test_service(model) as (_, address):
        async with hello(address) as (driver, first):
            watchers = []
            contexts = [hello(address, session_id=first.session_id, role="observer", replay={"limit": 0},
                              label=f"w{i}") for i in range(40)]
            for context in contexts:
                watchers.append((await context.__aenter__())[0])
            try:
                await driver.send(GenerateContentRequest(prompt="stream"))
                seen = {}

                async def watch(name, raw):
                    seen[name] = await raw.receive_until(lambda m: isinstance(m, Finished), limit=100_000)

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(watch, "driver", driver)
                    for i, raw in enumerate(watchers):
                        nursery.start_soon(watch, i, raw)
            finally:
                for context in reversed(contexts):
                    await context.__aexit__(None, None, None)
    assert len(seen) == 41
    for events in seen.values():
        live = [e for e in events if not isinstance(e, ClientsChanged)]
        assert _text(live) == _words(chunks)
        seqs = [e.seq for e in live if e.seq is not None]
        assert seqs == sorted(set(seqs))
        # 41 views: a batch at most every 2 ms while a chunk comes every 0.5 ms.
        assert sum(isinstance(e, TextDelta) for e in live) <= chunks // 2
