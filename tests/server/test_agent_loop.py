"""The agent loop and sessions, end to end over the loopback transport.

Time-dependent behaviour (retries, tool timeouts) runs on Trio's
autojump clock, so it is exact and instant."""

from __future__ import annotations

import json

import pytest
import trio

from gemini_split.tools.local_events import LocalToolCompleted, LocalToolStarted
from gemini_split.tools.base import Tool, ToolKind
from gemini_split.tools.registry import ToolRegistry, default_tools
from gemini_split.protocol import (
    ClientsChanged,
    decode,
    Cancel,
    Error,
    Finished,
    GenerateContentRequest,
    Retrying,
    TextDelta,
    ThinkingDelta,
    ToolCompleted,
    ToolExecutionRequest,
    ToolStarted,
)
from gemini_split.server.model.scripted import ScriptedModel
from gemini_split.stamping import stamp
from gemini_split.testing.service import open_test_service

from .helpers import connected_client, raw_client


def _text(events) -> str:
    return "".join(e.content for e in events if isinstance(e, TextDelta))


def _function_responses(request) -> list[dict]:
    return [p["function_response"] for c in request.contents for p in c["parts"] if "function_response" in p]


async def test_streamed_text_arrives_whole_and_in_order_then_finished_with_usage(tmp_path):
    text = "".join(f"word{i} " for i in range(50))
    model = ScriptedModel([{"text": text, "chunks": 50, "thought": "let me think"}])
    events: list = []
    async with open_test_service(model) as (_, address), connected_client(address, tmp_path, events=events) as client:
        outcome = await client.run_turn("hello")
    assert outcome.error is None and outcome.finished is not None
    assert _text(events) == text
    assert any(isinstance(e, ThinkingDelta) and e.content == "let me think" for e in events)
    assert outcome.finished.turns == 1
    assert outcome.finished.usage.total_tokens > 0
    seqs = [e.seq for e in events if e.seq is not None]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


async def test_a_function_call_runs_on_the_client_and_its_result_reaches_the_model(tmp_path):
    (tmp_path / "notes.txt").write_text("the launch code is 0000\n")
    model = ScriptedModel([
        {"function_calls": [{"name": "read_file", "args": {"file_path": "notes.txt"}}]},
        {"text": "done"},
    ])
    events: list = []
    async with open_test_service(model) as (_, address), connected_client(address, tmp_path, events=events) as client:
        outcome = await client.run_turn("read notes.txt")
    assert outcome.finished is not None and outcome.finished.turns == 2
    (response,) = _function_responses(model.requests[1])
    assert response == {"name": "read_file", "response": {"output": "the launch code is 0000\n"}}
    # Run here, so told to this client's UI as local events (the wire types' subclasses).
    assert [type(e) for e in events if isinstance(e, ToolStarted | ToolCompleted)] == \
        [LocalToolStarted, LocalToolCompleted]
    assert model.requests[0].tools and {t.name for t in model.requests[0].tools} >= {"read_file", "list_directory"}


async def test_a_failing_tool_gives_the_model_a_structured_error_not_a_traceback(tmp_path):
    model = ScriptedModel([{"function_calls": [{"name": "read_file", "args": {"file_path": "../etc/passwd"}}]}])
    async with open_test_service(model) as (_, address), connected_client(address, tmp_path) as client:
        outcome = await client.run_turn("read it")
    assert outcome.finished is not None
    (response,) = _function_responses(model.requests[1])
    error = response["response"]["error"]
    assert error["code"] == "outside_workspace"
    assert "Traceback" not in json.dumps(error)
    # Echo mode quoted the error back: the model really saw it.
    assert "outside_workspace" in model.requests[1].contents[-1]["parts"][0]["function_response"]["response"]["error"]["code"]


async def test_a_client_that_never_answers_a_tool_request_times_out_with_a_clear_error(autojump_clock):
    model = ScriptedModel([{"function_calls": [{"name": "read_file", "args": {"file_path": "x"}}]}, {"text": "ok"}])
    async with open_test_service(model, tool_timeout=30) as (_, address), raw_client(address) as raw:
        await raw.send(GenerateContentRequest(prompt="go"))
        # The request's end (a notice without request_id says first that
        # this client, which told no tools, is asked for one: tools_away).
        seen = await raw.receive_until(lambda m: isinstance(m, Finished | Error) and m.request_id is not None)
        start = trio.current_time()
    assert any(isinstance(m, ToolExecutionRequest) for m in seen)
    assert any(isinstance(m, Error) and m.code == "tools_away" and not m.fatal for m in seen)
    assert isinstance(seen[-1], Finished)
    (response,) = _function_responses(model.requests[1])
    assert response["response"]["error"]["code"] == "timeout"
    assert "30 seconds" in response["response"]["error"]["message"]
    assert start >= 30


