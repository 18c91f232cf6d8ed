"""Issue 32 in an editor (ACP): a sub-agent is the tool call that started
it, and its progress — the tools it runs, its text, its end — comes as that
call's own ``tool_call_update``s, never as the main agent's message. The
real ACP session folds the real native events a session sends."""

from __future__ import annotations

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
    assert "› SUB-TEXT" in progress and "↳ read_file: a.txt" in progress and "completed: all clear" in progress
    assert own[-1]["status"] == "completed"
    messages = "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk")
    assert messages == "main answer"
