"""Issue 31 §6 with the tools on the server: the server runs the model's
``ask_user`` call and asks the attached clients through the approvals
mechanism (1.4: ``tool_awaiting_approval.questions``,
``tool_decision.answers``). The answers are bound to the questions shown;
only clients that said they can answer (capability ``ask_user``, protocol
1.4) are asked; with none, the model reads gemini-cli's non-interactive
refusal and goes on. The scripted model echoes the tool result it got."""

from __future__ import annotations

from gemini_split.protocol import (
    AskUserQuestion,
    Error,
    GenerateContentRequest,
    TextDelta,
    ToolAwaitingApproval,
    ToolDecided,
    ToolDecision,
    ToolDiscovery,
)
from gemini_split.server.model.scripted import ScriptedModel

from .helpers import APPROVER, finish, hello, make_server_tools, serving, until

ASKER = (*APPROVER, "ask_user")
QUESTIONS = [{"question": "Which database?", "header": "Database", "type": "choice",
              "options": [{"label": "PostgreSQL", "description": "A server"},
                          {"label": "SQLite", "description": "A file"}]},
             {"question": "Name?", "header": "Name", "type": "text"}]
ASK = {"function_calls": [{"name": "ask_user", "args": {"questions": QUESTIONS}}]}


def _echo(events) -> str:
    return "".join(e.content for e in events if isinstance(e, TextDelta))


async def test_the_attached_clients_answer_and_the_model_reads_their_answers(tmp_path):
    async with serving(ScriptedModel([ASK]), make_server_tools(tmp_path / "ws")) as (_, address):
        async with hello(address, tools="server", capabilities=ASKER) as (raw, _connected):
            await raw.send(GenerateContentRequest(prompt="set it up"))
            _, question = await until(raw, ToolAwaitingApproval)
            assert question.tool == "ask_user"
            assert question.questions[0] == AskUserQuestion(
                question="Which database?", header="Database", type="choice",
                options=question.questions[0].options)
            assert [o.label for o in question.questions[0].options] == ["PostgreSQL", "SQLite"]
            assert question.questions[1].type == "text"
            # Answers not bound to the questions shown are refused; the question still waits.
            await raw.send(ToolDecision(call_id=question.call_id, decision="approve", parameters_hash="0" * 64,
                                        answers={"0": "PostgreSQL"}))
            _, error = await until(raw, Error)
            assert error.code == "arguments_changed"
            await raw.send(ToolDecision(call_id=question.call_id, decision="approve",
                                        parameters_hash=question.parameters_hash,
                                        answers={"0": "SQLite", "1": "shop", "7": "not asked"}))
            events = await finish(raw)
    decided = [e for e in events if isinstance(e, ToolDecided)]
    assert decided and decided[0].decision == "approve"
    assert _echo(events) == 'Tool results: {"output":"{\\"answers\\":{\\"0\\":\\"SQLite\\",\\"1\\":\\"shop\\"}}"}'


async def test_a_dismissal_is_a_deny_and_the_model_is_told_in_gemini_clis_words(tmp_path):
    async with serving(ScriptedModel([ASK]), make_server_tools(tmp_path / "ws")) as (_, address):
        async with hello(address, tools="server", capabilities=ASKER) as (raw, _connected):
            await raw.send(GenerateContentRequest(prompt="set it up"))
            _, question = await until(raw, ToolAwaitingApproval)
            await raw.send(ToolDecision(call_id=question.call_id, decision="deny"))
            events = await finish(raw)
    assert _echo(events) == 'Tool results: {"output":"User dismissed ask_user dialog without answering."}'


async def test_clients_that_cannot_answer_are_never_asked_and_the_model_goes_on(tmp_path):
    """One that approves but does not list ``ask_user``, and a 1.3 client
    listing it (it would take the question for a yes-or-no approval)."""
    for fields in ({"capabilities": APPROVER}, {"capabilities": ASKER, "protocol_version": "1.3"}):
        async with serving(ScriptedModel([ASK]), make_server_tools(tmp_path / "ws")) as (_, address):
            async with hello(address, tools="server", **fields) as (raw, _connected):
                await raw.send(GenerateContentRequest(prompt="set it up"))
                events = await finish(raw)
        assert not [e for e in events if isinstance(e, ToolAwaitingApproval)], fields
        echo = _echo(events)
        assert 'requires user confirmation, which is not supported in non-interactive mode.' in echo, fields
        assert "no_user_present" in echo


async def test_a_session_where_nobody_is_asked_does_not_offer_ask_user(tmp_path):
    seen: list = []

    class Recording(ScriptedModel):
        async def stream(self, request):
            seen.append([t.name for t in request.tools])
            async for chunk in super().stream(request):
                yield chunk

    async with serving(Recording([{"text": "ok"}, {"text": "ok"}]),
                       make_server_tools(tmp_path / "ws")) as (_, address):
        for caps in (ASKER, ()):  # default mode (someone asks), then reject_dangerous
            async with hello(address, tools="server", capabilities=caps) as (raw, _connected):
                await raw.send(ToolDiscovery())
                await raw.send(GenerateContentRequest(prompt="hi"))
                await finish(raw)
    assert "ask_user" in seen[0] and "ask_user" not in seen[1]
