"""Sub-agents on the server (issue 32): the main model delegates to them.

The definitions are the client's (``SessionContext.agents``, read by
``gemini_split/userfiles/agents.py``): nothing here reads a disk. Each enabled
sub-agent is offered to the main model as a function of its own name
(:func:`specs`); a call of one runs it here, in the request's task tree
(:class:`Delegation`):

* its own history — only its report goes back, as the call's function
  response — its own system prompt, model and temperature;
* only the tools it is granted (:func:`grant`): the session's own, clamped
  (a definition never gets more than the session offers, never another
  sub-agent), which run where the session's tools run (a
  ``tool_execution_request`` to the client, or the server's tool host)
  under the same approval mode, policy and sandbox — the call path is the
  main agent's, told which agent calls (``agent_id``);
* (1.5) the tools of its definition's own MCP servers
  (``AgentDefinition.mcp_tools``), which the client runs: offered to it
  alone, never to the main model or another sub-agent;
* limits: ``max_turns`` model calls, ``timeout_mins``, at most
  ``ServerConfig.max_subagents`` running at once per session (more wait);
  no delegation from a sub-agent (refused with a function response);
* ``agent_started`` / ``agent_finished`` around it, and every event it
  causes carries its ``agent_id`` (1, 2 … per request).

(1.5) A remote (Agent2Agent) definition runs no model loop here: the
client that runs the session's tools calls it (its credentials never
reach the server), asked with a ``tool_execution_request`` of the agent's
name carrying its ``agent_id``; the answer is its text and its report
(:meth:`Delegation._run_remote`).

It ends when it calls ``complete_task`` (gemini-cli's way: the argument is
its report, structured when the definition gives ``output_schema``) or
answers without calling a tool (that text is its report). One that reaches
``max_turns`` or ``timeout_mins`` gets gemini-cli's final recovery turn
(:meth:`Delegation._grace`): told in gemini-cli's words that it is out of
turns or time and must call ``complete_task`` now, it has one more model
call, bounded by ``ServerConfig.subagent_grace_seconds`` and running no
tool; what it answers is its report, and its outcome still names the limit. Wording of the
system prompt's rules, the ``@name`` note and the report follow gemini-cli
0.61 (``local-executor.ts``, ``atCommandProcessor.ts``), so agents written
for it read the same.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import trio

from gemini_split.protocol import (
    AgentDefinition,
    AgentFinished,
    AgentStarted,
    Error,
    ErrorCode,
    ProtocolError,
    RunningAgent,
    ServerEvent,
    TextDelta,
    ToolCompleted,
    ToolError,
    ToolFailure,
    ToolSpec,
    ToolExecutionRequest,
    ToolProgress,
    ToolStarted,
    Usage,
    decode,
)

from gemini_split.agent_invocation import AGENT_TOOL, invocation, with_prompt

from ...config import ServerConfig
from ...model.base import Model, ModelError
from ...model.names import ModelNameRefused, check_model_name
from ...store import SessionStore, StoreError
from ..chain import AgentRun, CallTool, TurnLimitExceeded, model_turn, run_chain, spend_turn
from .prompts import instruction_for
from .tool_hooks import Hooks, after_tool, before_tool

log = logging.getLogger(__name__)

#: The tool a sub-agent reports with (gemini-cli's ``complete_task``).
COMPLETE_TASK = "complete_task"
#: gemini-cli's defaults for a definition that names no limits.
DEFAULT_MAX_TURNS = 30
DEFAULT_TIMEOUT_MINS = 10.0
#: The input of a definition that declares none (a Markdown agent's).
QUERY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"query": {"type": "string", "description": "The task for the agent."}},
    "required": [],
}
#: A summary line is at most this long.
SUMMARY_LIMIT = 200
#: (1.5) The most text a remote sub-agent's client may stream in one run
#: (``tool_progress``, characters): the rest arrives with its report.
STREAMED_LIMIT = 1 << 20
#: (1.5) Seconds the server waits for a remote agent's call beyond the
#: agent's own limit, at least: the client's own outcome and message
#: ("did not answer within …") arrive before the server gives up.
REMOTE_ANSWER_MARGIN = 30.0

_RULES = """Important Rules:
* You are running in a non-interactive mode. You CANNOT ask the user for input or clarification.
* Work systematically using available tools to complete your task.
* Always use absolute paths for file operations. Construct them using the provided "Environment Context".
* If a tool call is rejected by the user, acknowledge the rejection, rethink your strategy, and try a different approach. Do not repeatedly attempt the same rejected operation."""
_STRUCTURED = f"""
* When you have completed your task, you MUST call the `{COMPLETE_TASK}` tool with your structured output.
* Do not call any other tools in the same turn as `{COMPLETE_TASK}`.
* This is the ONLY way to complete your mission. If you stop calling tools without calling this, you have failed."""
_PLAIN = f"""
* When you have completed your task, you MUST call the `{COMPLETE_TASK}` tool.
* You MUST include your final findings in the "result" parameter. This is how you return the necessary results for the task to be marked complete.
* Ensure your findings are comprehensive and follow any specific formatting requirements provided in your instructions.
* Do not call any other tools in the same turn as `{COMPLETE_TASK}`."""

#: gemini-cli's final warning (``local-executor.ts``), per outcome that gets
#: a recovery turn.
_GRACE_TAIL = (" You have one final chance to complete the task with a short grace period. You MUST call "
               f"`{COMPLETE_TASK}` immediately with your best answer and explain that your investigation was "
               "interrupted. Do not call any other tools.")
_GRACE_WARNING = {"max_turns": "You have exceeded the maximum number of turns." + _GRACE_TAIL,
                  "timeout": "You have exceeded the time limit." + _GRACE_TAIL}
_GRACE_REASONS = frozenset(_GRACE_WARNING)

#: gemini-cli's termination reasons, as the main model reads them.
_TERMINATION = {"completed": "GOAL", "max_turns": "MAX_TURNS", "timeout": "TIMEOUT",
                "cancelled": "ABORTED", "interrupted": "ABORTED", "error": "ERROR"}


def specs(agents: Sequence[AgentDefinition]) -> list[ToolSpec]:
    """The main model's function declarations: one per sub-agent."""
    return [ToolSpec(name=a.name, description=a.description, parameters=a.input_schema or QUERY_SCHEMA)
            for a in agents]


