"""Issue 32: sub-agents run on the server, in the session, beside the main
agent — the real AgentService, the real ProtocolClient and tool executor
(the client's tools run on the client, asking its person), a scripted model
told apart per agent by its system instruction (``system_contains``)."""

from __future__ import annotations

from contextlib import asynccontextmanager

import pytest
import trio

from gemini_split.tools.approval import Answer, ApprovalPolicy
from gemini_split.tools.executor import ToolExecutor
from gemini_split.client.protocol_client import ProtocolClient, ServerToolChoice
from gemini_split.tools.registry import default_tools
from gemini_split.tools.workspace import Workspace
from gemini_split.protocol import (
    AgentDefinition,
    AgentFinished,
    AgentStarted,
    Cancel,
    Finished,
    GenerateContentRequest,
    GetState,
    SessionContext,
    State,
    TextDelta,
    ToolAwaitingApproval,
    ToolDiscovery,
    ToolSpec,
    ToolExecutionRequest,
    ToolExecutionResponse,
    ToolStarted,
)
from gemini_split.protocol.turn import Turn
from gemini_split.server.model.scripted import ScriptedModel
from gemini_split.stamping import stamp
from gemini_split.transport import ConnectOptions, get_transport

from tests.server.server_tools.helpers import APPROVER, hello, make_server_tools, serving, until
from tests.server.server_tools.test_client_approvals import ScriptedAsker

MAIN = "You are gemini-split"


def agent(name: str, prompt: str, **fields) -> AgentDefinition:
    return AgentDefinition(name=name, description=f"{name} does things", system_prompt=prompt, **fields)


def main_turn(**turn) -> dict:
    return {"system_contains": MAIN, **turn}


def sub_turn(marker: str, **turn) -> dict:
    return {"system_contains": marker, **turn}


def calls(*pairs) -> dict:
    return {"function_calls": [{"name": n, "args": a} for n, a in pairs]}


def done(result: str) -> dict:
    return calls(("complete_task", {"result": result}))


@asynccontextmanager
async def client_for(address, tmp_path, asker, events, *, server_tools: bool = False):
    """The real ProtocolClient; its own tools (or the server's) and asker."""
    async def on_event(event):
        events.append(event)

    stream = await get_transport(address).open_connection(address, ConnectOptions())
    here = tmp_path / "client"
    here.mkdir(exist_ok=True)
    executor = ToolExecutor(default_tools(), Workspace(here), ApprovalPolicy(), asker)
    client = ProtocolClient(stream, executor, on_event=on_event,
                            tool_choice=ServerToolChoice() if server_tools else None)
    await client.handshake()
    async with trio.open_nursery() as nursery:
        await nursery.start(client.run)
        yield client
        await client.aclose()
        nursery.cancel_scope.cancel()


async def test_a_sub_agents_write_file_asks_in_default_mode_and_the_question_names_the_agent(tmp_path):
    model = ScriptedModel([
        main_turn(**calls(("writer", {"query": "write a.txt"}))),
        sub_turn("WRITER", **calls(("write_file", {"file_path": "a.txt", "content": "hi\n"}))),
        sub_turn("WRITER", **done("wrote a.txt")),
        main_turn(text="written"),
    ])
    asker, events = ScriptedAsker(Answer.YES), []
    context = SessionContext(agents=(agent("writer", "You are WRITER.", tools=("write_file",)),),
                             approval_mode="default")
    async with serving(model, None) as (service, address):
        async with client_for(address, tmp_path, asker, events) as client:
            outcome = await client.run_turn("go", context=context)
    assert outcome.finished is not None
    (question,) = asker.asked
    assert question.tool.name == "write_file" and question.agent == "writer"
    assert (tmp_path / "client" / "a.txt").read_text() == "hi\n"
    started = next(e for e in events if isinstance(e, ToolStarted) and e.tool == "write_file")  # its own report
    assert started.tool == "write_file" and started.agent_id == 1


