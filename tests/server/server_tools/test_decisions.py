"""Bad decisions (issue 12, "Bad input and attacks"): unknown, already
decided, expired and another session's call ids, altered arguments, a
decision replayed after a reconnect — each refused with its stable code,
and nothing runs. A pending approval survives its client's disconnect, is
in ``state.pending_approvals`` and is asked again on resume."""

from __future__ import annotations

import trio

from gemini_split.protocol import (
    Cancel,
    Error,
    GenerateContentRequest,
    GetState,
    State,
    ToolAwaitingApproval,
    ToolCompleted,
    ToolDecided,
    ToolDecision,
)
from gemini_split.server.model.scripted import ScriptedModel

from .helpers import APPROVER, finish, hello, make_server_tools, serving, until


def _touch(name):
    return {"function_calls": [{"name": "run_shell_command", "args": {"command": f"touch {name}"}}]}


async def _refusal(raw, decision: ToolDecision) -> Error:
    await raw.send(decision)
    _, error = await until(raw, Error)
    return error


async def test_decisions_that_decide_nothing_get_stable_codes_and_nothing_runs(tmp_path):
    # one model for both sessions: each turn is taken by whichever asks next
    model = ScriptedModel([_touch("other"), _touch("first"), {"text": "ok"}, {"text": "ok"}])
    root = tmp_path / "ws"
    async with serving(model, make_server_tools(root)) as (_, address):
        async with hello(address, tools="server", capabilities=APPROVER) as (other, other_session):
            await other.send(GenerateContentRequest(prompt="go"))
            _, foreign = await until(other, ToolAwaitingApproval)
            async with hello(address, tools="server", capabilities=APPROVER) as (raw, connected):
                workspace = root / connected.session_id
                error = await _refusal(raw, ToolDecision(call_id="t-never", decision="approve"))
                assert error.code == "unknown_call" and not error.fatal
                # another session's call id: the same answer as one that never existed
                error = await _refusal(raw, ToolDecision(call_id=foreign.call_id, decision="approve",
                                                         parameters_hash=foreign.parameters_hash))
                assert error.code == "unknown_call"
                await raw.send(GenerateContentRequest(prompt="go"))
                _, question = await until(raw, ToolAwaitingApproval)
                error = await _refusal(raw, ToolDecision(call_id=question.call_id, decision="maybe"))
                assert error.code == "invalid_field"
                # altered arguments: the hash of other parameters, or none at all
                for wrong in ("0" * 64, None):
                    error = await _refusal(raw, ToolDecision(call_id=question.call_id, decision="approve",
                                                             parameters_hash=wrong))
                    assert error.code == "arguments_changed", wrong
                assert not (workspace / "first").exists()
                # the call still waits: a right decision runs it, once
                await raw.send(ToolDecision(call_id=question.call_id, decision="approve",
                                            parameters_hash=question.parameters_hash))
                events = await finish(raw)
                assert len([e for e in events if isinstance(e, ToolCompleted)]) == 1
                error = await _refusal(raw, ToolDecision(call_id=question.call_id, decision="approve",
                                                         parameters_hash=question.parameters_hash))
                assert error.code == "already_decided"
                assert (workspace / "first").exists()
            await other.send(ToolDecision(call_id=foreign.call_id, decision="deny"))
            await finish(other)
    assert not (root / other_session.session_id / "other").exists()


async def test_an_approval_expires_and_the_model_is_told(tmp_path):
    model = ScriptedModel([_touch("late"), {"text": "ok"}])
    async with serving(model, make_server_tools(tmp_path / "ws", approval_timeout=0.2)) as (_, address):
        async with hello(address, tools="server", capabilities=APPROVER) as (raw, connected):
            await raw.send(GenerateContentRequest(prompt="go"))
            _, question = await until(raw, ToolAwaitingApproval)
            _, decided = await until(raw, ToolDecided)
            assert decided.call_id == question.call_id and decided.decision == "expired"
            await finish(raw)
            error = await _refusal(raw, ToolDecision(call_id=question.call_id, decision="approve",
                                                     parameters_hash=question.parameters_hash))
    assert error.code == "approval_expired"
    response = [p["function_response"]["response"] for p in model.requests[-1].contents[-1]["parts"]][0]
    assert response["error"]["code"] == "not_approved" and "0.2 seconds" in response["error"]["message"]
    assert not (tmp_path / "ws" / connected.session_id / "late").exists()


async def test_a_pending_approval_survives_a_disconnect_and_is_asked_again_on_resume(tmp_path):
    model = ScriptedModel([_touch("made"), {"text": "ok"}])
    root = tmp_path / "ws"
    async with serving(model, make_server_tools(root)) as (_, address):
        async with hello(address, tools="server", capabilities=APPROVER) as (raw, connected):
            await raw.send(GenerateContentRequest(prompt="go"))
            _, question = await until(raw, ToolAwaitingApproval)
            last_seq = question.seq
        # the client is gone; the question waits
        async with hello(address, tools="server", capabilities=APPROVER, session_id=connected.session_id,
                         resume_token=connected.resume_token, last_seq=last_seq) as (raw, again):
            assert again.resumed
            _, asked_again = await until(raw, ToolAwaitingApproval)
            assert asked_again.call_id == question.call_id and asked_again.seq is None  # asked again, unlogged
            assert again.pending_approvals == (question.call_id,)
            assert asked_again.parameters_hash == question.parameters_hash
            await raw.send(GetState())
            _, state = await until(raw, State)
            assert [q.call_id for q in state.pending_approvals] == [question.call_id]
            await raw.send(ToolDecision(call_id=question.call_id, decision="approve",
                                        parameters_hash=question.parameters_hash))
            events = await finish(raw)
            assert len([e for e in events if isinstance(e, ToolCompleted)]) == 1
        # a decision replayed after another reconnect decides nothing
        async with hello(address, tools="server", capabilities=APPROVER, session_id=connected.session_id,
                         resume_token=connected.resume_token, last_seq=events[-1].seq) as (raw, _):
            error = await _refusal(raw, ToolDecision(call_id=question.call_id, decision="approve",
                                                     parameters_hash=question.parameters_hash))
            assert error.code == "already_decided", error
            await raw.send(GetState())
            _, state = await until(raw, State)
            assert state.pending_approvals == ()
    assert (root / connected.session_id / "made").exists()


async def test_a_cancelled_request_withdraws_its_questions(tmp_path):
    model = ScriptedModel([_touch("never"), {"text": "ok"}])
    async with serving(model, make_server_tools(tmp_path / "ws")) as (_, address):
        async with hello(address, tools="server", capabilities=APPROVER) as (raw, connected):
            await raw.send(GenerateContentRequest(prompt="go"))
            _, question = await until(raw, ToolAwaitingApproval)
            await raw.send(Cancel())
            events = await finish(raw)
            decided = [e for e in events if isinstance(e, ToolDecided)]
            assert [(d.call_id, d.decision) for d in decided] == [(question.call_id, "cancelled")]
            with trio.fail_after(5):
                error = await _refusal(raw, ToolDecision(call_id=question.call_id, decision="approve",
                                                         parameters_hash=question.parameters_hash))
    assert error.code == "already_decided"
    assert not (tmp_path / "ws" / connected.session_id / "never").exists()