def force_note(prompt: str, agents: Sequence[AgentDefinition]) -> str | None:
    """gemini-cli's ``<system_note>`` for a prompt that starts with
    ``@name`` naming a sub-agent (None otherwise): it asks the main model to
    delegate to that one."""
    match = re.match(r"\s*@([a-z0-9_-]+)(?=\s|$)", prompt)
    if match is None or match[1] not in {a.name for a in agents}:
        return None
    name = match[1]
    return (f"\n<system_note>\nThe user has explicitly selected the following agent(s): {name}. "
            f"Please use the following tool(s) to delegate the task: '{name}'.\n</system_note>\n")


def glob_match(pattern: str, name: str) -> bool:
    """``*`` matches any run of characters (gemini-cli's tool wildcards:
    ``*``, ``mcp_*``, ``mcp_server_*``); linear in the name for each piece,
    whatever a file chose."""
    pieces = pattern.split("*")
    if len(pieces) == 1:
        return pattern == name
    first, *middle, last = pieces
    if not name.startswith(first) or len(name) < len(first) + len(last) or not name.endswith(last):
        return False
    at, end = len(first), len(name) - len(last)
    for piece in middle:
        found = name.find(piece, at, end)
        if found < 0:
            return False
        at = found + len(piece)
    return True


def grant(definition: AgentDefinition, offered: Sequence[ToolSpec],
          agent_names: frozenset[str]) -> tuple[list[ToolSpec], tuple[str, ...]]:
    """The session's tools ``definition`` may use (every one when it names
    none, as gemini-cli does), never a sub-agent; and the names it asked for
    that it does not get (unknown, not offered in this session, a
    sub-agent), for ``agent_started.refused_tools``."""
    usable = [t for t in offered if t.name not in agent_names and t.name != COMPLETE_TASK]
    if definition.tools is None:
        return usable, ()
    granted = [t for t in usable if any(glob_match(p, t.name) for p in definition.tools)]
    refused = tuple(p for p in definition.tools
                    if "*" not in p and p != COMPLETE_TASK and not any(t.name == p for t in usable))
    return granted, refused


