"""The agent chain: model turn → tool calls → model turn … until the model
answers without calling a tool.

:func:`run_chain` is the whole loop, for the main agent and for every
sub-agent; what a request plugs into it is given, never looked up: the
tool path (the steps around a tool call, assembled by the request —
``features/assembly.py``), observers before each model turn and after it.
It appends to the run's history as it goes, so a cancelled or failed chain
leaves a history the model API will still accept (every function call
answered).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import trio

from gemini_split.protocol import ErrorCode, ToolFailure

from ...config import ServerConfig
from ...model.base import FunctionCallChunk, Model
from ..request.run import RequestFailed
from .model_turn import model_turn
from .state import AfterTurn, AgentRun, BeforeTurn, CallTool, Emit


class TurnLimitExceeded(RequestFailed):
    """The model kept calling tools past its limit of model calls."""

    code = ErrorCode.TURN_LIMIT


async def run_chain(run: AgentRun, call_tool: CallTool, *, model: Model, config: ServerConfig, emit: Emit,
                    max_turns: int, before_turn: Sequence[BeforeTurn] = (),
                    after_turn: Sequence[AfterTurn] = ()) -> None:
    """Run model turns and their tool calls (through ``call_tool``) until
    the model answers without calling a tool, or an ``after_turn`` observer
    ends it.

    Raises :class:`TurnLimitExceeded` before a model call past
    ``max_turns``, or :class:`~...model.base.ModelError` once retries are
    spent. On any exit the history stays valid for the next request."""
    while True:
        if run.turns >= max_turns:
            raise TurnLimitExceeded(
                f"stopped after {max_turns} model turns without a final answer "
                "(raise the limit with --max-turns if the task really needs more)"
            )
        spend_turn(run)
        run.turns += 1
        for observe in before_turn:
            await observe(run)
        calls: list[FunctionCallChunk] | None = await model_turn(run, model=model, config=config, emit=emit)
        for observe_calls in after_turn:
            if not calls:
                break
            calls = observe_calls(calls)
        if not calls:
            return
        await answer_calls(run, calls, call_tool)


def spend_turn(run: AgentRun) -> None:
    """Take one model turn from the request's :class:`TurnBudget` (its
    sub-agents' turns count too). Raises :class:`TurnLimitExceeded` when
    it is spent."""
    budget = run.budget
    if budget is None:
        return
    if budget.spent >= budget.limit:
        raise TurnLimitExceeded(
            f"stopped after {budget.limit} model turns in this request, its sub-agents' included "
            "(the server's --max-turns)")
    budget.spent += 1


async def answer_calls(run: AgentRun, calls: list[FunctionCallChunk], call_tool: CallTool,
                       answered: Sequence[dict[str, Any] | None] | None = None) -> None:
    """Run ``calls`` (those not ``answered`` already) and append their
    answers to the history as one user turn — when cancelled midway too,
    every call answered (``cancelled``), so the history the next request
    sends is one the API accepts."""
    responses: list[dict[str, Any] | None] = list(answered) if answered is not None else [None] * len(calls)
    try:
        await run_tools(calls, call_tool, responses)
    finally:
        run.history.append({"role": "user", "parts": _answered(calls, responses)})


async def run_tools(
    calls: list[FunctionCallChunk], call_tool: CallTool, responses: list[dict[str, Any] | None]
) -> None:
    """Run the calls whose response is None, concurrently (a call with
    ``wait_for_previous: true`` after the ones before it), filling
    ``responses`` in call order."""

    done = [trio.Event() for _ in calls]

    async def one(i: int, call: FunctionCallChunk) -> None:
        try:
            if isinstance(call.args, dict) and call.args.get("wait_for_previous") is True:
                # gemini-cli's wait_for_previous: after every earlier call of the turn.
                for event in done[:i]:
                    await event.wait()
            result, failure = await call_tool(call.name, call.args)
            payload = {"error": _failure_dict(failure)} if failure is not None else {"output": result}
            responses[i] = function_response(call, payload)
        finally:
            done[i].set()

    async with trio.open_nursery() as nursery:
        for i, call in enumerate(calls):
            if responses[i] is None:
                nursery.start_soon(one, i, call)
            else:
                done[i].set()


def _answered(calls: list[FunctionCallChunk], responses: list[dict[str, Any] | None]) -> list[dict[str, Any]]:
    cancelled = {"error": {"code": "cancelled", "message": "the user cancelled this call"}}
    return [r if r is not None else function_response(c, cancelled) for c, r in zip(calls, responses)]


def function_response(call: FunctionCallChunk, payload: dict[str, Any]) -> dict[str, Any]:
    """The history's answer part to ``call``."""
    part: dict[str, Any] = {"name": call.name, "response": payload}
    if call.call_id:
        part["id"] = call.call_id
    return {"function_response": part}


def _failure_dict(failure: ToolFailure) -> dict[str, Any]:
    out = {"code": failure.code, "message": failure.message}
    if failure.hint:
        out["hint"] = failure.hint
    return out