async def test_with_server_tools_the_sub_agents_approval_question_carries_its_agent_id(tmp_path):
    model = ScriptedModel([
        main_turn(**calls(("writer", {"query": "write a.txt"}))),
        sub_turn("WRITER", **calls(("write_file", {"file_path": "a.txt", "content": "hi\n"}))),
        sub_turn("WRITER", **done("wrote a.txt")),
        main_turn(text="written"),
    ])
    asker, events = ScriptedAsker(Answer.YES), []
    context = SessionContext(agents=(agent("writer", "You are WRITER.", tools=("write_file",)),))
    async with serving(model, make_server_tools(tmp_path / "ws")) as (service, address):
        async with client_for(address, tmp_path, asker, events, server_tools=True) as client:
            outcome = await client.run_turn("go", context=context)
            session_id = client.connected.session_id
    assert outcome.finished is not None
    (question,) = asker.asked
    assert question.agent == "writer"
    asked = next(e for e in events if isinstance(e, ToolAwaitingApproval))
    assert asked.agent_id == 1
    assert (tmp_path / "ws" / session_id / "a.txt").read_text() == "hi\n"


async def test_the_main_context_gets_only_the_reports_and_each_agent_its_own_prompt_model_and_tools(tmp_path):
    (tmp_path / "client").mkdir()
    (tmp_path / "client" / "n.txt").write_text("notes\n")
    model = ScriptedModel([
        main_turn(**calls(("reader", {"query": "read n.txt"}), ("searcher", {"query": "find x"}))),
        sub_turn("READER", text="SUB-TEXT-1 ", **calls(("read_file", {"file_path": "n.txt"}))),
        sub_turn("READER", **done("n.txt says notes")),
        sub_turn("SEARCHER", text="SUB-TEXT-2 ", **done("nothing found")),
        main_turn(text="all done"),
    ])
    agents = (agent("reader", "You are READER.", tools=("read_file",), model="gemini-2.5-flash-lite",
                    temperature=0.3),
              agent("searcher", "You are SEARCHER.", tools=("grep_search", "glob")))
    events = []
    async with serving(model, None) as (service, address):
        async with client_for(address, tmp_path, ScriptedAsker(), events) as client:
            outcome = await client.run_turn("go", context=SessionContext(agents=agents))
    assert outcome.finished is not None
    by_prompt = {}
    for request in model.requests:
        key = "READER" if "READER" in request.system_instruction else (
            "SEARCHER" if "SEARCHER" in request.system_instruction else "main")
        by_prompt.setdefault(key, []).append(request)
    reader, searcher = by_prompt["READER"][0], by_prompt["SEARCHER"][0]
    assert reader.model == "gemini-2.5-flash-lite" and reader.temperature == 0.3
    assert [t.name for t in reader.tools] == ["read_file", "complete_task"]
    assert [t.name for t in searcher.tools] == ["glob", "grep_search", "complete_task"]
    assert searcher.model == "scripted" and "READER" not in searcher.system_instruction
    main = by_prompt["main"]
    assert {"reader", "searcher"} <= {t.name for t in main[0].tools}
    final = str(main[-1].contents)
    assert "n.txt says notes" in final and "nothing found" in final
    assert "SUB-TEXT" not in final and "read_file" not in final  # only the reports
    started = {e.agent_id: e.name for e in events if isinstance(e, AgentStarted)}
    assert sorted(started.values()) == ["reader", "searcher"] and sorted(started) == [1, 2]
    finished = [e for e in events if isinstance(e, AgentFinished)]
    assert {(e.name, e.outcome) for e in finished} == {("reader", "completed"), ("searcher", "completed")}
    reader_done = next(e for e in finished if e.name == "reader")
    assert reader_done.turns == 2 and reader_done.tool_calls == 1 and reader_done.summary == "n.txt says notes"
    assert any(isinstance(e, TextDelta) and e.agent_id and e.content == "SUB-TEXT-1 " for e in events)
    turn = Turn()
    for event in events:
        turn.apply(event)
    assert turn.answer == "all done"  # the sub-agents' text is not the answer
    assert sorted((a.name, a.outcome) for a in turn.agents.values()) == [("reader", "completed"),
                                                                          ("searcher", "completed")]