def complete_task_spec(definition: AgentDefinition) -> ToolSpec:
    """gemini-cli's ``complete_task``: its one argument is the report."""
    schema = definition.output_schema or {
        "type": "string",
        "description": ("Your final results or findings to return to the orchestrator. Ensure this is "
                        "comprehensive and follows any formatting requested in your instructions."),
    }
    return ToolSpec(name=COMPLETE_TASK,
                    description="Call this tool to submit your final answer and complete the task. This is the "
                                "ONLY way to finish.",
                    parameters={"type": "object", "properties": {definition.output_name: schema},
                                "required": [definition.output_name]})


def render(template: str, inputs: dict[str, Any]) -> str:
    """``${name}`` replaced by each input (gemini-cli's ``templateString``)."""
    def value(match: re.Match[str]) -> str:
        got = inputs.get(match[1], "")
        return got if isinstance(got, str) else json.dumps(got, ensure_ascii=False)

    return re.sub(r"\$\{([A-Za-z0-9_]+)\}", value, template)


def task_of(definition: AgentDefinition, args: dict[str, Any]) -> str:
    """The sub-agent's first message: its ``query`` template filled in, a
    Markdown agent's ``query`` (gemini-cli's "Get Started!" when empty), or
    the inputs as JSON."""
    if definition.query is not None:
        return render(definition.query, args)
    if definition.input_schema is None:
        query = args.get("query")
        return query if isinstance(query, str) and query.strip() else "Get Started!"
    return json.dumps(args, ensure_ascii=False)


def summary_line(text: str) -> str:
    """The first non-empty line of ``text``, at most :data:`SUMMARY_LIMIT` characters."""
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= SUMMARY_LIMIT else line[:SUMMARY_LIMIT - 1] + "…"
    return ""


@dataclass(eq=False)
class SubAgent:
    """One sub-agent while it runs (``state.agents`` lists these)."""

    agent_id: int
    definition: AgentDefinition
    parent_call_id: str
    model_name: str
    tools: list[ToolSpec]
    refused: tuple[str, ...]
    task: str
    turns: int = 0
    tool_calls: int = 0
    #: The tools it runs now (one name shown; several run at once at times).
    current: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    #: (1.5) A remote agent's text streamed so far (``tool_progress``).
    streamed: int = 0

    def info(self) -> RunningAgent:
        return RunningAgent(agent_id=self.agent_id, name=self.definition.name, parent_call_id=self.parent_call_id,
                            model=self.model_name, turns=self.turns, tool_calls=self.tool_calls,
                            tool=self.current[-1] if self.current else "")


@dataclass
class _Ending:
    outcome: str
    report: str = ""
    error: str = ""


