"""Issue 31 §6 through the relay: a client attached on the other replica
that can answer ``ask_user`` questions (capability ``ask_user``, 1.4) is
one the session asks, and its answers reach the model. Two replicas on a
real redis-server, raw clients on the loopback transport."""

from __future__ import annotations

import pytest

from gemini_split.protocol import Connected, Finished, GenerateContentRequest, TextDelta, ToolAwaitingApproval, ToolDecision
from gemini_split.testing import redis_server as rs

from tests.server.attach.test_attach_server import hello
from tests.server.server_tools.helpers import APPROVER, finish, make_server_tools
from .test_relay import _turn, two_replicas

pytestmark = [pytest.mark.skipif(not rs.available(), reason=rs.MISSING), pytest.mark.timeout(60)]

ASK = {"function_calls": [{"name": "ask_user", "args": {"questions": [
    {"question": "Which database?", "header": "Database", "type": "choice",
     "options": [{"label": "PostgreSQL", "description": ""}, {"label": "SQLite", "description": ""}]}]}}]}


async def test_a_relayed_client_that_can_answer_is_asked_and_its_answers_reach_the_model(redis_server, tmp_path):
    """The laptop on A approves but cannot answer questions; the phone,
    relayed through B, can."""
    async with two_replicas(redis_server, [{"text": "ready"}, ASK],
                            server_tools=make_server_tools(tmp_path / "ws")) as ((_, service_b), (at_a, at_b)):
        async with hello(at_a, tools="server", capabilities=APPROVER, label="laptop") as (laptop, first):
            *_, done = await _turn(laptop, "get ready")
            async with hello(at_b, session_id=first.session_id, capabilities=(*APPROVER, "ask_user"),
                             label="phone", last_seq=done.seq) as (phone, joined):
                assert isinstance(joined, Connected) and service_b.relays == 1
                await laptop.receive_until(lambda m: m.TYPE == "clients_changed")
                await laptop.send(GenerateContentRequest(prompt="set it up"))
                *_, question = await phone.receive_until(lambda m: isinstance(m, ToolAwaitingApproval | Finished))
                assert isinstance(question, ToolAwaitingApproval), "the relayed phone was not asked"
                assert question.questions[0].header == "Database"
                await phone.send(ToolDecision(call_id=question.call_id, decision="approve",
                                              parameters_hash=question.parameters_hash, answers={"0": "SQLite"}))
                await finish(phone)
                rest = await finish(laptop)
    text = "".join(e.content for e in rest if isinstance(e, TextDelta))
    assert text == 'Tool results: {"output":"{\\"answers\\":{\\"0\\":\\"SQLite\\"}}"}'
