"""Where a session's tools run outlives the server (issue 12 on durable
sessions): the store keeps the choice, so a server-tools session resumed
after a restart runs its tools on the server again — whatever the resuming
client says — and a server that cannot run them refuses to resume it
instead of sending the model's calls to the client."""

from __future__ import annotations

from contextlib import asynccontextmanager

import trio

from gemini_split.protocol import (
    Connected,
    Error,
    GenerateContentRequest,
    ToolAwaitingApproval,
    ToolCompleted,
    ToolDecision,
    ToolExecutionRequest,
)
from gemini_split.server.config import ServerConfig
from gemini_split.server.model.scripted import ScriptedModel
from gemini_split.server.service import AgentService
from gemini_split.server.store.sqlite import SQLiteStore
from gemini_split.transport import ServeOptions, get_transport

from .helpers import APPROVER, finish, hello, make_server_tools
from .test_server_tools import _write


@asynccontextmanager
async def server(model, state, tools):
    """One ``serve --state-dir state`` lifetime (a restart is the next one)."""
    service = AgentService(model, ServerConfig(model="scripted"), store=SQLiteStore(state), server_tools=tools)
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        address = await nursery.start(get_transport("loopback:").serve, "loopback:", service.handle_connection,
                                      ServeOptions())
        yield address
        nursery.cancel_scope.cancel()
    with trio.CancelScope(shield=True):
        await service.aclose()


async def test_after_a_restart_a_server_tools_session_still_runs_its_tools_on_the_server(tmp_path):
    root, state = tmp_path / "ws", tmp_path / "state"
    model = ScriptedModel([{"text": "ready"}, _write("plan.md", "# Plan\n"), {"text": "written"}])
    async with server(model, state, make_server_tools(root)) as address:
        async with hello(address, tools="server", capabilities=APPROVER, label="laptop") as (laptop, first):
            await laptop.send(GenerateContentRequest(prompt="get ready"))
            await finish(laptop)
    async with server(model, state, make_server_tools(root)) as address:
        # resumed by a client that says nothing about tools (the default: its own)
        async with hello(address, session_id=first.session_id, resume_token=first.resume_token,
                         capabilities=APPROVER, label="phone") as (phone, resumed):
            assert isinstance(resumed, Connected) and resumed.resumed
            await phone.send(GenerateContentRequest(prompt="write the plan"))
            *_, question = await phone.receive_until(
                lambda m: isinstance(m, ToolAwaitingApproval | ToolExecutionRequest))
            assert isinstance(question, ToolAwaitingApproval), f"the phone was asked to run the tool: {question}"
            await phone.send(ToolDecision(call_id=question.call_id, decision="approve",
                                          parameters_hash=question.parameters_hash))
            rest = await finish(phone)
    assert [c.call_id for c in rest if isinstance(c, ToolCompleted)] == [question.call_id]
    assert (root / first.session_id / "plan.md").read_text() == "# Plan\n"


async def test_a_server_without_server_tools_refuses_to_resume_such_a_session(tmp_path):
    root, state = tmp_path / "ws", tmp_path / "state"
    model = ScriptedModel([{"text": "ready"}])
    async with server(model, state, make_server_tools(root)) as address:
        async with hello(address, tools="server", capabilities=APPROVER) as (laptop, first):
            await laptop.send(GenerateContentRequest(prompt="get ready"))
            await finish(laptop)
    async with server(model, state, None) as address:  # restarted without --server-tools
        async with hello(address, session_id=first.session_id, resume_token=first.resume_token,
                         capabilities=APPROVER) as (_, reply):
            assert isinstance(reply, Error) and reply.fatal and reply.code == "server_tools_disabled", reply
            assert "runs its tools on the server" in reply.message
