"""Issue 32 in an editor (ACP): a sub-agent is the tool call that started
it, and its steps — its start, the tools it runs, its end — come as that
call's own ``tool_call_update``s, its text as thought chunks naming the call
(issue 45 §4: appended, only what is new), never as the main agent's
message. The real ACP session folds the real native events a session sends;
a real editor (the ACP SDK) watches a long sub-agent."""

from __future__ import annotations

import pytest

from gemini_split.acp.agent import AcpAgent, AcpSession
from gemini_split.client.connect import ClientSettings, ToolSettings
from gemini_split.protocol import (
    AgentFinished,
    AgentStarted,
    Replay,
    RequestStarted,
    TextDelta,
    ToolCompleted,
    ToolStarted,
    Usage,
)


async def test_a_sub_agent_shows_as_its_tool_call_with_its_own_updates(tmp_path):
    settings = ClientSettings(tools=ToolSettings(workspace=tmp_path))
    session = AcpSession(AcpAgent(settings, shared=False, local_tools=False), "local", settings, "/ws")
    parent = "r-1.agent.1"
    for event in [
        RequestStarted(request_id="r-1", prompt="go"),
        ToolStarted(request_id="r-1", call_id=parent, tool="scout", parameters={"query": "look"}),
        AgentStarted(request_id="r-1", agent_id=1, name="scout", parent_call_id=parent, model="flash",
                     task="look"),
        TextDelta(request_id="r-1", content="SUB-TEXT", agent_id=1),
        ToolStarted(request_id="r-1", call_id="t-1", tool="read_file", parameters={"file_path": "a.txt"},
                    agent_id=1),
        ToolCompleted(request_id="r-1", call_id="t-1", tool="read_file", result="a", agent_id=1),
        AgentFinished(request_id="r-1", agent_id=1, name="scout", parent_call_id=parent, outcome="completed",
                      turns=2, tool_calls=1, usage=Usage(total_tokens=9), summary="all clear"),
        ToolCompleted(request_id="r-1", call_id=parent, tool="scout", result="all clear"),
        TextDelta(request_id="r-1", content="main answer"),
    ]:
        await session._on_event(event)
    updates = [m["update"] for m in session.ring.replay(Replay())]
    kinds = [(u["sessionUpdate"], u.get("toolCallId")) for u in updates]
    assert ("tool_call", parent) in kinds
    assert ("tool_call", "t-1") not in kinds  # the sub-agent's call is in its own call's content
    own = [u for u in updates if u.get("toolCallId") == parent and u["sessionUpdate"] == "tool_call_update"]
    assert own[0]["status"] == "in_progress" and own[0]["_meta"]["agentName"] == "scout"
    progress = own[-2]["content"][0]["content"]["text"]
    assert "↳ read_file: a.txt" in progress and "completed: all clear" in progress
    assert "SUB-TEXT" not in progress  # its text is appended, never re-sent with its steps
    assert own[-1]["status"] == "completed"
    (said,) = [u for u in updates if u["sessionUpdate"] == "agent_thought_chunk"]
    assert said["content"]["text"] == "SUB-TEXT"
    assert said["_meta"] == {"toolCallId": parent, "agentId": 1} and said["messageId"] == f"{parent}/0"
    messages = "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk")
    assert messages == "main answer"


def _review(lines: int) -> str:
    return "".join(f"review line {i:04d} of a long sub-agent's text\n" for i in range(lines))


def _turns(lines: int) -> list[dict]:
    """The main agent delegates to ``reviewer``, which reads notes.txt, then
    writes ``lines`` lines in as many chunks and hands in its report."""
    return [
        {"system_contains": "You are gemini-split", "function_calls": [{"name": "reviewer", "args": {"query": "go"}}]},
        {"system_contains": "REVIEWER", "text": "reading the notes\n",
         "function_calls": [{"name": "read_file", "args": {"file_path": "notes.txt"}}]},
        {"system_contains": "REVIEWER", "text": _review(lines), "chunks": lines, "chunk_delay": 0.004,
         "function_calls": [{"name": "complete_task", "args": {"result": "looks fine"}}]},
        {"system_contains": "You are gemini-split", "text": "Reviewed."},
    ]


def _of_call(updates: list[dict], call: str) -> list[dict]:
    return [u for u in updates if u.get("toolCallId") == call or (u.get("_meta") or {}).get("toolCallId") == call]


@pytest.mark.timeout(60)
def test_a_long_sub_agent_costs_an_editor_bytes_in_proportion_to_its_text_and_shows_all_of_it(tmp_path):
    import json

    from gemini_split.testing.fake_gemini import FakeGemini

    from .helpers import API_KEY, agent_env, message_text, run_editor

    home = tmp_path / "home"
    (home / "agents").mkdir(parents=True)
    (home / "agents" / "reviewer.md").write_text("---\nname: reviewer\ndescription: Reviews.\ntools: [read_file]\n"
                                                 "---\nYou are REVIEWER.\n")
    (tmp_path / "notes.txt").write_text("the notes\n")
    short, long = 50, 200
    with FakeGemini(script=[*_turns(short), *_turns(long)], api_key=API_KEY) as fake:
        seen = run_editor({"cwd": str(tmp_path), "env": agent_env(fake, home),
                           "capabilities": {"fs": {"readTextFile": True, "writeTextFile": True}},
                           "steps": [{"do": "initialize"}, {"do": "new"}, {"do": "prompt", "text": "review"},
                                     {"do": "prompt", "text": "review again"}]}, tmp_path, timeout=60)
    assert seen["results"][2:] == [{"stopReason": "end_turn"}] * 2
    assert message_text(seen) == "Reviewed.Reviewed."  # the sub-agent's text is never the answer
    calls = [u["toolCallId"] for u in seen["updates"] if u["sessionUpdate"] == "tool_call"
             and u["title"].startswith("reviewer")]
    sizes = []
    for call, lines in zip(calls, (short, long)):
        updates = _of_call(seen["updates"], call)
        # All of its text, each of its messages whole, in order.
        said: dict[str, str] = {}
        for u in updates:
            if u["sessionUpdate"] == "agent_thought_chunk":
                said[u["messageId"]] = said.get(u["messageId"], "") + u["content"]["text"]
        assert list(said.values()) == ["reading the notes\n", _review(lines)]
        # Its steps, on its call.
        steps = [u for u in updates if u["sessionUpdate"] == "tool_call_update" and u.get("content")]
        first, *rest = steps[-2]["content"][0]["content"]["text"].splitlines()
        assert first.startswith("sub-agent reviewer on ")
        assert rest == ["↳ read_file: notes.txt", "  ✓ read_file", "completed: looks fine"]
        assert steps[-1]["status"] == "completed"
        sizes.append(sum(len(json.dumps(u, ensure_ascii=False)) for u in updates))
    # Four times the text, about four times the bytes; re-sending all of it at
    # every chunk would be about sixteen (docs/performance.md has the figures).
    assert sizes[1] / sizes[0] < 5, sizes
