"""Approval mode switches on a session whose tools the server runs
(protocol 1.6), with raw clients that say exactly what they send: a
client's ``tool_discovery.approval_mode`` switches the tool host within
``--max-approval-mode`` (beyond it: ``approval_mode_refused``, and nothing
changes), every attached client hears ``approval_mode_changed``, and the
tools the model is offered next follow the mode."""

from __future__ import annotations

import trio

from gemini_split.protocol import (
    ApprovalModeChanged,
    Error,
    GenerateContentRequest,
    State,
    ToolDiscovery,
)
from gemini_split.protocol import GetState
from gemini_split.server.model.scripted import ScriptedModel

from .helpers import APPROVER, finish, hello, make_server_tools, serving, until


class Recording(ScriptedModel):
    """A scripted model that keeps the names of the tools each call offered."""

    def __init__(self, turns):
        super().__init__(turns)
        self.offered: list[set[str]] = []

    async def stream(self, request):
        self.offered.append({t.name for t in request.tools})
        async for chunk in super().stream(request):
            yield chunk


async def test_a_clients_switch_reaches_the_tool_host_and_every_client(tmp_path):
    model = Recording([{"text": "one"}, {"text": "two"}])
    tools = make_server_tools(tmp_path / "ws")
    with trio.fail_after(30):
        async with serving(model, server_tools=tools) as (_service, address), \
                hello(address, tools="server", capabilities=APPROVER) as (first, connected), \
                hello(address, session_id=connected.session_id, capabilities=APPROVER) as (second, _):
            await first.send(GenerateContentRequest(prompt="before"))
            await finish(first)
            await first.send(ToolDiscovery(approval_mode="plan"))
            _, told = await until(second, ApprovalModeChanged)
            assert (told.mode, told.by) == ("plan", "client 1")
            await first.send(GenerateContentRequest(prompt="after"))
            await finish(first)
    assert "run_shell_command" in model.offered[0] and "exit_plan_mode" not in model.offered[0]
    assert "run_shell_command" not in model.offered[1] and "exit_plan_mode" in model.offered[1]


async def test_a_switch_beyond_the_servers_cap_is_refused_and_changes_nothing(tmp_path):
    tools = make_server_tools(tmp_path / "ws", max_approval_mode="default")
    with trio.fail_after(30):
        async with serving(ScriptedModel([]), server_tools=tools) as (_service, address), \
                hello(address, tools="server", capabilities=APPROVER) as (raw, _):
            await raw.send(ToolDiscovery(approval_mode="yolo"))
            _, refused = await until(raw, Error)
            assert refused.code == "approval_mode_refused"
            assert refused.message == ("approval mode yolo is not allowed on this server (at most default; see serve "
                                       "--max-approval-mode)")
            await raw.send(GetState())
            seen, _ = await until(raw, State)
            assert not [m for m in seen if isinstance(m, ApprovalModeChanged)]
