"""What a request plugs into its agent chain, assembled in one place.

:func:`assemble` reads top to bottom as the path of a tool call: the
request's steps around the session's own tool path (the client's, or the
server's tool host), each present only when the session uses its feature —
the server tools the client asked for, ``activate_skill`` when the client
sent skills, sub-agent delegation when it sent sub-agents — and the
observers around each model turn (automatic compression, the numbering of
sub-agent calls). A request with none of them has no step for them.

:class:`ChainBody` is the request body that runs the chain: a prompt, or
(``/restore``) a call proposed again (:mod:`.rewind_op`); :func:`start_prompt`
starts a prompt's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import reduce
from typing import Any

from gemini_split.protocol import Attachment, Error, ErrorCode, GenerateContentRequest, RequestStarted

from ...model.names import ModelNameRefused, check_model_name
from ...store import make_title
from ..chain import AfterTurn, AgentRun, BeforeTurn, CallTool, Step, TurnBudget, run_chain
from ..priority import Pace
from ..request.run import Outcome
from ..views import View
from . import agents as subagents
from .agents import Delegation, remote_wait
from .compression import AutoCompression
from .modes import effective_context, follow_mode, host_switched
from .prompts import instruction_for
from .search import asked, server_tools_step
from .server_tools import call_server_tool
from .skills import NAME as SKILL_TOOL
from .skills import skills_step
from .skills import spec as skill_spec
from .tool_hooks import Hooks


@dataclass
class Chain:
    """A request's chain, assembled: its tool path and its observers."""

    call_tool: CallTool
    before_turn: list[BeforeTurn] = field(default_factory=list)
    after_turn: list[AfterTurn] = field(default_factory=list)


def assemble(session: Any, run: AgentRun) -> Chain:
    """The main agent's chain for ``run`` (a request of ``session``): its
    tool path, and what the model is offered and told (``run.extra_tools``,
    ``run.system_instruction``)."""
    context = run.context
    skills = tuple(getattr(context, "skills", None) or ())
    agents = tuple(getattr(context, "agents", None) or ())
    # The user's tool hooks, around the tools the steps answer here (and
    # each delegation to a sub-agent).
    hooks = session.tool_hooks.bind(run.request_id) if session.server_tools or skills or agents else None

    def tool_path(agent_id: int) -> CallTool:
        return _session_path(session, run.request_id, agent_id)

    run.context = context = effective_context(session, context)
    run.system_instruction = instruction_for(session.config, context=context, tools=run.tools,
                                             server_tools=session.server_tools)
    steps: list[Step] = []
    if session.server_tools:
        steps.append(server_tools_step(run, session.server_tools, model=session.model, emit=session.emit,
                                       hooks=hooks))
        run.extra_tools += asked(session.server_tools)
    if skills:
        steps.append(skills_step(run, skills, emit=session.emit, hooks=hooks))
        run.extra_tools.append(skill_spec(skills))
    chain = Chain(call_tool=tool_path(0), before_turn=[follow_mode(session, run), AutoCompression(
        model=session.model, emit=session.emit, on_compressed=session.timeline.compressed)])
    if agents:
        delegation = Delegation(
            run, agents, model=session.model, config=session.config, emit=session.emit,
            sub_path=lambda sub: _sub_agent_path(session, sub, hooks, skills), tool_caller=tool_path,
            offered=run.tools + run.extra_tools, running=session.running_agents, slots=session.agent_slots,
            hooks=hooks)
        steps.append(delegation.step)
        chain.after_turn.append(delegation.plan)
        run.extra_tools += subagents.specs(agents)
    chain.call_tool = _through(steps, chain.call_tool)
    return chain


def _sub_agent_path(session: Any, sub: AgentRun, hooks: Hooks | None, skills: Sequence[Any]) -> CallTool:
    """A sub-agent's tool path: the server tools it was granted and
    ``activate_skill`` (when granted) answered here, the rest through the
    session's path as this agent."""
    granted = {t.name for t in sub.tools}
    steps: list[Step] = []
    server_tools = tuple(n for n in session.server_tools if n in granted)
    if server_tools:
        steps.append(server_tools_step(sub, server_tools, model=session.model, emit=session.emit, hooks=hooks))
    if skills and SKILL_TOOL in granted:
        steps.append(skills_step(sub, skills, emit=session.emit, hooks=hooks))
    return _through(steps, _session_path(session, sub.request_id, sub.agent_id))


def _through(steps: Sequence[Step], call_tool: CallTool) -> CallTool:
    """``call_tool`` with ``steps`` around it, the first innermost."""
    return reduce(lambda path, step: step(path), steps, call_tool)


