"""Late-joiner replay (issue 11 §2): limit / since / before, at the server
and in :func:`plan_replay` itself."""

from __future__ import annotations

import json

import pytest
import trio

from gemini_split.protocol import (
    ClientsChanged,
    Connected,
    Error,
    Finished,
    GenerateContentRequest,
    RemoteProtocolError,
    Replay,
    RequestStarted,
    TextDelta,
    decode,
)
from gemini_split.transport import ConnectOptions, get_transport
from gemini_split.protocol.replay import plan_replay, replay_from_query
from gemini_split.server.model.scripted import ScriptedModel
from gemini_split.server.store import EventMark
from gemini_split.testing.service import open_test_service

from .test_attach_server import _text, _words, hello


def _turn(start_seq: int, request: str, *, at: int, deltas: int = 2) -> list[EventMark]:
    marks = [EventMark(start_seq, at, request, "request_started")]
    marks += [EventMark(start_seq + 1 + i, at + 1 + i, request, "text_delta") for i in range(deltas)]
    marks.append(EventMark(start_seq + 1 + deltas, at + 1 + deltas, request, "finished"))
    return marks


LOG = [EventMark(1, 500, None, "clients_changed")] + _turn(2, "r1", at=1000) + _turn(6, "r2", at=2000) \
    + [EventMark(10, 2500, None, "clients_changed")] + _turn(11, "r3", at=3000)


def test_limit_replays_whole_turns_from_their_request_started():
    assert plan_replay(LOG, Replay(limit=1), upto=14).seqs == (11, 12, 13, 14)
    assert plan_replay(LOG, Replay(limit=2), upto=14).seqs == tuple(range(6, 15))
    assert plan_replay(LOG, Replay(limit=0), upto=14).seqs == ()
    # A turn still running is the last turn: from its start to where live begins.
    assert plan_replay(LOG, Replay(limit=1), upto=12).seqs == (11, 12)


def test_since_and_before_cut_by_time_and_combine_with_limit():
    assert plan_replay(LOG, Replay(since=2500), upto=14).seqs == (11, 12, 13, 14)
    assert plan_replay(LOG, Replay(before=1003), upto=14).seqs == (1, 2, 3, 4)
    assert plan_replay(LOG, Replay(since=1000, before=2004), upto=14).seqs == (3, 4, 5, 6, 7, 8, 9)
    # The last whole turn that starts inside the window.
    assert plan_replay(LOG, Replay(limit=1, before=2999), upto=14).seqs == (6, 7, 8, 9, 10)


def test_asking_for_more_than_is_kept_replays_what_is_kept_and_says_so():
    kept = LOG[5:]  # seq 6 on: the first turn was dropped
    plan = plan_replay(kept, Replay(limit=5), upto=14)
    assert plan.seqs == tuple(range(6, 15)) and plan.truncated
    assert plan_replay(kept, Replay(since=0), upto=14).truncated
    # Nothing was dropped: more than there is is not "truncated".
    assert not plan_replay(LOG, Replay(limit=50), upto=14).truncated
    assert not plan_replay(kept, Replay(limit=1), upto=14).truncated


def test_query_parameters_are_checked_like_hello_fields():
    assert replay_from_query({"limit": "3", "since": "1700000000000"}) == Replay(limit=3, since=1_700_000_000_000)
    assert replay_from_query({}) is None
    for bad in ({"limit": "-1"}, {"limit": "x"}, {"since": "9" * 40}, {"before": "1e9"}, {"limit": "1000001"}):
        with pytest.raises(RemoteProtocolError) as info:
            replay_from_query(bad)
        assert info.value.code == "invalid_field"