class Delegation:
    """The sub-agents of one request: its step (:meth:`step`) runs a call of
    a sub-agent, its observer of the main agent's turns (:meth:`plan`)
    numbers them.

    ``tool_caller(agent_id)`` is the session's tool path for a sub-agent's
    calls; ``sub_path(sub)`` the request's steps for a sub-agent's run
    around it (the server tools it is granted, ``activate_skill``);
    ``offered`` what the main model is offered besides the sub-agents;
    ``running`` and ``slots`` the session's sub-agents running now (for
    ``get_state``) and the slots of its cap on how many run at once;
    ``hooks`` the user's tool hooks (``tool_hooks.py``), asked around each
    delegation to a local agent (:meth:`_hooked`)."""

    def __init__(self, run: AgentRun, agents: Sequence[AgentDefinition], *, model: Model, config: ServerConfig,
                 emit: Callable[[ServerEvent], Awaitable[None]], sub_path: Callable[[AgentRun], CallTool],
                 tool_caller: Callable[[int], CallTool], offered: Sequence[ToolSpec],
                 running: dict[int, SubAgent], slots: trio.CapacityLimiter, hooks: Hooks | None = None):
        self.run = run
        self.hooks = hooks
        self.model = model
        self.config = config
        self.emit = emit
        self.sub_path = sub_path
        self.tool_caller = tool_caller
        self.offered = list(offered)
        self.agents = {a.name: a for a in agents}
        self.names = frozenset(self.agents)
        self._numbers = iter(range(1, 1 << 62))
        self._planned: dict[int, int] = {}
        self.running = running
        self.slots = slots

    def plan(self, calls: list[Any]) -> list[Any]:
        """Number the sub-agent calls of one model turn in the order the
        model made them (they then start in any order)."""
        for call in calls:
            if call.name in self.agents and isinstance(call.args, dict):
                self._planned[id(call.args)] = next(self._numbers)
        return calls

    def step(self, call_on: CallTool) -> CallTool:
        """The step that runs a call of a sub-agent and hands every other
        call on."""
        async def call(name: str, args: dict[str, Any]) -> tuple[Any, ToolFailure | None]:
            definition = self.agents.get(name)
            if definition is None:
                return await call_on(name, args)
            n = self._planned.pop(id(args), None) or next(self._numbers)
            args = args if isinstance(args, dict) else {}
            # A remote agent's call is hooked by the client's executor that
            # makes it; a call the policy denies runs no hook (as gemini-cli).
            if self.hooks is None or definition.kind == "remote" or definition.denied is not None:
                return await self.delegate(definition, args, n)
            return await self._hooked(definition, args, n, self.hooks)

        return call

    async def _hooked(self, definition: AgentDefinition, args: dict[str, Any], n: int,
                      hooks: Hooks) -> tuple[Any, ToolFailure | None]:
        """:meth:`delegate`, with the user's BeforeTool and AfterTool hooks
        around it, shown the call as gemini-cli 0.61 makes it:
        ``invoke_agent`` with ``{"agent_name", "prompt"}``
        (:mod:`gemini_split.agent_invocation`). A rewrite of the prompt
        becomes the agent's input; a deny refuses the call (``hook_denied``)."""
        shown = invocation(definition.name, args)
        rewritten, refused = await before_tool(hooks, AGENT_TOOL, shown, label=f"sub-agent {definition.name}")
        if rewritten.get("prompt") != shown["prompt"]:
            inputs = list(((definition.input_schema or QUERY_SCHEMA).get("properties") or {}))
            args = with_prompt(args, rewritten.get("prompt"), inputs)
            shown = invocation(definition.name, args)
        result, failure = await self.delegate(definition, args, n, refused=refused)
        if failure is None:
            result = await after_tool(hooks, AGENT_TOOL, shown, result)
        return result, failure

    async def delegate(self, definition: AgentDefinition, args: dict[str, Any], n: int, *,
                       refused: ToolFailure | None = None) -> tuple[Any, ToolFailure | None]:
        """Run ``definition`` for call ``n`` of a sub-agent in this request
        (:meth:`plan`); its report (or why there is none) is the call's
        answer. ``refused``: the user's hooks refused the call (it is
        shown, and answered with that)."""
        parent_call_id = f"{self.run.request_id}.agent.{n}"
        rid = self.run.request_id
        await self.emit(ToolStarted(request_id=rid, call_id=parent_call_id, tool=definition.name, parameters=args))
        failure = refused or self._check_input(definition, args)
        if definition.denied is not None:
            failure = ToolFailure(code="refused", message=f"sub-agent {definition.name} is not allowed by the "
                                                          f"approval policy: {definition.denied}",
                                  hint="do not retry; do the task yourself or ask the user")
        if failure is None and definition.kind != "remote":
            try:
                model_name = (check_model_name(definition.model, self.config.allowed_models,
                                               default=self.config.model)
                              if definition.model else self.run.model_name)
            except ModelNameRefused as exc:
                failure = ToolFailure(code="refused", message=f"sub-agent {definition.name}: {exc}")
        if failure is not None:
            await self.emit(ToolError(request_id=rid, call_id=parent_call_id, tool=definition.name, error=failure))
            return None, failure
        if definition.kind == "remote":
            agent = SubAgent(agent_id=n, definition=definition, parent_call_id=parent_call_id, model_name="",
                             tools=[], refused=(), task=str(args.get("query", "")))
        else:
            tools, refused = grant(definition, self.offered, self.names)
            if definition.mcp_tools:
                # (1.5) Its own MCP servers' tools: its alone, whatever its
                # ``tools`` say (gemini-cli's isolated tool registry), and
                # one of the session's of the same name gives way to them.
                own = {t.name for t in definition.mcp_tools}
                tools = [t for t in tools if t.name not in own] + [
                    t for t in definition.mcp_tools if t.name not in self.names and t.name != COMPLETE_TASK]
                refused = tuple(p for p in refused if p not in own)
            agent = SubAgent(agent_id=n, definition=definition, parent_call_id=parent_call_id,
                             model_name=model_name, tools=tools, refused=refused, task=task_of(definition, args))
        try:
            async with self.slots:  # more than the cap: this one waits its turn
                if definition.kind == "remote":
                    ending = await self._run_remote(agent)
                else:
                    ending = await self._run(agent, args)
        except trio.Cancelled:
            with trio.CancelScope(shield=True):
                await self.emit(ToolError(request_id=rid, call_id=parent_call_id, tool=definition.name,
                                          error=ToolFailure(code="cancelled", message="the request was cancelled")))
            raise
        text = (f"Subagent '{definition.name}' finished.\nTermination Reason: {_TERMINATION[ending.outcome]}\n"
                f"Result:\n{ending.report}")
        if ending.outcome == "completed":
            await self.emit(ToolCompleted(request_id=rid, call_id=parent_call_id, tool=definition.name,
                                          result=ending.report))
            return text, None
        failure = ToolFailure(code=ending.outcome, message=f"Subagent '{definition.name}' did not complete: "
                                                           f"{ending.error}" + (f"\n{text}" if ending.report else ""))
        with trio.CancelScope(shield=True):
            await self.emit(ToolError(request_id=rid, call_id=parent_call_id, tool=definition.name, error=failure))
        return None, failure

    def _check_input(self, definition: AgentDefinition, args: dict[str, Any]) -> ToolFailure | None:
        schema = definition.input_schema or QUERY_SCHEMA
        missing = [k for k in schema.get("required", ()) if k not in args]
        if missing:
            return ToolFailure(code="invalid_parameters",
                               message=f"sub-agent {definition.name} needs {', '.join(missing)}")
        return None

    async def _run(self, agent: SubAgent, args: dict[str, Any]) -> _Ending:
        """The sub-agent from ``agent_started`` to its one ``agent_finished``."""
        definition, rid = agent.definition, self.run.request_id
        await self.emit(AgentStarted(request_id=rid, agent_id=agent.agent_id, name=definition.name,
                                     parent_call_id=agent.parent_call_id, model=agent.model_name, task=agent.task,
                                     tools=tuple(t.name for t in agent.tools), refused_tools=agent.refused))
        self.running[agent.agent_id] = agent
        sub = AgentRun(request_id=rid, model_name=agent.model_name, history=[],
                       tools=[*agent.tools, complete_task_spec(definition)], context=self.run.context,
                       pace=self.run.pace, api=self.run.api, agent_id=agent.agent_id,
                       temperature=definition.temperature, session_id=self.run.session_id,
                       system_instruction=self._instruction(definition, args, agent.tools), budget=self.run.budget)
        ending = _Ending("error", error="it failed (the server's log says why)")
        timeout = min((definition.timeout_mins or DEFAULT_TIMEOUT_MINS) * 60, self.config.subagent_timeout_max)
        try:
            with trio.move_on_after(timeout) as deadline:
                ending = await self._loop(agent, sub)
            if deadline.cancelled_caught:
                ending = _Ending("timeout", report=_last_text(sub.history),
                                 error=f"it ran out of time ({_minutes(timeout)})")
            if ending.outcome in _GRACE_REASONS:
                ending = await self._grace(agent, sub, ending)
        except ModelError as exc:
            ending = _Ending("error", error=str(exc))
        except trio.Cancelled:
            ending = _Ending("cancelled", error="the request was cancelled")
            raise
        finally:
            del self.running[agent.agent_id]
            agent.usage = sub.usage
            self.run.usage = self.run.usage + sub.usage
            with trio.CancelScope(shield=True):
                await self.emit(AgentFinished(
                    request_id=rid, agent_id=agent.agent_id, name=definition.name,
                    parent_call_id=agent.parent_call_id, outcome=ending.outcome, turns=agent.turns,
                    tool_calls=agent.tool_calls, usage=sub.usage,
                    summary=summary_line(ending.report) if ending.outcome == "completed" else ending.error))
        return ending

    async def _run_remote(self, agent: SubAgent) -> _Ending:
        """(1.5) A remote (Agent2Agent) agent, from ``agent_started`` to its
        one ``agent_finished``: no model loop here — the client that runs
        the session's tools makes the call (its credentials stay there),
        asked by the agent's name with ``{"query": task}`` as sub-agent
        ``agent_id``; its answer is the sub-agent's text and report."""
        definition, rid = agent.definition, self.run.request_id
        await self.emit(AgentStarted(request_id=rid, agent_id=agent.agent_id, name=definition.name,
                                     parent_call_id=agent.parent_call_id, task=agent.task,
                                     tools=(definition.name,)))
        self.running[agent.agent_id] = agent
        ending = _Ending("error", error="it failed (the server's log says why)")
        agent.turns, agent.tool_calls = 1, 1
        agent.current.append(definition.name)
        try:
            result, failure = await self.tool_caller(agent.agent_id)(definition.name, {"query": agent.task})
            if failure is None:
                report = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
                if not agent.streamed:  # nothing said while it ran (no tool_progress): its report is its text
                    await self.emit(TextDelta(request_id=rid, content=report, agent_id=agent.agent_id))
                ending = _Ending("completed", report=report)
            else:
                outcome = failure.code if failure.code in ("timeout", "cancelled") else "error"
                ending = _Ending(outcome, error=f"the remote agent at {definition.url}: {failure.message}")
        except trio.Cancelled:
            ending = _Ending("cancelled", error="the request was cancelled")
            raise
        finally:
            del self.running[agent.agent_id]
            with trio.CancelScope(shield=True):
                await self.emit(AgentFinished(
                    request_id=rid, agent_id=agent.agent_id, name=definition.name,
                    parent_call_id=agent.parent_call_id, outcome=ending.outcome, turns=agent.turns,
                    tool_calls=agent.tool_calls,
                    summary=summary_line(ending.report) if ending.outcome == "completed" else ending.error))
        return ending

    async def _loop(self, agent: SubAgent, sub: AgentRun) -> _Ending:
        """The sub-agent's chain, until it reports (``complete_task``, or an
        answer without a tool call) or reaches its ``max_turns``."""
        definition = agent.definition
        # The definition (the client's) may lower the operator's limit, never raise it.
        max_turns = min(definition.max_turns or DEFAULT_MAX_TURNS, self.config.max_turns)
        call_tool = self._guarded(agent, self.sub_path(sub))
        sub.history.append({"role": "user", "parts": [{"text": agent.task}]})
        reported: list[_Ending] = []

        async def counted(run: AgentRun) -> None:
            agent.turns = run.turns

        def completed(calls: list[Any]) -> list[Any] | None:
            done = next((c for c in calls if c.name == COMPLETE_TASK), None)
            if done is None:
                return calls
            value = done.args.get(definition.output_name) if isinstance(done.args, dict) else None
            if value is not None and value != "":
                report = value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)
                reported.append(_Ending("completed", report=report))
                return None
            return [done]  # gemini-cli's answer: the model is told, and goes on

        try:
            await run_chain(sub, call_tool, model=self.model, config=self.config, emit=self.emit,
                            max_turns=max_turns, before_turn=[counted], after_turn=[completed])
        except TurnLimitExceeded as exc:
            why = f"it reached its limit of {max_turns} turns without completing" if sub.turns >= max_turns \
                else f"it was stopped: {exc}"
            return _Ending("max_turns", report=_last_text(sub.history), error=why)
        return reported[0] if reported else _Ending("completed", report=_last_text(sub.history))

    async def _grace(self, agent: SubAgent, sub: AgentRun, ending: _Ending) -> _Ending:
        """gemini-cli's final recovery turn for a sub-agent that hit a limit:
        one model call, told in gemini-cli's words to call ``complete_task``
        now, bounded by ``subagent_grace_seconds``. No tool it calls runs.
        Its ``complete_task`` argument (else its text, else what it said
        before) is the report; the outcome stays ``ending``'s."""

        note = {"text": _GRACE_WARNING[ending.outcome]}
        last = sub.history[-1] if sub.history else None
        if last is not None and last.get("role") == "user":
            last["parts"] = [*last["parts"], note]  # one user turn, with the function responses
        else:
            sub.history.append({"role": "user", "parts": [note]})
        before = len(sub.history)
        calls: list[Any] = []
        with trio.move_on_after(self.config.subagent_grace_seconds):
            try:
                spend_turn(sub)  # the request's turns bound this one too
                calls = await model_turn(sub, model=self.model, config=self.config, emit=self.emit)
            except ModelError as exc:
                log.info("sub-agent %s: its recovery turn failed: %s", agent.definition.name, exc)
            except TurnLimitExceeded:
                log.info("sub-agent %s: no recovery turn: the request's turns are spent", agent.definition.name)
        done = next((c for c in calls if c.name == COMPLETE_TASK), None)
        value = done.args.get(agent.definition.output_name) if done is not None and isinstance(done.args, dict) \
            else None
        if value is not None and value != "":
            report = value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)
        else:
            report = _last_text(sub.history[before:]) or ending.report
        return _Ending(ending.outcome, report=report, error=ending.error)

    def _guarded(self, agent: SubAgent, base: CallTool) -> CallTool:
        """The sub-agent's own tool path: only what it was granted (a call
        of another sub-agent is refused, saying why), each call counted and
        shown in ``state``, run through the session's path as this agent."""
        granted = {t.name for t in agent.tools}
        name_of = agent.definition.name
        output_name = agent.definition.output_name

        async def call(name: str, args: dict[str, Any]) -> tuple[Any, ToolFailure | None]:
            if name == COMPLETE_TASK:
                return None, ToolFailure(code="invalid_parameters",
                                         message=f"Missing required argument '{output_name}' for completion.")
            if name in self.names:
                return None, ToolFailure(
                    code="refused", message=f"sub-agent {name_of} cannot call sub-agent {name}: sub-agents do not "
                                            "delegate to other sub-agents",
                    hint=f"do the work with your own tools, or report back with {COMPLETE_TASK}")
            if name not in granted:
                return None, ToolFailure(code="refused", message=f"tool {name} is not granted to sub-agent {name_of}",
                                         hint="use only the tools you were given")
            agent.tool_calls += 1
            agent.current.append(name)
            try:
                return await base(name, args)
            finally:
                agent.current.remove(name)

        return call

    def _instruction(self, definition: AgentDefinition, args: dict[str, Any], tools: list[ToolSpec]) -> str:
        """The sub-agent's system instruction: its definition's prompt (the
        session's own instruction for one that has none, as gemini-cli's
        generalist), gemini-cli's rules, and where it works."""
        body = render(definition.system_prompt, args) if definition.system_prompt.strip() \
            else instruction_for(self.config, context=self.run.context, tools=tools) or ""
        dirs = tuple(getattr(self.run.context, "workspace_dirs", ()) or ())
        where = ("\n\n# Environment Context\nThe workspace directories are:\n" + "\n".join(f"- {d}" for d in dirs)
                 if dirs else "")
        return body + where + "\n" + _RULES + (_STRUCTURED if definition.output_schema is not None else _PLAIN)


