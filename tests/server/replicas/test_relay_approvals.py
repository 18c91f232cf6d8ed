"""Server-side tools' approvals through the relay (issues 12 + 20): a
client attached on the other replica is one of the session's approvers —
counted (so the session asks it instead of refusing), told which questions
wait when it joins and asked them again after its replay, and its decision
is the one that runs the call, once. Two replicas on a real redis-server,
raw clients on the loopback transport."""

from __future__ import annotations

import pytest

from gemini_split.protocol import (
    Connected,
    Finished,
    GenerateContentRequest,
    ToolAwaitingApproval,
    ToolCompleted,
    ToolExecutionRequest,
    ToolDecided,
    ToolDecision,
    ToolError,
)
from gemini_split.testing import redis_server as rs

from tests.server.attach.test_attach_server import hello
from tests.server.server_tools.helpers import APPROVER, finish, make_server_tools, until
from tests.server.server_tools.test_server_tools import _write
from .test_relay import _turn, two_replicas

pytestmark = [pytest.mark.skipif(not rs.available(), reason=rs.MISSING), pytest.mark.timeout(60)]


def _decided(events) -> list[tuple[str, str, str]]:
    return [(d.call_id, d.decision, d.by) for d in events if isinstance(d, ToolDecided)]


async def test_a_client_relayed_from_the_other_replica_is_the_approver_the_session_asks(redis_server, tmp_path):
    """The laptop runs the session on A but cannot answer questions (a
    script asking for ``default`` mode without ``tool_approvals``); the
    phone, relayed through B, can: the session asks instead of refusing
    ("nobody to ask"), and the phone's approval runs the call once."""
    root = tmp_path / "ws"
    script = [{"text": "ready"}, _write("plan.md", "# Plan\n"), {"text": "written"}]
    async with two_replicas(redis_server, script, server_tools=make_server_tools(root)) as (
            (service_a, service_b), (at_a, at_b)):
        async with hello(at_a, tools="server", approval_mode="default", label="laptop") as (laptop, first):
            *_, done = await _turn(laptop, "get ready")  # the session is in the store
            async with hello(at_b, session_id=first.session_id, capabilities=APPROVER, label="phone",
                             last_seq=done.seq) as (phone, joined):
                assert isinstance(joined, Connected) and "server_tools" in joined.capabilities
                assert service_b.relays == 1 and first.session_id not in service_b.sessions  # relayed
                await laptop.receive_until(lambda m: m.TYPE == "clients_changed")
                await laptop.send(GenerateContentRequest(prompt="write the plan"))
                *_, question = await phone.receive_until(lambda m: isinstance(m, ToolAwaitingApproval | Finished))
                assert isinstance(question, ToolAwaitingApproval), "refused: the relayed phone was not counted"
                assert question.parameters["file_path"] == "plan.md" and "# Plan" in question.description
                assert not (root / first.session_id / "plan.md").exists()
                await phone.send(ToolDecision(call_id=question.call_id, decision="approve",
                                              parameters_hash=question.parameters_hash))
                phone_rest = await finish(phone)
                laptop_rest = await finish(laptop)
    for rest in (phone_rest, laptop_rest):
        assert _decided(rest) == [(question.call_id, "approve", "phone")]
        assert [c.call_id for c in rest if isinstance(c, ToolCompleted)] == [question.call_id]
        assert not any(isinstance(e, ToolError) for e in rest), rest
    assert (root / first.session_id / "plan.md").read_text() == "# Plan\n"


