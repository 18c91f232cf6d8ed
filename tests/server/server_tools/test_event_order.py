"""Issue 34 (rough edges): for a server-side call that needs a yes,
``tool_awaiting_approval`` comes first and ``tool_started`` only after the
decision — a UI that follows the events never shows a call running while it
waits; a refused call still gets its ``tool_started`` before its
``tool_error`` (every call a UI sees starts and ends)."""

from __future__ import annotations

from gemini_split.protocol import (
    GenerateContentRequest,
    ToolAwaitingApproval,
    ToolCompleted,
    ToolDecision,
    ToolError,
    ToolStarted,
)
from gemini_split.server.model.scripted import ScriptedModel

from .helpers import APPROVER, finish, hello, make_server_tools, serving, until
from .test_server_tools import _shell, _write


async def test_a_call_waiting_for_approval_is_not_started_until_it_is_approved(tmp_path):
    model = ScriptedModel([_write("plan.md", "# Plan\n"), {"text": "written"},
                           _shell("echo no"), {"text": "refused"}])
    async with serving(model, make_server_tools(tmp_path / "ws")) as (_, address):
        async with hello(address, tools="server", capabilities=APPROVER, approval_mode="default") as (raw, _):
            await raw.send(GenerateContentRequest(prompt="write the plan"))
            before, question = await until(raw, ToolAwaitingApproval)
            assert not [m for m in before if isinstance(m, ToolStarted)], before
            await raw.send(ToolDecision(call_id=question.call_id, decision="approve",
                                        parameters_hash=question.parameters_hash))
            rest = await finish(raw)
            kinds = [type(m) for m in rest if getattr(m, "call_id", None) == question.call_id]
            assert kinds.index(ToolStarted) < kinds.index(ToolCompleted), kinds

            await raw.send(GenerateContentRequest(prompt="run it"))
            before, question = await until(raw, ToolAwaitingApproval)
            assert not [m for m in before if isinstance(m, ToolStarted)], before
            await raw.send(ToolDecision(call_id=question.call_id, decision="deny"))
            rest = await finish(raw)
            kinds = [type(m) for m in rest if getattr(m, "call_id", None) == question.call_id]
            assert ToolStarted in kinds and kinds.index(ToolStarted) < kinds.index(ToolError), kinds