async def test_a_sub_agent_calling_another_is_refused_with_a_function_response_that_says_so(tmp_path):
    model = ScriptedModel([
        main_turn(**calls(("first", {"query": "x"}))),
        sub_turn("FIRST", **calls(("second", {"query": "y"}))),
        sub_turn("FIRST", **done("could not delegate")),
        main_turn(text="ok"),
    ])
    agents = (agent("first", "You are FIRST.", tools=("*",)), agent("second", "You are SECOND."))
    async with serving(model, None) as (service, address):
        async with client_for(address, tmp_path, ScriptedAsker(), []) as client:
            await client.run_turn("go", context=SessionContext(agents=agents))
    first = [r for r in model.requests if "FIRST" in (r.system_instruction or "")]
    assert "second" not in {t.name for t in first[0].tools}  # '*' never grants a sub-agent
    refusal = first[1].contents[-1]["parts"][0]["function_response"]["response"]["error"]
    assert refusal["code"] == "refused" and "cannot call sub-agent second" in refusal["message"]
    assert not any("SECOND" in (r.system_instruction or "") for r in model.requests)


@pytest.mark.parametrize("limit", ["max_turns", "timeout"])
async def test_a_sub_agent_past_its_limit_ends_with_that_outcome_and_the_main_agent_is_told(tmp_path, limit):
    looping = sub_turn("LOOPER", **calls(("list_directory", {"dir_path": "."})))
    slow = sub_turn("LOOPER", delay=30, text="never")
    turns = [main_turn(**calls(("looper", {"query": "x"})))]
    turns += [looping, looping, looping] if limit == "max_turns" else [slow]
    turns += [main_turn(text="ok")]
    model = ScriptedModel(turns)
    fields = {"max_turns": 2} if limit == "max_turns" else {"timeout_mins": 0.01}
    events = []
    async with serving(model, None) as (service, address):
        async with client_for(address, tmp_path, ScriptedAsker(), events) as client:
            with trio.fail_after(15):
                outcome = await client.run_turn("go", context=SessionContext(
                    agents=(agent("looper", "You are LOOPER.", tools=("list_directory",), **fields),)))
    assert outcome.finished is not None
    (finished,) = [e for e in events if isinstance(e, AgentFinished)]
    assert finished.outcome == limit
    assert ("limit of 2 turns" if limit == "max_turns" else "ran out of time") in finished.summary
    answer = model.requests[-1].contents[-1]["parts"][0]["function_response"]["response"]["error"]
    assert answer["code"] == limit and "did not complete" in answer["message"]


async def test_cancel_stops_every_running_sub_agent_and_state_lists_them_while_they_run(tmp_path):
    model = ScriptedModel([
        main_turn(**calls(("a", {"query": "x"}), ("b", {"query": "y"}))),
        sub_turn("AGENT-A", delay=30, text="never"),
        sub_turn("AGENT-B", delay=30, text="never"),
    ])
    context = SessionContext(agents=(agent("a", "You are AGENT-A."), agent("b", "You are AGENT-B.")))
    async with serving(model, None) as (service, address):
        async with hello(address, client="raw", capabilities=APPROVER) as (raw, connected):
            await raw.send(GenerateContentRequest(id="r-1", prompt="go", context=context))
            first, _ = await until(raw, AgentStarted)
            await until(raw, AgentStarted)  # they start in either order
            await raw.send(GetState(id="q-1"))
            _, state = await until(raw, State)
            assert sorted((a.agent_id, a.name) for a in state.agents) == [(1, "a"), (2, "b")]
            await raw.send(stamp(Cancel()))
            with trio.fail_after(5):
                seen, finished = await until(raw, Finished, request_id="r-1")
    assert finished.reason == "cancelled"
    ended = [e for e in seen if isinstance(e, AgentFinished)]
    assert sorted((e.agent_id, e.outcome) for e in ended) == [(1, "cancelled"), (2, "cancelled")]