async def test_a_session_taken_over_by_the_other_replica_still_runs_its_tools_on_the_server(redis_server,
                                                                                           tmp_path):
    """The laptop opens a server-tools session on A and leaves (A gives the
    idle session up); the phone resumes it on B without saying where tools
    run: B restores it with its tools on the server (the store keeps the
    choice), not on the phone, asks the phone, and its approval runs the
    call in the session's workspace."""
    root = tmp_path / "ws"
    script = [{"text": "ready"}, _write("plan.md", "# Plan\n"), {"text": "written"}]
    async with two_replicas(redis_server, script, server_tools=make_server_tools(root)) as (
            (_, service_b), (at_a, at_b)):
        async with hello(at_a, tools="server", capabilities=APPROVER, label="laptop") as (laptop, first):
            assert "server_tools" in first.capabilities
            *_, done = await _turn(laptop, "get ready")  # the session is in the store
        async with hello(at_b, session_id=first.session_id, capabilities=APPROVER, label="phone",
                         last_seq=done.seq) as (phone, joined):
            assert isinstance(joined, Connected) and "server_tools" in joined.capabilities
            assert first.session_id in service_b.sessions  # B runs it now
            await phone.send(GenerateContentRequest(prompt="write the plan"))
            *_, question = await phone.receive_until(
                lambda m: isinstance(m, ToolAwaitingApproval | ToolExecutionRequest))
            assert isinstance(question, ToolAwaitingApproval), f"the phone was asked to run the tool: {question}"
            assert question.parameters["file_path"] == "plan.md" and "# Plan" in question.description
            assert not (root / first.session_id / "plan.md").exists()
            await phone.send(ToolDecision(call_id=question.call_id, decision="approve",
                                          parameters_hash=question.parameters_hash))
            rest = await finish(phone)
    assert _decided(rest) == [(question.call_id, "approve", "phone")]
    assert [c.call_id for c in rest if isinstance(c, ToolCompleted)] == [question.call_id]
    assert not any(isinstance(e, ToolError) for e in rest), rest
    assert (root / first.session_id / "plan.md").read_text() == "# Plan\n"


async def test_a_question_waiting_when_a_client_joins_through_the_relay_is_asked_again(redis_server, tmp_path):
    """The laptop is asked and leaves the question open; the phone joins on
    the other replica: ``connected.pending_approvals`` names it, it is asked
    again after the replay (live, no seq), and its decision wins."""
    root = tmp_path / "ws"
    script = [{"text": "ready"}, _write("hello.txt", "from the phone\n"), {"text": "written"}]
    async with two_replicas(redis_server, script, server_tools=make_server_tools(root)) as (_, (at_a, at_b)):
        async with hello(at_a, tools="server", capabilities=APPROVER, label="laptop") as (laptop, first):
            await _turn(laptop, "get ready")
            await laptop.send(GenerateContentRequest(prompt="write it"))
            _, question = await until(laptop, ToolAwaitingApproval)
            async with hello(at_b, session_id=first.session_id, capabilities=APPROVER, label="phone") as (
                    phone, joined):
                assert isinstance(joined, Connected), joined
                assert joined.pending_approvals == (question.call_id,)
                assert joined.active_request_id == question.request_id
                _, asked = await until(phone, ToolAwaitingApproval, replayed=False)
                assert (asked.call_id, asked.parameters_hash, asked.seq) == (
                    question.call_id, question.parameters_hash, None)
                assert not (root / first.session_id / "hello.txt").exists()
                await phone.send(ToolDecision(call_id=question.call_id, decision="approve",
                                              parameters_hash=question.parameters_hash))
                phone_rest = await finish(phone)
                laptop_rest = await finish(laptop)
                # the laptop's late approval decides nothing
                await laptop.send(ToolDecision(call_id=question.call_id, decision="approve",
                                               parameters_hash=question.parameters_hash))
                late = await laptop.receive_until(lambda m: m.TYPE == "error")
                assert late[-1].code == "already_decided"
    for rest in (phone_rest, laptop_rest):
        assert _decided(rest) == [(question.call_id, "approve", "phone")]
        assert [c.call_id for c in rest if isinstance(c, ToolCompleted)] == [question.call_id]
    assert (root / first.session_id / "hello.txt").read_text() == "from the phone\n"