async def test_runaway_tool_loops_end_at_the_turn_limit_and_the_session_stays_usable(tmp_path):
    loop_turn = {"function_calls": [{"name": "list_directory", "args": {"dir_path": "."}}]}
    model = ScriptedModel([loop_turn] * 10)
    async with open_test_service(model, max_turns=3) as (_, address), connected_client(address, tmp_path) as client:
        outcome = await client.run_turn("loop forever")
        assert outcome.error is not None and outcome.error.code == "turn_limit"
        assert "3 model turns" in outcome.error.message
        model.turns.clear()  # the script is spent: the model echoes now
        again = await client.run_turn("still there?")
    assert again.finished is not None
    # Every function call in the history was answered, so the API accepts it.
    history = model.requests[-1].contents
    calls = sum(1 for c in history for p in c["parts"] if "function_call" in p)
    responses = sum(1 for c in history for p in c["parts"] if "function_response" in p)
    assert calls == responses == 3


async def test_transient_errors_are_retried_with_backoff_and_announced(tmp_path, autojump_clock):
    model = ScriptedModel([
        {"error": {"status": 503, "message": "overloaded"}},
        {"error": {"status": 429, "message": "slow down"}},
        {"text": "finally"},
    ])
    events: list = []
    async with open_test_service(model) as (_, address), connected_client(address, tmp_path, events=events) as client:
        start = trio.current_time()
        outcome = await client.run_turn("hi")
        elapsed = trio.current_time() - start
    retries = [e for e in events if isinstance(e, Retrying)]
    assert [r.attempt for r in retries] == [2, 3]
    assert "503" in retries[0].error and "429" in retries[1].error
    assert retries[1].delay > retries[0].delay  # backoff grows
    # Announced delays are rounded to 10 ms.
    assert elapsed >= retries[0].delay + retries[1].delay - 0.02
    assert outcome.finished is not None and _text(events) == "finally"


async def test_retries_give_up_after_max_attempts_with_a_clear_error(tmp_path, autojump_clock):
    model = ScriptedModel([{"error": {"status": 500, "message": "boom"}}] * 5)
    async with open_test_service(model, max_attempts=3) as (_, address), connected_client(address, tmp_path) as client:
        outcome = await client.run_turn("hi")
    assert outcome.error is not None
    assert outcome.error.code == "model_unavailable"
    assert "boom" in outcome.error.message
    assert len(model.requests) == 3


async def test_auth_errors_are_not_retried_and_say_it_is_the_key(tmp_path):
    model = ScriptedModel([{"error": {"status": 403, "message": "API key not valid"}}])
    async with open_test_service(model) as (_, address), connected_client(address, tmp_path) as client:
        outcome = await client.run_turn("hi")
    assert outcome.error is not None and outcome.error.code == "model_auth"
    assert len(model.requests) == 1


async def test_cancel_stops_the_stream_at_once_and_the_session_goes_on(tmp_path):
    model = ScriptedModel([{"text": "x" * 100, "chunks": 100, "chunk_delay": 0.05}])
    events: list = []
    async with open_test_service(model) as (service, address), connected_client(address, tmp_path, events=events) as client:
        async with trio.open_nursery() as nursery:
            outcomes = []

            async def turn():
                outcomes.append(await client.run_turn("long answer"))

            nursery.start_soon(turn)
            while not any(isinstance(e, TextDelta) for e in events):
                await trio.sleep(0.01)
            with trio.fail_after(1):
                await client.cancel()
                while not outcomes:
                    await trio.sleep(0.01)
        assert outcomes[0].cancelled
        assert len(_text(events)) < 100
        next_outcome = await client.run_turn("next")
        assert next_outcome.finished is not None and next_outcome.finished.reason == "stop"
        assert not any(s.busy for s in service.sessions.values())


class _HangingTool(Tool):
    name = "hang"
    description = "never returns"
    parameters = {"type": "object", "properties": {}}
    kind = ToolKind.READ

    def __init__(self):
        self.cancelled = trio.Event()

    async def run(self, args, ctx):
        try:
            await trio.sleep_forever()
        finally:
            self.cancelled.set()


