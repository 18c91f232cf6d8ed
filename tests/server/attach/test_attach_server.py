"""Several clients on one session (issue 11), at the server: the real
AgentService on the loopback transport, a scripted model, raw clients that
say exactly what they want in hello."""

from __future__ import annotations

import time
from contextlib import asynccontextmanager

import trio

from gemini_split.protocol import (
    Cancel,
    ClientsChanged,
    Connected,
    Error,
    Finished,
    GenerateContentRequest,
    GetState,
    Hello,
    RequestStarted,
    State,
    TextDelta,
    ToolCallAnswered,
    ToolExecutionRequest,
    ToolExecutionResponse,
)
from gemini_split.server.model.scripted import ScriptedModel
from gemini_split.testing.service import open_test_service
from gemini_split.transport import ConnectOptions, Principal, get_transport

from tests.server.helpers import RawClient


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


def _text(events) -> str:
    return "".join(e.content for e in events if isinstance(e, TextDelta))


def _words(n: int) -> str:
    return "".join(f"w{i} " for i in range(n))


async def test_two_clients_get_the_same_events_in_the_same_seq_order():
    model = ScriptedModel([{"text": _words(30), "chunks": 30, "chunk_delay": 0.005}])
    async with open_test_service(model) as (_, address):
        async with hello(address, label="laptop") as (a, first):
            async with hello(address, session_id=first.session_id, resume_token=first.resume_token,
                             label="phone") as (b, second):
                assert isinstance(second, Connected) and second.clients == 2 and second.label == "phone"
                assert [c.label for c in second.attached] == ["laptop", "phone"]
                await a.send(GenerateContentRequest(prompt="go"))
                seen_a = await a.receive_until(lambda m: isinstance(m, Finished))
                seen_b = await b.receive_until(lambda m: isinstance(m, Finished))
    joined = seen_a[0]
    assert isinstance(joined, ClientsChanged) and joined.change == "joined" and joined.client.label == "phone"
    assert joined.clients == 2
    # From the moment b attached, both saw the very same events.
    assert [(e.seq, e.TYPE) for e in seen_a[1:]] == [(e.seq, e.TYPE) for e in seen_b]
    started = seen_b[0]
    assert isinstance(started, RequestStarted) and started.prompt == "go" and started.client == "laptop"
    assert _text(seen_b) == _words(30)


async def test_an_observer_may_watch_but_its_prompt_cancel_and_answers_are_forbidden():
    model = ScriptedModel([{"text": "slow answer", "delay": 0.3}])
    async with open_test_service(model) as (_, address):
        async with hello(address) as (driver, first):
            async with hello(address, session_id=first.session_id, role="observer") as (watcher, watching):
                assert watching.role == "observer"
                prompt = GenerateContentRequest(prompt="let me in")
                await watcher.send(prompt)
                refused = await watcher.receive()
                assert isinstance(refused, Error) and refused.code == "forbidden" and not refused.fatal
                assert refused.request_id is None or refused.request_id == refused.in_reply_to
                await driver.send(GenerateContentRequest(prompt="go"))
                await watcher.receive_until(lambda m: isinstance(m, RequestStarted))
                await watcher.send(Cancel())
                await watcher.send(ToolExecutionResponse(request_id="whatever", result="x"))
                seen = await watcher.receive_until(lambda m: isinstance(m, Finished))
    codes = [m.code for m in seen if isinstance(m, Error)]
    assert codes == ["forbidden", "forbidden"]
    assert seen[-1].reason == "stop"  # the observer's cancel did nothing


async def test_clients_changed_tells_the_others_who_left_with_a_label_never_a_token():
    async with open_test_service(ScriptedModel([])) as (_, address):
        async with hello(address, label="laptop") as (a, first):
            async with hello(address, session_id=first.session_id, label="phone") as (b, _):
                joined = await a.receive()
            left = await a.receive()
    assert isinstance(joined, ClientsChanged) and joined.change == "joined"
    assert isinstance(left, ClientsChanged) and left.change == "left" and left.client.label == "phone"
    assert left.clients == 1
    assert first.resume_token not in repr(left)


async def test_a_second_prompt_from_another_client_is_busy_and_either_may_cancel():
    model = ScriptedModel([{"text": _words(200), "chunks": 200, "chunk_delay": 0.01}])
    async with open_test_service(model) as (_, address):
        async with hello(address) as (a, first):
            async with hello(address, session_id=first.session_id) as (b, _):
                request = GenerateContentRequest(prompt="long")
                await a.send(request)
                await b.receive_until(lambda m: isinstance(m, TextDelta))
                second = GenerateContentRequest(prompt="me too")
                await b.send(second)
                await b.send(Cancel())
                seen_b = await b.receive_until(lambda m: isinstance(m, Finished))
                seen_a = await a.receive_until(lambda m: isinstance(m, Finished))
    busy = [m for m in seen_b if isinstance(m, Error)]
    assert [(m.code, m.seq) for m in busy] == [("busy", None)]
    assert seen_a[-1].reason == "cancelled" and seen_b[-1].reason == "cancelled"
    assert not any(isinstance(m, Error) for m in seen_a)  # b's refusal is b's alone