async def test_a_late_joiner_with_limit_1_gets_the_whole_current_turn_then_the_live_rest_nothing_twice():
    model = ScriptedModel([
        {"text": "an earlier answer"},
        {"text": _words(100), "chunks": 100, "chunk_delay": 0.01},
    ])
    async with open_test_service(model) as (_, address):
        async with hello(address) as (driver, first):
            await driver.send(GenerateContentRequest(prompt="first"))
            await driver.receive_until(lambda m: isinstance(m, Finished))
            await driver.send(GenerateContentRequest(prompt="second"))
            for _ in range(10):
                await driver.receive_until(lambda m: isinstance(m, TextDelta))
            async with hello(address, session_id=first.session_id, replay={"limit": 1}) as (late, joined):
                seen = await late.receive_until(lambda m: isinstance(m, Finished))
    assert isinstance(joined, Connected) and not joined.replay_truncated
    replayed = [m for m in seen if m.replayed]
    live = [m for m in seen if not m.replayed]
    assert isinstance(replayed[0], RequestStarted) and replayed[0].prompt == "second"
    assert _text(seen) == _words(100)  # the whole turn, from its start, nothing twice
    assert replayed and live and max(m.seq for m in replayed) < min(m.seq for m in live if m.seq)
    seqs = [m.seq for m in seen if m.seq is not None]
    assert seqs == sorted(set(seqs))
    assert "earlier" not in _text(seen)


async def test_a_new_attach_replays_the_last_turn_by_default():
    model = ScriptedModel([{"text": "one"}, {"text": "two"}])
    async with open_test_service(model) as (_, address):
        async with hello(address) as (driver, first):
            for prompt in ("a", "b"):
                await driver.send(GenerateContentRequest(prompt=prompt))
                await driver.receive_until(lambda m: isinstance(m, Finished))
            async with hello(address, session_id=first.session_id) as (late, _):
                seen = await late.receive_until(lambda m: isinstance(m, Finished))
    assert _text(seen) == "two" and all(m.replayed for m in seen)


async def test_since_replays_exactly_the_events_after_the_timestamp():
    model = ScriptedModel([{"text": "before"}, {"text": "after", "delay": 0.05}])
    async with open_test_service(model) as (_, address):
        async with hello(address) as (driver, first):
            await driver.send(GenerateContentRequest(prompt="a"))
            early = await driver.receive_until(lambda m: isinstance(m, Finished))
            await trio.sleep(0.01)  # a later millisecond
            cut = early[-1].timestamp
            await driver.send(GenerateContentRequest(prompt="b"))
            late_turn = await driver.receive_until(lambda m: isinstance(m, Finished))
            async with hello(address, session_id=first.session_id, replay={"since": cut}) as (late, _):
                seen = await late.receive_until(lambda m: isinstance(m, Finished))
    expected = [m.seq for m in early + late_turn if m.seq is not None and m.timestamp > cut]
    assert [m.seq for m in seen if not isinstance(m, ClientsChanged)] == \
        [s for s in expected if s not in {m.seq for m in early + late_turn if isinstance(m, ClientsChanged)}]
    assert _text(seen) == "after"


@pytest.mark.parametrize("replay", [{"limit": -1}, {"since": "yesterday"}, {"before": 10**20}, {"limit": 10**7}])
async def test_bad_replay_values_are_invalid_field(replay):
    async with open_test_service(ScriptedModel([])) as (_, address):
        async with hello(address) as (_, first):
            stream = await get_transport(address).open_connection(address, ConnectOptions())
            try:
                await stream.send(json.dumps({"type": "hello", "id": "h", "timestamp": 1, "protocol_version": "1.2",
                                              "session_id": first.session_id, "replay": replay}))
                reply = decode(await stream.receive())
            finally:
                await stream.aclose()
    assert isinstance(reply, Error) and reply.code == "invalid_field" and "replay" in reply.message


async def test_a_limit_beyond_what_is_kept_says_replay_truncated():
    model = ScriptedModel([{"text": _words(20), "chunks": 20, "chunk_delay": 0.002}] * 3)
    async with open_test_service(model, replay_capacity=30) as (_, address):
        async with hello(address) as (driver, first):
            for _ in range(3):
                await driver.send(GenerateContentRequest(prompt="go"))
                await driver.receive_until(lambda m: isinstance(m, Finished))
            async with hello(address, session_id=first.session_id, replay={"limit": 10}) as (late, joined):
                seen = await late.receive_until(lambda m: isinstance(m, Finished))
    assert joined.replay_truncated
    assert isinstance(seen[0], RequestStarted)  # whole turns only