async def test_cancel_stops_a_pending_tool_on_the_client_too(tmp_path):
    tool = _HangingTool()
    registry = ToolRegistry([tool, *default_tools()])
    model = ScriptedModel([{"function_calls": [{"name": "hang", "args": {}}]}])
    events: list = []
    async with open_test_service(model) as (_, address), connected_client(address, tmp_path, registry=registry, events=events) as client:
        async with trio.open_nursery() as nursery:
            outcomes = []

            async def turn():
                outcomes.append(await client.run_turn("hang please"))

            nursery.start_soon(turn)
            while not any(isinstance(e, ToolStarted) for e in events):
                await trio.sleep(0.01)
            with trio.fail_after(1):
                await client.cancel()
                await tool.cancelled.wait()
        assert outcomes[0].cancelled
        assert (await client.run_turn("after")).finished is not None
    # The cancelled call was answered in the history the next request sent.
    (response,) = _function_responses(model.requests[-1])
    assert response["response"]["error"]["code"] == "cancelled"


async def test_a_second_request_while_one_runs_is_refused_as_busy():
    model = ScriptedModel([{"text": "slow", "delay": 0.5}])
    async with open_test_service(model) as (_, address), raw_client(address) as raw:
        first = stamp(GenerateContentRequest(prompt="one"))
        await raw.send(first)
        second = stamp(GenerateContentRequest(prompt="two"))
        await raw.send(second)
        seen = await raw.receive_until(lambda m: isinstance(m, Finished))
    busy = [m for m in seen if isinstance(m, Error)]
    assert [(e.code, e.request_id) for e in busy] == [("busy", second.id)]
    assert seen[-1].request_id == first.id


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("{this is not json", "invalid_json"),
        ('{"type": "teleport", "id": "1", "timestamp": 1}', "unknown_type"),
        ('{"type": "generate_content_request", "id": "1", "timestamp": 1}', "missing_field"),
        ('{"type": "text_delta", "id": "1", "timestamp": 1, "content": "spoof"}', "unexpected_message"),
    ],
)
async def test_bad_messages_get_an_error_and_the_connection_goes_on(text, code):
    model = ScriptedModel([])
    async with open_test_service(model) as (_, address), raw_client(address) as raw:
        await raw.send(text)
        error = await raw.receive()
        assert isinstance(error, Error) and error.code == code and not error.fatal
        await raw.send(GenerateContentRequest(prompt="still alive?"))
        seen = await raw.receive_until(lambda m: isinstance(m, Finished))
    assert "".join(m.content for m in seen if isinstance(m, TextDelta)) == "Echo: still alive?"


async def test_an_unknown_major_version_gets_a_fatal_error_not_a_crash():
    async with open_test_service(ScriptedModel([])) as (service, address), raw_client(address, hello=False) as raw:
        await raw.send('{"type": "hello", "id": "1", "timestamp": 1, "protocol_version": "2.0"}')
        error = await raw.receive()
        assert isinstance(error, Error) and error.fatal and error.code == "unsupported_version"
        # ...and the server still serves others.
        async with raw_client(address) as other:
            await other.send(GenerateContentRequest(prompt="hi"))
            await other.receive_until(lambda m: isinstance(m, Finished))


async def test_a_first_message_that_is_not_hello_is_refused():
    async with open_test_service(ScriptedModel([])) as (_, address), raw_client(address, hello=False) as raw:
        await raw.send(GenerateContentRequest(prompt="skip the handshake"))
        error = await raw.receive()
    assert isinstance(error, Error) and error.fatal and "expected hello" in error.message


async def test_history_and_state_answer_their_requests(tmp_path):
    model = ScriptedModel([{"text": "answer"}])
    async with open_test_service(model) as (_, address), connected_client(address, tmp_path) as client:
        await client.run_turn("question")
        history = await client.get_history()
        state = await client.get_state()
    assert [c["role"] for c in history.messages] == ["user", "model"]
    assert history.messages[0]["parts"][0]["text"] == "question"
    assert state.busy is False and state.history_length == 2 and state.session_id == client.connected.session_id