def _last_text(history: list[dict[str, Any]]) -> str:
    """The text of the model's last answer in a sub-agent's history."""
    for content in reversed(history):
        if content.get("role") == "model":
            text = "".join(p.get("text", "") for p in content.get("parts", ())
                           if isinstance(p.get("text"), str) and not p.get("thought"))
            if text.strip():
                return text.strip()
    return ""


def remote_wait(definition: AgentDefinition, config: ServerConfig) -> float:
    """(1.5) Seconds the server waits for the client's answer to a remote
    agent's call: the agent's ``timeout_mins`` (as the client's
    ``agents.overrides`` left it; default 10, at most
    ``subagent_timeout_max``) plus the session's ``tool_timeout`` (the
    time any call has to be approved and answered), and at least
    :data:`REMOTE_ANSWER_MARGIN` more — so a definition longer than
    ``tool_timeout`` ends with the client's own timeout, not the server's."""
    limit = min((definition.timeout_mins or DEFAULT_TIMEOUT_MINS) * 60, config.subagent_timeout_max)
    return limit + max(config.tool_timeout, REMOTE_ANSWER_MARGIN)


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:g} minutes" if seconds >= 60 else f"{seconds:g} seconds"


def remote_progress(message: ToolProgress, request: ToolExecutionRequest | None,
                    running: dict[int, SubAgent]) -> TextDelta | None:
    """(1.5) A remote sub-agent's text so far, from the client making its
    call (``request``, still waiting): that sub-agent's ``text_delta`` (at
    most :data:`STREAMED_LIMIT` characters a run). Progress on any other
    call, or one no longer waiting, is dropped (None)."""
    if request is None or not request.agent_id:
        return None
    agent = running.get(request.agent_id)
    if agent is None or agent.definition.kind != "remote" or agent.streamed >= STREAMED_LIMIT:
        return None
    content = message.content[:STREAMED_LIMIT - agent.streamed]
    agent.streamed += len(content)
    return TextDelta(request_id=request.request_id, content=content, agent_id=request.agent_id)


