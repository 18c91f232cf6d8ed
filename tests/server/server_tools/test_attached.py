"""Approvals with several clients on one session (issues 11 + 12): every
attached client is asked, the first decision from any of them runs the call
once, the others hear who decided; an observer cannot decide; a client that
attaches while a question waits is asked it too."""

from __future__ import annotations

from gemini_split.protocol import (
    Error,
    GenerateContentRequest,
    ToolAwaitingApproval,
    ToolCompleted,
    ToolDecided,
    ToolDecision,
)
from gemini_split.server.model.scripted import ScriptedModel

from .helpers import APPROVER, finish, hello, make_server_tools, serving, until
from .test_server_tools import _write


async def test_a_second_attached_client_approves_and_the_call_runs_once(tmp_path):
    root = tmp_path / "ws"
    model = ScriptedModel([_write("hello.txt", "from the phone\n"), {"text": "written"}])
    async with serving(model, make_server_tools(root)) as (_, address):
        async with hello(address, tools="server", capabilities=APPROVER, label="laptop") as (laptop, connected):
            await laptop.send(GenerateContentRequest(prompt="write it"))
            _, question = await until(laptop, ToolAwaitingApproval)
            workspace = root / connected.session_id
            attach = dict(session_id=connected.session_id, resume_token=connected.resume_token)
            async with hello(address, capabilities=APPROVER, role="observer", label="tv", **attach) as (tv, _):
                async with hello(address, capabilities=APPROVER, label="phone", **attach) as (phone, joined):
                    # attached while the question waits: told so, and asked it
                    assert joined.pending_approvals == (question.call_id,)
                    _, asked = await until(phone, ToolAwaitingApproval, replayed=False)
                    assert (asked.call_id, asked.parameters_hash) == (question.call_id, question.parameters_hash)
                    assert asked.parameters == question.parameters and "from the phone" in asked.description
                    assert not (workspace / "hello.txt").exists()
                    # an observer sees the question but may not decide it
                    await tv.send(ToolDecision(call_id=question.call_id, decision="approve",
                                               parameters_hash=question.parameters_hash))
                    _, refused = await until(tv, Error)
                    assert refused.code == "forbidden"
                    await phone.send(ToolDecision(call_id=question.call_id, decision="approve",
                                                  parameters_hash=question.parameters_hash))
                    laptop_rest = await finish(laptop)
                    phone_rest = await finish(phone)
                    tv_rest = await finish(tv)
                    # the laptop's late approval decides nothing
                    await laptop.send(ToolDecision(call_id=question.call_id, decision="approve",
                                                   parameters_hash=question.parameters_hash))
                    _, late = await until(laptop, Error)
                    assert late.code == "already_decided"
    for rest in (laptop_rest, phone_rest, tv_rest):
        decided = [(d.call_id, d.decision, d.by) for d in rest if isinstance(d, ToolDecided)]
        assert decided == [(question.call_id, "approve", "phone")]
        assert [c.call_id for c in rest if isinstance(c, ToolCompleted)] == [question.call_id]
    assert (workspace / "hello.txt").read_text() == "from the phone\n"
    assert len(model.requests) == 2  # the call ran once, its result went back once
