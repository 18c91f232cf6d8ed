"""Issue 32: gemini-cli's final recovery turn. A sub-agent that reaches
``max_turns`` or ``timeout_mins`` is told, in gemini-cli's words, that it is
out of turns or time and must call ``complete_task`` now; it gets one more
model call (bounded, running no tool), its answer is the report, and its
outcome still names the limit. The real AgentService and ProtocolClient, a
scripted model told apart per agent by its system instruction."""

from __future__ import annotations

import pytest
import trio

from gemini_split.tools.approval import Answer
from gemini_split.protocol import AgentFinished, SessionContext

from tests.server.server_tools.helpers import serving
from tests.server.server_tools.test_client_approvals import ScriptedAsker
from tests.server.test_subagents import agent, calls, client_for, done, main_turn, sub_turn

pytestmark = pytest.mark.timeout(60)

LOOP = sub_turn("LOOPER", **calls(("list_directory", {"dir_path": "."})))
OUT_OF_TURNS = "You have exceeded the maximum number of turns."
OUT_OF_TIME = "You have exceeded the time limit."
FINAL_CHANCE = ("You have one final chance to complete the task with a short grace period. You MUST call "
                "`complete_task` immediately with your best answer and explain that your investigation was "
                "interrupted. Do not call any other tools.")


def looper(**fields):
    return SessionContext(agents=(agent("looper", "You are LOOPER.", tools=("list_directory", "write_file"),
                                        **fields),), approval_mode="default")


def main_answer(model) -> dict:
    """What the main model was told of the sub-agent (its function response)."""
    return model.requests[-1].contents[-1]["parts"][0]["function_response"]["response"]


def grace_request(model):
    return [r for r in model.requests if "LOOPER" in (r.system_instruction or "")][-1]


async def _run(tmp_path, model, context, asker=None, **config):
    events: list = []
    async with serving(model, None, **config) as (_service, address):
        async with client_for(address, tmp_path, asker or ScriptedAsker(), events) as client:
            with trio.fail_after(20):
                outcome = await client.run_turn("go", context=context)
    assert outcome.finished is not None
    (finished,) = [e for e in events if isinstance(e, AgentFinished)]
    return finished


async def test_at_max_turns_the_sub_agent_gets_one_recovery_turn_and_its_complete_task_is_the_report(tmp_path):
    model = script([LOOP, LOOP, sub_turn("LOOPER", **done("PARTIAL: two files seen, interrupted"))])
    finished = await _run(tmp_path, model, looper(max_turns=2))
    assert finished.outcome == "max_turns" and finished.turns == 2
    grace = grace_request(model)
    told = grace.contents[-1]
    assert told["role"] == "user" and told["parts"][-1]["text"] == f"{OUT_OF_TURNS} {FINAL_CHANCE}"
    assert any("function_response" in p for p in told["parts"])  # the last calls' answers, in the same turn
    answer = main_answer(model)["error"]
    assert answer["code"] == "max_turns" and "PARTIAL: two files seen, interrupted" in answer["message"]
    assert "Termination Reason: MAX_TURNS" in answer["message"]


async def test_at_timeout_the_sub_agent_gets_one_recovery_turn_and_its_text_is_the_report(tmp_path):
    model = script([sub_turn("LOOPER", delay=30, text="never"),
                            sub_turn("LOOPER", text="Out of time: what I know so far is X.")])
    finished = await _run(tmp_path, model, looper(timeout_mins=0.01))
    assert finished.outcome == "timeout"
    assert grace_request(model).contents[-1]["parts"][-1]["text"] == f"{OUT_OF_TIME} {FINAL_CHANCE}"
    answer = main_answer(model)["error"]
    assert answer["code"] == "timeout" and "Out of time: what I know so far is X." in answer["message"]


async def test_a_recovery_turn_that_still_calls_tools_runs_none_of_them(tmp_path):
    model = script([LOOP, sub_turn("LOOPER", text="still going ",
                                          **calls(("write_file", {"file_path": "late.txt", "content": "x"})))])
    asker = ScriptedAsker(Answer.YES)
    finished = await _run(tmp_path, model, looper(max_turns=1), asker)
    assert finished.outcome == "max_turns"
    assert not (tmp_path / "client" / "late.txt").exists() and asker.asked == []
    assert "still going" in main_answer(model)["error"]["message"]
    assert len([r for r in model.requests if "LOOPER" in (r.system_instruction or "")]) == 2


async def test_the_recovery_turn_has_its_own_short_time_limit(tmp_path):
    model = script([sub_turn("LOOPER", text="first look ", **calls(("list_directory", {"dir_path": "."}))),
                            sub_turn("LOOPER", delay=30, text="too late")])
    began = trio.current_time()
    finished = await _run(tmp_path, model, looper(max_turns=1), subagent_grace_seconds=0.5)
    assert trio.current_time() - began < 15
    assert finished.outcome == "max_turns"
    message = main_answer(model)["error"]["message"]
    assert "too late" not in message and "first look" in message  # what it said before


def script(sub_turns):
    """The main model delegates to ``looper``, then answers; ``sub_turns`` are the sub-agent's."""
    from gemini_split.server.model.scripted import ScriptedModel

    return ScriptedModel([main_turn(**calls(("looper", {"query": "look around"}))), *sub_turns,
                          main_turn(text="ok")])


async def test_the_operators_turn_limit_bounds_the_whole_request_a_sub_agent_cannot_raise_it(tmp_path):
    """T4-2: under ``serve --max-turns 4`` a sub-agent the client brings with
    ``max_turns: 500`` made 503 model calls for one prompt. The request's
    turns, its sub-agents' included, are the operator's; no recovery turn
    is taken past them."""
    model = script([LOOP] * 20)
    events: list = []
    async with serving(model, None, max_turns=4) as (_service, address):
        async with client_for(address, tmp_path, ScriptedAsker(), events) as client:
            with trio.fail_after(20):
                outcome = await client.run_turn("go", context=looper(max_turns=500))
    assert len(model.requests) == 4  # the main agent's 1 and the sub-agent's 3: no more
    assert outcome.error is not None and outcome.error.code == "turn_limit", outcome
    assert "its sub-agents' included" in outcome.error.message
    (finished,) = [e for e in events if isinstance(e, AgentFinished)]
    assert finished.outcome == "max_turns" and finished.turns == 3