async def unfinished_agents(store: SessionStore, session_id: str, request_id: str) -> list[AgentStarted]:
    """The sub-agents of ``request_id`` the store saw start and not finish
    (its event log's marks say where: only those are read)."""
    try:
        marks = await store.event_marks(session_id)
    except StoreError as exc:
        log.error("session %s: %s", session_id, exc)
        return []
    started: dict[int, AgentStarted] = {}
    for mark in marks or ():
        if mark.request_id != request_id or mark.type not in (AgentStarted.TYPE, AgentFinished.TYPE):
            continue
        try:
            page = await store.events_after(session_id, mark.seq - 1, limit=1)
            event = decode(page[0].data) if page else None
        except (StoreError, ProtocolError) as exc:
            log.error("session %s: event %d unreadable: %s", session_id, mark.seq, exc)
            continue
        if isinstance(event, AgentStarted):
            started[event.agent_id] = event
        elif isinstance(event, AgentFinished):
            started.pop(event.agent_id, None)
    return list(started.values())


async def end_interrupted(session: Any, request_id: str) -> None:
    """A request of ``session`` was running when the server stopped: end
    it, for whoever resumes, with ``interrupted`` (it is not run again)."""
    # Logged at once, not through the outbox: it is part of what the
    # resuming client replays (its connection state expects it there).
    # Its sub-agents that had not finished end first, each once: they
    # are not run again either.
    session.events.log_events([
        AgentFinished(request_id=request_id, agent_id=started.agent_id, name=started.name,
                      parent_call_id=started.parent_call_id, outcome="interrupted",
                      summary="the server stopped while this sub-agent was running; it was not run again")
        for started in await unfinished_agents(session.store, session.id, request_id)
    ] + [Error(
        request_id=request_id, code=ErrorCode.INTERRUPTED.value,
        message="interrupted: the server stopped while this request was running; it was not run "
                "again (the conversation goes on from the last completed answer)",
    )])
    try:
        await session.store.set_running(session.id, None, updated=time.time())
    except StoreError as exc:
        log.error("session %s: %s", session.id, exc)