async def test_a_request_goes_on_when_its_connection_closes_and_the_idle_session_is_unloaded_later():
    # Sessions outlive connections (issue 10): the request runs to its end,
    # every event is logged for a client that resumes, and once the session
    # is idle and detached for detached_grace it leaves memory (not the store).
    model = ScriptedModel([{"text": "x" * 50, "chunks": 50, "chunk_delay": 0.01}])
    async with open_test_service(model, detached_grace=0.5) as (service, address):
        async with raw_client(address) as raw:
            await raw.send(GenerateContentRequest(prompt="go"))
            await raw.receive()  # the stream has started
            [session] = service.sessions.values()
        with trio.fail_after(5):
            while service.sessions:
                await trio.sleep(0.01)
        events = [decode(e.data) for e in await service.store.events_after(session.id, 0)]
    assert "".join(e.content for e in events if isinstance(e, TextDelta)) == "x" * 50
    turn = [e for e in events if not isinstance(e, ClientsChanged)]  # joined, left
    assert isinstance(turn[-1], Finished) and turn[-1].reason == "stop"
    assert [e.seq for e in events] == list(range(1, len(events) + 1))


async def test_cancel_for_another_request_id_is_ignored():
    model = ScriptedModel([{"text": "fine", "delay": 0.2}])
    async with open_test_service(model) as (_, address), raw_client(address) as raw:
        await raw.send(GenerateContentRequest(prompt="go"))
        await raw.send(Cancel(request_id="not-this-one"))
        seen = await raw.receive_until(lambda m: isinstance(m, Finished))
    assert seen[-1].reason == "stop"


async def test_a_server_that_goes_silent_mid_turn_is_detected_by_a_probe(tmp_path, autojump_clock):
    """A vanished server (no close, no answers) ends the turn with a clear
    error instead of a hang."""
    from gemini_split.tools.approval import ApprovalPolicy
    from gemini_split.tools.executor import ToolExecutor
    from gemini_split.client.protocol_client import ProtocolClient
    from gemini_split.tools.workspace import Workspace
    from gemini_split.protocol import Connected, decode, encode
    from gemini_split.transport import ConnectOptions, ServeOptions, get_transport

    async def frozen_server(stream):
        decode(await stream.receive())  # hello
        await stream.send(encode(stamp(Connected(session_id="s-frozen"))))
        await trio.sleep_forever()  # reads nothing, answers nothing

    transport = get_transport("loopback:")
    async with trio.open_nursery() as nursery:
        address = await nursery.start(transport.serve, "loopback:", frozen_server, ServeOptions())
        stream = await transport.open_connection(address, ConnectOptions())
        client = ProtocolClient(stream, ToolExecutor(default_tools(), Workspace(tmp_path), ApprovalPolicy()),
                                probe_after=30, probe_timeout=10)
        await client.handshake()
        await nursery.start(client.run)
        start = trio.current_time()
        outcome = await client.run_turn("anyone there?")
        elapsed = trio.current_time() - start
        nursery.cancel_scope.cancel()
    assert outcome.error is not None and outcome.error.code == "connection_lost"
    assert "stopped answering" in outcome.error.message
    assert 30 <= elapsed <= 45


async def test_a_slow_but_live_server_is_not_mistaken_for_a_dead_one(tmp_path, autojump_clock):
    model = ScriptedModel([{"text": "after a long think", "delay": 200}])
    async with open_test_service(model) as (_, address), connected_client(address, tmp_path) as client:
        outcome = await client.run_turn("think hard")
    assert outcome.finished is not None


async def test_a_streamed_answer_is_kept_as_one_text_part_not_one_per_chunk(tmp_path):
    model = ScriptedModel([{"text": "a" * 500, "chunks": 500, "thought": "hmm"}, {"text": "next"}])
    async with open_test_service(model) as (_, address), connected_client(address, tmp_path) as client:
        await client.run_turn("first")
        await client.run_turn("second")
    answer = model.requests[1].contents[1]
    assert answer == {"role": "model", "parts": [{"text": "hmm", "thought": True}, {"text": "a" * 500}]}


def test_parts_with_more_than_text_are_never_merged():
    from gemini_split.server.session.chain import merge_text_parts

    parts = [
        {"text": "a"}, {"text": "b"},
        {"text": "c", "thought_signature": "c2ln"},
        {"text": "d"}, {"function_call": {"name": "f", "args": {}}}, {"text": "e"}, {"text": "f"},
        {"text": "t1", "thought": True}, {"text": "t2", "thought": True}, {"text": "g"},
    ]
    assert merge_text_parts(parts) == [
        {"text": "ab"},
        {"text": "c", "thought_signature": "c2ln"},
        {"text": "d"}, {"function_call": {"name": "f", "args": {}}}, {"text": "ef"},
        {"text": "t1t2", "thought": True}, {"text": "g"},
    ]