async def test_sub_agents_beyond_the_sessions_cap_wait_for_a_slot(tmp_path):
    model = ScriptedModel([
        main_turn(**calls(*[(n, {"query": n}) for n in ("a", "b", "c")])),
        *[sub_turn(f"AGENT-{n.upper()}", delay=0.3, **done(n)) for n in ("a", "b", "c")],
        main_turn(text="ok"),
    ])
    context = SessionContext(agents=tuple(agent(n, f"You are AGENT-{n.upper()}.") for n in ("a", "b", "c")))
    async with serving(model, None, max_subagents=2) as (service, address):
        async with hello(address, client="raw") as (raw, connected):
            await raw.send(GenerateContentRequest(id="r-1", prompt="go", context=context))
            with trio.fail_after(10):
                seen, _ = await until(raw, Finished, request_id="r-1")
    running, most, started = 0, 0, 0
    for event in seen:
        if isinstance(event, AgentStarted):
            running, started = running + 1, started + 1
        elif isinstance(event, AgentFinished):
            running -= 1
        most = max(most, running)
    assert started == 3 and most == 2  # the third started once one of the two had finished


async def test_a_second_client_sees_the_sub_agents_and_a_1_3_client_only_what_it_must_answer(tmp_path):
    model = ScriptedModel([
        main_turn(text="ready"),
        main_turn(**calls(("scout", {"query": "x"}))),
        sub_turn("SCOUT", text="scouting ", **calls(("list_directory", {"dir_path": "."}))),
        sub_turn("SCOUT", **done("all clear")),
        main_turn(text="ok"),
    ])
    context = SessionContext(agents=(agent("scout", "You are SCOUT.", tools=("list_directory",)),))
    async with serving(model, None) as (service, address):
        async with hello(address, client="raw", label="driver") as (driver, connected):
            await driver.send(ToolDiscovery(tools=(ToolSpec(name="list_directory", description="lists"),)))
            await driver.send(GenerateContentRequest(id="r-0", prompt="ready?"))
            await until(driver, Finished, request_id="r-0")
            resume = {"session_id": connected.session_id, "resume_token": connected.resume_token}
            async with hello(address, label="new", **resume) as (new, _), \
                    hello(address, label="old", protocol_version="1.3", **resume) as (old, _):
                await driver.send(GenerateContentRequest(id="r-1", prompt="go", context=context))
                _, request = await until(driver, ToolExecutionRequest)
                assert request.agent_id == 1
                await driver.send(ToolExecutionResponse(request_id=request.id, result="a.txt"))
                with trio.fail_after(10):
                    seen_new, _ = await until(new, Finished, request_id="r-1")
                    seen_old, _ = await until(old, Finished, request_id="r-1")
    new_kinds = {(type(e).__name__, getattr(e, "agent_id", 0)) for e in seen_new}
    assert {("AgentStarted", 1), ("TextDelta", 1), ("ToolExecutionRequest", 1), ("AgentFinished", 1)} <= new_kinds
    old_kinds = {(type(e).__name__, getattr(e, "agent_id", 0)) for e in seen_old}
    # The main agent's events, the delegation as an ordinary tool call, and
    # what a client must answer; none of the sub-agent's own.
    assert {("ToolStarted", 0), ("ToolCompleted", 0), ("TextDelta", 0), ("ToolExecutionRequest", 1)} <= old_kinds
    assert not {k for k in old_kinds if k[0] in ("AgentStarted", "AgentFinished") or k == ("TextDelta", 1)}


async def test_a_sub_agents_failed_model_call_ends_it_with_error_and_the_main_agent_goes_on(tmp_path):
    model = ScriptedModel([
        main_turn(**calls(("broken", {"query": "x"}))),
        sub_turn("BROKEN", error={"status": 400, "message": "bad request for the sub-agent"}),
        main_turn(text="went on"),
    ])
    events = []
    async with serving(model, None) as (service, address):
        async with client_for(address, tmp_path, ScriptedAsker(), events) as client:
            outcome = await client.run_turn("go", context=SessionContext(
                agents=(agent("broken", "You are BROKEN."),)))
    assert outcome.finished is not None
    (finished,) = [e for e in events if isinstance(e, AgentFinished)]
    assert finished.outcome == "error" and "bad request for the sub-agent" in finished.summary
    answer = model.requests[-1].contents[-1]["parts"][0]["function_response"]["response"]["error"]
    assert answer["code"] == "error" and "did not complete" in answer["message"]
