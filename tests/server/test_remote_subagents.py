"""(1.5) A remote (Agent2Agent) sub-agent on the server: no model loop, a
``tool_execution_request`` of the agent's name to the client that runs the
session's tools, its ``tool_progress`` sent on as the sub-agent's text — and
ignored for any other call. A raw client plays the client's part."""

from __future__ import annotations

import json

import msgspec
import pytest

from gemini_split.protocol import (
    AgentDefinition,
    GenerateContentRequest,
    SessionContext,
    ToolExecutionResponse,
    ToolProgress,
)
from gemini_split.server.model.scripted import ScriptedModel
from gemini_split.testing.service import open_test_service

from .helpers import raw_client

pytestmark = pytest.mark.timeout(30)

PEER = AgentDefinition(name="peer", description="A peer.", kind="remote", url="https://peer.example/rpc",
                       input_schema={"type": "object", "properties": {"query": {"type": "string"}},
                                     "required": ["query"]})


async def test_a_remote_agent_is_called_through_the_client_and_its_progress_is_its_text():
    model = ScriptedModel([
        {"function_calls": [{"name": "peer", "args": {"query": "what is due?"}}]},
        {"text": "Nothing is due."},
        {"function_calls": [{"name": "read_file", "args": {"file_path": "a.txt"}}]},
        {"text": "Read."},
    ])
    async with open_test_service(model) as (_service, address), raw_client(address) as raw:
        await raw.send(GenerateContentRequest(prompt="ask the peer", context=SessionContext(agents=(PEER,))))
        seen = await raw.receive_until(lambda e: e.TYPE == "tool_execution_request")
        call = seen[-1]
        started = next(e for e in seen if e.TYPE == "agent_started")
        assert (call.tool, call.parameters, call.agent_id) == ("peer", {"query": "what is due?"}, started.agent_id)
        assert started.agent_id != 0 and started.model == "" and started.task == "what is due?"
        for text in ("Invoice 42 ", "is paid."):
            await raw.send(ToolProgress(request_id=call.id, content=text))
        await raw.send(ToolExecutionResponse(request_id=call.id, result="REPORT: Invoice 42 is paid."))
        seen = await raw.receive_until(lambda e: e.TYPE == "finished")
        texts = [e.content for e in seen if e.TYPE == "text_delta" and e.agent_id == started.agent_id]
        # Streamed (adjacent deltas may reach a client merged), and the answer not said again.
        assert "".join(texts) == "Invoice 42 is paid."
        (finish,) = [e for e in seen if e.TYPE == "agent_finished"]
        assert finish.outcome == "completed" and finish.summary == "REPORT: Invoice 42 is paid."
        assert "REPORT: Invoice 42 is paid." in json.dumps(model.requests[1].contents)

        # Progress on a call that is not a remote agent's is dropped.
        await raw.send(GenerateContentRequest(prompt="read a.txt"))
        seen = await raw.receive_until(lambda e: e.TYPE == "tool_execution_request")
        local = seen[-1]
        await raw.send(ToolProgress(request_id=local.id, content="FORGED"))
        await raw.send(ToolExecutionResponse(request_id=local.id, result="contents"))
        seen = await raw.receive_until(lambda e: e.TYPE == "finished")
        assert not [e for e in seen if e.TYPE == "text_delta" and "FORGED" in e.content]


async def test_a_failed_remote_call_ends_the_sub_agent_with_the_clients_words_and_the_request_goes_on():
    from gemini_split.protocol import ToolFailure

    model = ScriptedModel([
        {"function_calls": [{"name": "peer", "args": {"query": "q"}}]},
        {"text": "It failed."},
    ])
    async with open_test_service(model) as (_service, address), raw_client(address) as raw:
        await raw.send(GenerateContentRequest(prompt="go", context=SessionContext(agents=(PEER,))))
        call = (await raw.receive_until(lambda e: e.TYPE == "tool_execution_request"))[-1]
        await raw.send(ToolExecutionResponse(request_id=call.id, error=ToolFailure(
            code="timeout", message="the remote agent peer did not answer within 3 seconds")))
        seen = await raw.receive_until(lambda e: e.TYPE == "finished")
    (finish,) = [e for e in seen if e.TYPE == "agent_finished"]
    assert finish.outcome == "timeout"
    assert finish.summary == ("the remote agent at https://peer.example/rpc: the remote agent peer did not answer "
                              "within 3 seconds")
    assert [e.content for e in seen if e.TYPE == "text_delta" and not e.agent_id] == ["It failed."]


@pytest.mark.parametrize(("minutes", "cap", "waits"), [
    (20, 24 * 3600.0, 20 * 60 + 60.0),  # longer than the tool timeout: its own limit, plus that
    (None, 24 * 3600.0, 10 * 60 + 60.0),  # no timeout_mins: gemini-cli's 10 minutes
    (20, 120.0, 120 + 60.0),  # the server's sub-agent maximum caps it
])
async def test_the_server_waits_for_a_remote_agents_call_as_long_as_the_agent_may_run(minutes, cap, waits):
    """A remote agent's call is not cut at the session's tool timeout: the
    server waits its ``timeout_mins`` plus the tool timeout, so the client's
    own timeout and message end it."""
    model = ScriptedModel([{"function_calls": [{"name": "peer", "args": {"query": "q"}}]}, {"text": "ok"}])
    peer = msgspec.structs.replace(PEER, timeout_mins=minutes)
    async with open_test_service(model, tool_timeout=60.0, subagent_timeout_max=cap) as (_service, address), \
            raw_client(address) as raw:
        await raw.send(GenerateContentRequest(prompt="ask", context=SessionContext(agents=(peer,))))
        seen = await raw.receive_until(lambda e: e.TYPE == "tool_execution_request")
        assert seen[-1].timeout == waits
        await raw.send(ToolExecutionResponse(request_id=seen[-1].id, result="fine"))
        await raw.receive_until(lambda e: e.TYPE == "finished")
