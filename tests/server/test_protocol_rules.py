"""The Connection's rules as a misbehaving client meets them over a real
transport: each breach gets an ``error`` naming the message, and the
connection goes on."""

from __future__ import annotations

from gemini_split.protocol import (
    Error,
    Finished,
    GenerateContentRequest,
    GetState,
    RequestStarted,
    State,
    TextDelta,
    ToolDecision,
    ToolExecutionResponse,
)
from gemini_split.server.model.scripted import ScriptedModel
from gemini_split.stamping import stamp
from gemini_split.testing.service import open_test_service

from .helpers import raw_client


async def test_an_answer_to_a_tool_call_nobody_made_is_refused_and_the_session_goes_on():
    async with open_test_service(ScriptedModel([])) as (_, address), raw_client(address) as raw:
        stray = stamp(ToolExecutionResponse(request_id="call-that-never-was", result="hi"))
        await raw.send(stray)
        error = await raw.receive()
        assert isinstance(error, Error) and error.code == "unexpected_message" and not error.fatal
        assert error.in_reply_to == stray.id and "call-that-never-was" in error.message
        await raw.send(GenerateContentRequest(prompt="still here"))
        seen = await raw.receive_until(lambda m: isinstance(m, Finished))
    assert "".join(m.content for m in seen if isinstance(m, TextDelta)) == "Echo: still here"


async def test_a_decision_for_no_pending_approval_is_refused():
    async with open_test_service(ScriptedModel([])) as (_, address), raw_client(address) as raw:
        decision = stamp(ToolDecision(call_id="c-9", approved=True))
        await raw.send(decision)
        error = await raw.receive()
    assert error.code == "unknown_call" and error.in_reply_to == decision.id
    assert "awaiting approval" in error.message


async def test_a_busy_refusal_names_the_refused_request_and_the_running_one_ends_once():
    model = ScriptedModel([{"text": "slow", "delay": 0.3}])
    async with open_test_service(model) as (_, address), raw_client(address) as raw:
        first, second = stamp(GenerateContentRequest(prompt="one")), stamp(GenerateContentRequest(prompt="two"))
        await raw.send(first)
        await raw.send(second)
        ask = stamp(GetState())
        await raw.send(ask)
        seen = await raw.receive_until(lambda m: isinstance(m, Finished))
    (busy,) = [m for m in seen if isinstance(m, Error)]
    assert (busy.code, busy.request_id, busy.in_reply_to) == ("busy", second.id, second.id)
    assert first.id in busy.message
    (state,) = [m for m in seen if isinstance(m, State)]
    assert state.in_reply_to == ask.id and state.active_request_id == first.id
    assert [m.request_id for m in seen if isinstance(m, Finished)] == [first.id]
    # Replies to this connection (busy, state) are not session events: no seq.
    assert busy.seq is None and state.seq is None
    seqs = [m.seq for m in seen if m.seq is not None]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


async def test_an_empty_prompt_is_refused_to_its_sender_alone_and_never_logged():
    async with open_test_service(ScriptedModel([])) as (_, address), raw_client(address) as raw:
        empty = stamp(GenerateContentRequest(prompt="  \n "))
        await raw.send(empty)
        error = await raw.receive()
        assert (error.code, error.request_id, error.in_reply_to) == ("invalid_request", empty.id, empty.id)
        assert error.seq is None  # a reply, not a session event: attached clients never see it
        await raw.send(GenerateContentRequest(prompt="now a real one"))
        seen = await raw.receive_until(lambda m: isinstance(m, Finished))
    # The session's log starts with the real request: nothing of the empty one.
    assert [m.prompt for m in seen if isinstance(m, RequestStarted)] == ["now a real one"]