def _session_path(session: Any, request_id: str, agent_id: int) -> CallTool:
    """The session's own path for a call of ``request_id`` by the agent
    ``agent_id`` (0 the main agent): on the server (``hello.tools =
    "server"``) or through the client; each of the main agent's calls'
    place in the conversation noted for ``/restore``."""
    running = session.running_agents.get(agent_id) if agent_id else None
    on_call = None if agent_id else (lambda call_id, name, args: session.timeline.note_call(
        call_id, request_id, name, args, session.history))
    if session.tool_host is not None:
        return call_server_tool(session.tool_host, request_id=request_id, emit=session.emit,
                                ask=session.approvals.ask, agent_id=agent_id, on_call=on_call,
                                hooks=session.tool_hooks.bind(request_id),
                                agent=running.definition.name if running is not None else "",
                                on_switch=lambda tool: host_switched(session, by=tool))
    wait = session.config.tool_timeout
    if running is not None and running.definition.kind == "remote":
        # (1.5) Its call runs as long as the agent may, on the client.
        wait = remote_wait(running.definition, session.config)

    async def call(name: str, args: dict[str, Any]) -> Any:
        return await session.client_calls.call(request_id, name, args, wait=wait, agent_id=agent_id,
                                               on_call=on_call)

    return call


#: How a chain body begins, before its chain runs: ``await begin(run,
#: call_tool)`` (a prompt's user turn appended, a call proposed again).
Begin = Callable[[AgentRun, CallTool], Awaitable[None]]


class ChainBody:
    """A request that runs the agent chain (``request/run.py``'s body): a
    prompt (:func:`prompt_body`) or a call proposed again (``rewind``).
    ``session``: its conversation, tools, context and limits."""

    paced = True

    def __init__(self, session: Any, request_id: str, begin: Begin, *, counts_turn: bool):
        self.session = session
        self.begin = begin
        self.counts_turn = counts_turn
        self.run_state = AgentRun(request_id=request_id, model_name=session.model_name, history=session.history,
                                  tools=list(session.tools), context=session.context,
                                  last_prompt_tokens=session.last_prompt_tokens, session_id=session.id,
                                  budget=TurnBudget(session.config.max_turns))

    async def run(self, pace: Pace | None) -> None:
        session, run = self.session, self.run_state
        run.pace = pace
        chain = assemble(session, run)
        await self.begin(run, chain.call_tool)
        await run_chain(run, chain.call_tool, model=session.model, config=session.config, emit=session.emit,
                        max_turns=session.config.max_turns, before_turn=chain.before_turn,
                        after_turn=chain.after_turn)

    def ended(self) -> None:
        self.session.last_prompt_tokens = self.run_state.last_prompt_tokens

    def outcome(self) -> Outcome:
        run = self.run_state
        if self.counts_turn:
            self.session.turns += 1
        return Outcome(usage=run.usage, turns=run.turns, api=run.api.as_message())


def prompt_body(session: Any, request_id: str, prompt: str, attachments: Sequence[Attachment]) -> ChainBody:
    """A prompt's body: its user turn — gemini-cli's session context first
    on the first turn, the prompt's text, the ``@name`` note asking to
    delegate to a named sub-agent, the attachments — then the chain."""

    async def begin(run: AgentRun, call_tool: CallTool) -> None:
        parts: list[dict[str, Any]] = [
            {"text": prompt},
            *({"inline_data": {"mime_type": a.mime_type, "data": a.data}} for a in attachments),
        ]
        agents = tuple(getattr(run.context, "agents", None) or ())
        note = subagents.force_note(prompt, agents) if agents else None
        if note is not None:  # "@name …": gemini-cli's nudge to delegate, after the prompt
            parts.insert(1, {"text": note})
        environment = getattr(run.context, "environment", None)
        if not run.history and environment:
            parts.insert(0, {"text": environment})
        run.history.append({"role": "user", "parts": parts})

    return ChainBody(session, request_id, begin, counts_turn=True)


def start_prompt(session: Any, request: GenerateContentRequest, view: View) -> None:
    """A prompt from ``view``: refused (a reply to the asker: busy, empty),
    or started — after its ``request_started``, the model it names checked
    (refused: the request ends there), then the session takes the
    request's tools and context and the prompt's place in the timeline."""
    # (1.6) A custom command shows as typed, not as its expansion.
    shown = request.shown
    if session.refuse_if_busy(request.id, shown, view):
        return
    if not request.prompt.strip():
        # Refused before it starts: a reply to the asker, not a session
        # event every attached client would see (and the log would keep).
        view.send_direct(Error(request_id=request.id, in_reply_to=request.id, code=ErrorCode.INVALID_REQUEST.value,
                               message="the prompt is empty"))
        return
    session.emit_nowait(RequestStarted(request_id=request.id, prompt=shown, client=view.label))
    if request.model:
        try:
            session.model_name = check_model_name(request.model, session.config.allowed_models,
                                                  default=session.config.model)
        except ModelNameRefused as exc:
            session.emit_nowait(Error(request_id=request.id, in_reply_to=request.id, code=exc.code.value,
                                      message=str(exc)))
            return
    session.take_tools(view)
    if request.context is not None:
        session.context = request.context
    session.timeline.begin(request.id, session.history)
    if not session.title:
        session.title = make_title(shown)
    session.start(request.id, prompt_body(session, request.id, request.prompt, request.attachments), view)