async def test_a_tool_call_goes_to_the_prompting_client_and_is_handed_over_when_it_leaves():
    model = ScriptedModel([
        {"function_calls": [{"name": "read_file", "args": {"file_path": "a.txt"}}]},
        {"text": "done"},
    ])
    async with open_test_service(model, tool_timeout=30) as (_, address):
        async with hello(address, label="phone") as (other, first):
            async with hello(address, session_id=first.session_id, label="laptop") as (origin, _):
                await origin.send(GenerateContentRequest(prompt="read it"))
                *_, call = await origin.receive_until(lambda m: isinstance(m, ToolExecutionRequest))
                *_, seen = await other.receive_until(lambda m: isinstance(m, ToolExecutionRequest))
                assert seen.id == call.id and not seen.handover  # seen, not its to run
            # The origin left without answering: the call is handed over.
            *_, handed = await other.receive_until(lambda m: isinstance(m, ToolExecutionRequest))
            assert handed.id == call.id and handed.handover and handed.seq is None
            await other.send(ToolExecutionResponse(request_id=call.id, result="contents"))
            rest = await other.receive_until(lambda m: isinstance(m, Finished))
    answered = [m for m in rest if isinstance(m, ToolCallAnswered)]
    assert [(m.call_id, m.client) for m in answered] == [(call.id, "phone")]
    assert _text(rest) == "done"


async def test_a_watcher_that_stops_reading_is_cut_off_and_the_driver_streams_on():
    # A small outbox so the stalled watcher overflows quickly.
    model = ScriptedModel([{"text": _words(1000), "chunks": 1000, "chunk_delay": 0.001}])
    async with open_test_service(model, outbox_limit=50, outbox_bytes=4096) as (service, address):
        async with hello(address) as (driver, first):
            async with hello(address, session_id=first.session_id, role="observer"):
                # The watcher never reads again.
                await driver.send(GenerateContentRequest(prompt="stream"))
                with trio.fail_after(10):
                    seen = await driver.receive_until(lambda m: isinstance(m, Finished), limit=100_000)
                (session,) = service.sessions.values()
                assert [v.role for v in session.views] == ["driver"]
    assert _text(seen) == _words(1000)
    left = [m for m in seen if isinstance(m, ClientsChanged) and m.change == "left"]
    assert [m.client.role for m in left] == ["observer"]


async def test_another_principal_gets_unknown_session_for_live_and_stolen_and_guessed_ids():
    tokens = {"alice-token": Principal("alice"), "bob-token": Principal("bob")}
    model = ScriptedModel([{"text": "alice's answer", "delay": 0.5}])
    async with open_test_service(model, authenticate=tokens.get) as (_, address):
        async with hello(address, token="alice-token") as (alice, mine):
            await alice.send(GenerateContentRequest(prompt="secret"))
            await alice.receive_until(lambda m: isinstance(m, RequestStarted))
            answers = []
            for fields in (
                dict(session_id=mine.session_id),  # guessing the live id
                dict(session_id=mine.session_id, resume_token=mine.resume_token),  # a stolen token
                dict(session_id=mine.session_id, role="observer"),
                dict(session_id="s-00000000deadbeef"),  # an id that never existed
                dict(session_id="latest"),
            ):
                async with hello(address, token="bob-token", **fields) as (_, reply):
                    answers.append(reply)
            seen = await alice.receive_until(lambda m: isinstance(m, Finished))
    assert all(isinstance(a, Error) and a.fatal and a.code == "unknown_session" for a in answers)
    assert len({a.message.replace(mine.session_id, "ID").replace("s-00000000deadbeef", "ID")
                for a in answers[:4]}) == 1
    # Alice's session never heard of bob.
    assert not any(isinstance(m, ClientsChanged) for m in seen)


async def test_attach_by_id_alone_is_refused_where_the_server_does_not_allow_it():
    async with open_test_service(ScriptedModel([]), allow_attach_by_id=False) as (_, address):
        async with hello(address) as (a, first):
            async with hello(address, session_id=first.session_id) as (_, by_id):
                pass
            async with hello(address, session_id=first.session_id, resume_token=first.resume_token) as (_, ok):
                pass
    assert isinstance(by_id, Error) and by_id.code == "unknown_session"
    assert isinstance(ok, Connected) and ok.clients == 2


async def test_refusals_take_the_same_time_for_a_live_session_of_another_user_and_no_session():
    tokens = {"alice-token": Principal("alice"), "bob-token": Principal("bob")}
    async with open_test_service(ScriptedModel([]), authenticate=tokens.get) as (_, address):
        async with hello(address, token="alice-token") as (_, mine):

            async def refusal_time(session_id: str) -> float:
                started = time.perf_counter()
                async with hello(address, token="bob-token", session_id=session_id) as (_, reply):
                    assert isinstance(reply, Error) and reply.code == "unknown_session"
                return time.perf_counter() - started

            live, absent = [], []
            for _ in range(40):
                live.append(await refusal_time(mine.session_id))
                absent.append(await refusal_time("s-00000000deadbeef"))
    live.sort()
    absent.sort()
    # Medians within noise of each other (both read the store once).
    assert abs(live[20] - absent[20]) < max(live[20], absent[20]) * 0.5 + 0.002


async def test_state_replies_go_only_to_the_client_that_asked():
    async with open_test_service(ScriptedModel([])) as (_, address):
        async with hello(address) as (a, first):
            async with hello(address, session_id=first.session_id) as (b, _):
                await b.send(GetState())
                *_, state = await b.receive_until(lambda m: isinstance(m, State))
                await a.send(GetState())
                seen_a = await a.receive_until(lambda m: isinstance(m, State))
    assert state.seq is None
    assert [type(m) for m in seen_a] == [ClientsChanged, State]
