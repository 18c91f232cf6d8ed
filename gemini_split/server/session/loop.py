"""The agent loop: prompt → model → tool calls → model … → finished.

One :func:`run_agent` call serves one ``generate_content_request``. It
appends to the session's conversation as it goes, so a cancelled or failed
request leaves a history the model API will still accept (every function
call answered).
"""

from __future__ import annotations

import functools
import itertools
import logging
import random
import secrets
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import trio
from msgspec.structs import replace as replace_struct

from gemini_split import telemetry
from gemini_split.errors import GeminiSplitError
from gemini_split.protocol import (
    ApiStats,
    Attachment,
    Compressed,
    Retrying,
    ServerEvent,
    TextDelta,
    ThinkingDelta,
    ToolCompleted,
    ToolDelta,
    ToolError,
    ToolFailure,
    ToolSpec,
    ToolStarted,
    Usage,
)

from ..model import web_search
from ..config import ServerConfig
from . import agents as subagents
from . import compression
from . import skills as skill_tool
from . import tool_hooks
from .priority import Pace
from .prompts import ContextBlock, PromptFacts, custom_instruction, system_instruction
from ..model.base import (
    FunctionCallChunk,
    Model,
    ModelError,
    ModelRequest,
    PartChunk,
    TextChunk,
    ThoughtChunk,
    UsageChunk,
)

log = logging.getLogger(__name__)


class TurnLimitExceeded(GeminiSplitError):
    """The model kept calling tools past ``max_turns`` model calls."""


Emit = Callable[[ServerEvent], Awaitable[None]]
#: ``await call_tool(name, args)`` → ``(result, failure)``: exactly one is set.
CallTool = Callable[[str, dict[str, Any]], Awaitable[tuple[Any, ToolFailure | None]]]


#: Google's status names for the HTTP statuses the Gemini API answers with.
_STATUS_NAMES = {
    400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED",
}


def api_error_type(exc: ModelError) -> str:
    """How a failed model call is counted in ``errorsByType``: the API's
    status name, or ``NETWORK_ERROR`` when no HTTP answer came."""
    if exc.status is None:
        return "NETWORK_ERROR"
    return _STATUS_NAMES.get(exc.status, f"HTTP_{exc.status}")


@dataclass
class ApiTally:
    """The model API calls of one request (gemini-cli's ``api`` stats)."""

    requests: int = 0
    errors: int = 0
    latency_ms: int = 0
    errors_by_type: dict[str, int] = field(default_factory=dict)

    def as_message(self) -> ApiStats:
        return ApiStats(requests=self.requests, errors=self.errors, latency_ms=self.latency_ms,
                        errors_by_type=dict(self.errors_by_type))

    def record(self, seconds: float, *, error_type: str | None = None) -> None:
        self.requests += 1
        self.latency_ms += int(seconds * 1000)
        if error_type is not None:
            self.errors += 1
            self.errors_by_type[error_type] = self.errors_by_type.get(error_type, 0) + 1


@dataclass
class AgentRun:
    """The state of one request while the loop runs it."""

    request_id: str
    model_name: str
    history: list[dict[str, Any]]
    tools: list[ToolSpec]
    usage: Usage = field(default_factory=Usage)
    turns: int = 0
    api: ApiTally = field(default_factory=lambda: ApiTally())
    #: The client's ``SessionContext`` (context files, approval mode,
    #: workspace, first-turn environment), or None when it sent none.
    context: Any = None
    #: Tools the server runs itself that the client asked for
    #: (``tool_discovery.server_tools``): names in :data:`SERVER_TOOLS`.
    server_tools: tuple[str, ...] = ()
    #: Its place among the server's requests (``server/session/priority.py``):
    #: after each delta it lets requests that have not answered go first.
    pace: Pace | None = None
    #: The last model call's prompt size (tokens) as the API counted it:
    #: when it passes the threshold the history is compressed first.
    last_prompt_tokens: int = 0
    #: An automatic compression failed in this request: not tried again.
    compression_failed: bool = False
    #: Told ``(old, new)`` when an automatic compression replaced the
    #: history (the session's rewind timeline keeps what it dropped).
    on_compressed: Callable[[list[dict[str, Any]], list[dict[str, Any]]], None] | None = None
    #: (1.4) Which agent this loop runs: 0 the main agent, 1, 2 … a
    #: sub-agent (``server/session/agents.py``), whose events carry it. A
    #: sub-agent's ``tools`` are exactly what it is offered (nothing is
    #: added), its ``system_instruction`` and ``temperature`` its own.
    agent_id: int = 0
    system_instruction: str | None = None
    temperature: float | None = None
    #: The session's sub-agents running now (``state.agents``) and its cap
    #: on how many run at once; None: the request's own.
    running_agents: dict[int, Any] | None = None
    agent_slots: trio.CapacityLimiter | None = None
    #: (1.4) The user's tool hooks, run by a client, around the tools the
    #: loop answers itself (``google_web_search``, ``activate_skill``):
    #: ``await hooks(event, input)`` → their output (see :mod:`.tool_hooks`);
    #: None: none.
    hooks: Any = None
    #: The session's id, for telemetry (``session.id``).
    session_id: str | None = None


#: The tools a server runs itself for any session, by name (announced in
#: ``connected.capabilities``; a client opts in per tool).
SERVER_TOOLS: dict[str, ToolSpec] = {web_search.NAME: web_search.SPEC}


async def run_agent(
    run: AgentRun,
    prompt: str,
    *,
    model: Model,
    config: ServerConfig,
    emit: Emit,
    call_tool: CallTool,
    attachments: Sequence[Attachment] = (),
    repropose: int | None = None,
    tool_caller: Callable[[int], CallTool] | None = None,
) -> None:
    """Run the loop until the model answers without calling a tool.
    ``attachments`` follow the prompt's text as inline data parts.
    ``tool_caller(agent_id)``: the session's tool path for a sub-agent's
    calls (None: ``call_tool`` for every agent).

    ``repropose`` (1.4, ``/restore``): instead of a prompt, the history ends
    with the model turn that proposed some calls; the call at that index of
    its parts is proposed again (through ``call_tool``, as any call), the
    others are answered as not run again, and the loop goes on from there.

    Raises :class:`TurnLimitExceeded`, or :class:`ModelError` once retries
    are spent. On any exit the history stays valid for the next request."""
    agents = _agents(run)
    if repropose is None:
        environment = getattr(run.context, "environment", None)
        parts: list[dict[str, Any]] = [
            {"text": prompt},
            *({"inline_data": {"mime_type": a.mime_type, "data": a.data}} for a in attachments),
        ]
        note = subagents.force_note(prompt, agents) if agents else None
        if note is not None:  # "@name …": gemini-cli's nudge to delegate, after the prompt
            parts.insert(1, {"text": note})
        if not run.history and environment:
            # gemini-cli's first turn: the session context, then the prompt.
            parts.insert(0, {"text": environment})
        run.history.append({"role": "user", "parts": parts})
    call_tool = tools_for(run, call_tool, model=model, emit=emit)
    delegation = None
    if agents:
        delegation = subagents.Delegation(
            run, model=model, config=config, emit=emit, offered=_offered(run),
            tool_caller=tool_caller if tool_caller is not None else (lambda agent_id: call_tool))
        call_tool = delegation.wrap(call_tool)
    if repropose is not None:
        await _repropose(run, repropose, call_tool)
    while True:
        if run.turns >= config.max_turns:
            raise TurnLimitExceeded(
                f"stopped after {config.max_turns} model turns without a final answer "
                "(raise the limit with --max-turns if the task really needs more)"
            )
        run.turns += 1
        await _compress_if_due(run, model=model, emit=emit)  # the main agent's: a sub-agent has its own history
        calls = await _model_turn(run, model=model, config=config, emit=emit)
        if not calls:
            return
        if delegation is not None:
            delegation.plan(calls)
        responses: list[dict[str, Any] | None] = [None] * len(calls)
        try:
            await _run_tools(calls, call_tool, responses)
        finally:
            # Even when cancelled midway, answer every call, so the history
            # the next request sends is one the API accepts.
            run.history.append({"role": "user", "parts": _answered(calls, responses)})


async def _repropose(run: AgentRun, part_index: int, call_tool: CallTool) -> None:
    """Answer the calls of the model turn that ends the history: the one at
    ``part_index`` of its parts run again, the others not."""
    parts = run.history[-1].get("parts") or []
    calls, target = [], None
    for index, part in enumerate(parts):
        call = part.get("function_call") if isinstance(part, dict) else None
        if isinstance(call, dict):
            if index == part_index:
                target = len(calls)
            calls.append(FunctionCallChunk(name=str(call.get("name", "")), args=dict(call.get("args") or {}),
                                           call_id=call.get("id")))
    not_run = {"error": {"code": "not_run", "message": "not run again: the session was restored to "
                         "a checkpoint of another call of this turn"}}
    responses: list[dict[str, Any] | None] = [
        None if i == target else _function_response(c, not_run) for i, c in enumerate(calls)]
    try:
        if target is not None:
            one: list[dict[str, Any] | None] = [None]
            try:
                await _run_tools([calls[target]], call_tool, one)
            finally:
                responses[target] = one[0]
    finally:
        run.history.append({"role": "user", "parts": _answered(calls, responses)})


def tools_for(run: AgentRun, call_tool: CallTool, *, model: Model, emit: Emit) -> CallTool:
    """``call_tool`` with the tools the server answers itself for ``run``
    (its server tools, ``activate_skill``) answered here."""
    if run.server_tools:
        call_tool = _with_server_tools(run, call_tool, model=model, emit=emit)
    if _skills(run) and (run.agent_id == 0 or any(t.name == skill_tool.NAME for t in run.tools)):
        call_tool = _with_skills(run, call_tool, emit=emit)
    return call_tool


def _offered(run: AgentRun) -> list[ToolSpec]:
    """What the model is offered besides the sub-agents: the session's tools,
    the server tools asked for, ``activate_skill`` when there are skills. A
    sub-agent's ``tools`` are already exactly what it is offered."""
    if run.agent_id:
        return run.tools
    return (run.tools + [SERVER_TOOLS[name] for name in run.server_tools if name in SERVER_TOOLS]
            + ([skill_tool.spec(_skills(run))] if _skills(run) else []))


def _agents(run: AgentRun) -> tuple:
    """The sub-agents the client sent (only the main agent delegates)."""
    if run.agent_id:
        return ()
    return tuple(getattr(run.context, "agents", None) or ())


async def _model_turn(run: AgentRun, *, model: Model, config: ServerConfig, emit: Emit) -> list[FunctionCallChunk]:
    """One model call, retried on transient errors; the model's parts are
    appended to the history (on cancellation too, minus unanswerable calls)."""
    agents = _agents(run)
    request = ModelRequest(
        model=run.model_name,
        contents=list(run.history),
        tools=_offered(run) + (subagents.specs(agents) if agents else []),
        system_instruction=run.system_instruction if run.system_instruction is not None
        else _system_instruction(run, config),
        temperature=run.temperature,
    )
    agent_id = run.agent_id
    if run.turns == 1 and log.isEnabledFor(logging.DEBUG):
        # One record per line: the log keeps each record to one bounded line.
        text = request.system_instruction or ""
        log.debug("system instruction (%d characters):", len(text))
        for line in text.splitlines():
            log.debug("  | %s", line)
    pace = run.pace
    recorder = telemetry.current()
    attempt = 1
    while True:
        parts: list[dict[str, Any]] = []
        calls: list[FunctionCallChunk] = []
        usage = Usage()
        recorder.api_request(model=run.model_name, prompt_id=run.request_id, session_id=run.session_id,
                             contents=request.contents)
        began = trio.current_time()
        try:
            async for chunk in model.stream(request):
                if isinstance(chunk, PartChunk):
                    parts.append(chunk.part)
                elif isinstance(chunk, TextChunk):
                    await emit(TextDelta(request_id=run.request_id, content=chunk.text, agent_id=agent_id))
                    if pace is not None:
                        await pace.pace()
                elif isinstance(chunk, ThoughtChunk):
                    await emit(ThinkingDelta(request_id=run.request_id, content=chunk.text, agent_id=agent_id))
                    if pace is not None:
                        await pace.pace()
                elif isinstance(chunk, FunctionCallChunk):
                    calls.append(chunk)
                    if pace is not None:
                        pace.output()
                elif isinstance(chunk, UsageChunk):
                    # Streaming APIs report running totals; the last one counts.
                    usage = chunk.usage
            run.usage = run.usage + usage
            run.last_prompt_tokens = usage.prompt_tokens or run.last_prompt_tokens
            run.api.record(trio.current_time() - began)
            recorder.api_response(model=run.model_name, duration_ms=int((trio.current_time() - began) * 1000),
                                  usage=usage, prompt_id=run.request_id, session_id=run.session_id,
                                  parts=parts)
        except ModelError as exc:
            run.api.record(trio.current_time() - began, error_type=api_error_type(exc))
            recorder.api_error(model=run.model_name, error=str(exc), error_type=api_error_type(exc),
                               status_code=exc.status, duration_ms=int((trio.current_time() - began) * 1000),
                               prompt_id=run.request_id, session_id=run.session_id)
            if parts or not exc.retryable or attempt >= config.max_attempts:
                # Output already reached the user: repeating would duplicate it.
                _keep_partial(run, parts)
                raise
            delay = _backoff(attempt, config, exc.retry_after)
            await emit(Retrying(
                request_id=run.request_id, attempt=attempt + 1,
                max_attempts=config.max_attempts, delay=round(delay, 2), error=str(exc), agent_id=agent_id,
            ))
            log.info("model call failed (%s); retry %d/%d in %.1fs", exc, attempt + 1, config.max_attempts, delay)
            await trio.sleep(delay)
            attempt += 1
            continue
        except BaseException:
            _keep_partial(run, parts)
            raise
        if parts:
            run.history.append({"role": "model", "parts": merge_text_parts(parts)})
        return calls


async def _compress_if_due(run: AgentRun, *, model: Model, emit: Emit) -> None:
    """Compress the history before the next model call when the last
    prompt passed the session's threshold (gemini-cli's automatic chat
    compression), saying so with a ``compressed`` event. A failure leaves
    the history as it was, is logged, and is not tried again this request."""
    threshold = getattr(run.context, "compression_threshold", None)
    if run.compression_failed or not compression.due(run.last_prompt_tokens, run.model_name, threshold):
        return
    try:
        done = await compression.compress(run.history, model=model, model_name=run.model_name,
                                          prompt_tokens=run.last_prompt_tokens)
    except (compression.CompressionFailed, ModelError) as exc:
        log.warning("request %s: the history was not compressed: %s", run.request_id, exc)
        run.compression_failed = True
        return
    if run.on_compressed is not None:
        run.on_compressed(list(run.history), done.history)
    run.history[:] = done.history
    run.usage = run.usage + done.usage
    run.last_prompt_tokens = done.after_tokens
    telemetry.current().chat_compression(tokens_before=done.before_tokens, tokens_after=done.after_tokens,
                                         prompt_id=run.request_id, session_id=run.session_id)
    await emit(Compressed(request_id=run.request_id, before_tokens=done.before_tokens,
                          after_tokens=done.after_tokens, automatic=True))


def _with_server_tools(run: AgentRun, call_tool: CallTool, *, model: Model, emit: Emit) -> CallTool:
    """``call_tool`` that runs the session's server tools here (reported
    as ``tool_started`` / ``tool_completed`` | ``tool_error`` events) and
    hands every other call on."""
    numbers = itertools.count(1)

    async def call(name: str, args: dict[str, Any]) -> tuple[Any, ToolFailure | None]:
        if name not in run.server_tools or name not in SERVER_TOOLS:
            return await call_tool(name, args)
        call_id = f"{run.request_id}.server.{_agent_part(run)}{next(numbers)}"
        aid = run.agent_id
        failure = None
        if run.hooks is not None:
            args, failure = await tool_hooks.before_tool(run.hooks, name, args)
        await emit(ToolStarted(request_id=run.request_id, call_id=call_id, tool=name, parameters=args, agent_id=aid))
        if failure is None:
            text, failure, usage = await web_search.google_web_search(args, model=model, model_name=run.model_name)
            run.usage = run.usage + usage
        if failure is not None:
            await emit(ToolError(request_id=run.request_id, call_id=call_id, tool=name, error=failure, agent_id=aid))
            return None, failure
        if run.hooks is not None:
            text = await tool_hooks.after_tool(run.hooks, name, args, text)
        await emit(ToolCompleted(request_id=run.request_id, call_id=call_id, tool=name, result=text, agent_id=aid))
        return text, None

    return call


def _skills(run: AgentRun) -> tuple:
    """The Agent Skills the client sent in its ``SessionContext`` (none: no ``activate_skill``)."""
    return tuple(getattr(run.context, "skills", None) or ())


def _with_skills(run: AgentRun, call_tool: CallTool, *, emit: Emit) -> CallTool:
    """``call_tool`` that answers ``activate_skill`` here, from the skills
    the client sent (:mod:`.skills`), and hands every other call on."""
    numbers = itertools.count(1)

    async def call(name: str, args: dict[str, Any]) -> tuple[Any, ToolFailure | None]:
        if name != skill_tool.NAME:
            return await call_tool(name, args)
        call_id = f"{run.request_id}.skill.{_agent_part(run)}{next(numbers)}"
        aid = run.agent_id
        failure = None
        if run.hooks is not None:
            args, failure = await tool_hooks.before_tool(run.hooks, name, args)
        await emit(ToolStarted(request_id=run.request_id, call_id=call_id, tool=name, parameters=args, agent_id=aid))
        if failure is None:
            text, failure = skill_tool.activate(_skills(run), args)
        if failure is not None:
            await emit(ToolError(request_id=run.request_id, call_id=call_id, tool=name, error=failure, agent_id=aid))
            return None, failure
        if run.hooks is not None:
            text = await tool_hooks.after_tool(run.hooks, name, args, text)
        await emit(ToolCompleted(request_id=run.request_id, call_id=call_id, tool=name,
                                 result=f"Skill {args.get('name')} activated", agent_id=aid))
        return text, None

    return call


def _agent_part(run: AgentRun) -> str:
    """A sub-agent's own call ids (``….server.a2.1``): unique in the request."""
    return f"a{run.agent_id}." if run.agent_id else ""


def _keep_partial(run: AgentRun, parts: list[dict[str, Any]]) -> None:
    """Keep streamed text of an interrupted call; drop its function calls,
    which will never get responses."""
    kept = [p for p in parts if "function_call" not in p]
    if kept:
        run.history.append({"role": "model", "parts": merge_text_parts(kept)})


def merge_text_parts(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Join adjacent plain text parts (same ``thought`` flag, nothing else on
    them) into one.

    A streamed answer arrives as one part per chunk; kept as is, a long
    answer becomes thousands of parts that every later request re-sends and
    re-validates. Parts carrying anything else (a thought signature, a
    function call) are kept exactly as the model sent them. Linear: each
    run of texts is joined once (a 50 MB answer must not block the server)."""
    merged: list[dict[str, Any]] = []
    run: list[str] = []  # texts of the plain run that ends merged[-1]

    def close_run() -> None:
        if len(run) > 1:
            merged[-1] = {**merged[-1], "text": "".join(run)}

    for part in parts:
        prev = merged[-1] if merged else None
        if run and _plain_text(part) and prev.get("thought") == part.get("thought"):
            run.append(part["text"])
            continue
        close_run()
        merged.append(part)
        run = [part["text"]] if _plain_text(part) else []
    close_run()
    return merged


def _plain_text(part: dict[str, Any]) -> bool:
    return isinstance(part.get("text"), str) and set(part) <= {"text", "thought"}


def _system_instruction(run: AgentRun, config: ServerConfig) -> str | None:
    """The operator's fixed instruction (``ServerConfig.system_instruction``)
    if set, else one built for this session (:mod:`.prompts`): the user's
    own system prompt (``SessionContext.system_prompt``) when the client
    sent one, else the built-in one.

    Built once per content (about 0.4 ms each, every model call of every
    session): sessions with the same tools and context share it."""
    if config.system_instruction is not None:
        return config.system_instruction
    context = run.context
    tools = tuple((t.name, t.description) for t in run.tools)
    if context is None:
        return _built_instruction(tools, None)
    return _built_instruction(tools, (
        context.approval_mode, tuple(context.workspace_dirs), context.interactive,
        tuple((f.path, f.scope, f.content) for f in context.files), tuple(context.file_names),
        tuple((k.name, k.description, k.location) for k in getattr(context, "skills", ()) or ()),
        _custom_prompt(run)))


def _custom_prompt(run: AgentRun) -> tuple[str, tuple[str, ...], tuple[tuple[str, str], ...]] | None:
    """The client's own system prompt, the names of the tools the model
    gets besides the client's (the server's, ``activate_skill``, the
    sub-agents'), which its ``${AvailableTools}`` lists too, and the
    sub-agents (name, description) for its ``${SubAgents}``; None: the
    built-in prompt."""
    custom = getattr(run.context, "system_prompt", None)
    if custom is None:
        return None
    agents = tuple((a.name, a.description) for a in getattr(run.context, "agents", ()) or ())
    extra = tuple(n for n in run.server_tools if n in SERVER_TOOLS) + ((skill_tool.NAME,) if _skills(run) else ()) \
        + tuple(name for name, _ in agents)
    return custom, extra, agents


#: The system instruction of a request (what ``get_system_prompt`` answers).
instruction_for = _system_instruction


def instruction_for_tools(run: AgentRun, config: ServerConfig, tools: Sequence[ToolSpec]) -> str | None:
    """The session's system instruction as if ``tools`` were its tools (a
    sub-agent with no prompt of its own: gemini-cli's generalist)."""
    return _system_instruction(AgentRun(request_id=run.request_id, model_name=run.model_name, history=[],
                                        tools=list(tools), context=run.context), config) or ""


@functools.lru_cache(maxsize=256)
def _built_instruction(tools: tuple[tuple[str, str], ...], context: tuple | None) -> str:
    facts = PromptFacts(tools=list(tools))
    if context is not None:
        approval_mode, workspace_dirs, interactive, files, file_names, skills, custom = context
        facts.skills = list(skills)
        facts.approval_mode = approval_mode
        facts.workspace_dirs = list(workspace_dirs)
        facts.interactive = interactive
        facts.context_files = [ContextBlock(*f) for f in files]
        facts.context_file_names = list(file_names) or ["GEMINI.md"]
        if custom is not None:  # GEMINI_SYSTEM_MD: the user's own, in place of ours
            text, extra, agents = custom
            return custom_instruction(text, facts, extra_tools=extra, subagents=agents)
    return system_instruction(facts)


def _backoff(attempt: int, config: ServerConfig, retry_after: float | None) -> float:
    """The wait before retry ``attempt + 1``, as gemini-cli waits: the base
    delay doubling per attempt up to the ceiling, ±30 % jitter (it spreads
    many sessions retrying after one outage); a wait the API asked for
    (``RetryInfo``) is waited at least, plus up to 20 %."""
    delay = min(config.retry_base_delay * (2 ** (attempt - 1)), config.retry_max_delay)
    if retry_after is not None:
        return max(delay, retry_after) * (1 + 0.2 * random.random())
    return delay * random.uniform(0.7, 1.3)


async def _run_tools(
    calls: list[FunctionCallChunk], call_tool: CallTool, responses: list[dict[str, Any] | None]
) -> None:
    """Run the calls concurrently (a call with ``wait_for_previous: true``
    after the ones before it), filling ``responses`` in call order."""

    done = [trio.Event() for _ in calls]

    async def one(i: int, call: FunctionCallChunk) -> None:
        try:
            if isinstance(call.args, dict) and call.args.get("wait_for_previous") is True:
                # gemini-cli's wait_for_previous: after every earlier call of the turn.
                for event in done[:i]:
                    await event.wait()
            result, failure = await call_tool(call.name, call.args)
            payload = {"error": _failure_dict(failure)} if failure is not None else {"output": result}
            responses[i] = _function_response(call, payload)
        finally:
            done[i].set()

    async with trio.open_nursery() as nursery:
        for i, call in enumerate(calls):
            nursery.start_soon(one, i, call)


def call_server_tool(host: Any, *, request_id: str, emit: Emit, ask: Any,
                     on_call: Callable[[str, str, dict[str, Any]], None] | None = None,
                     agent_id: int = 0, hooks: Any = None, agent: str = "") -> CallTool:
    """A :data:`CallTool` that runs each call on the server, through a
    :class:`~gemini_split.server.session.server_tools.ToolHost` (``hello.tools =
    "server"``): each call gets a fresh call id (``t-…``, told to
    ``on_call(call_id, name, args)`` first), its events go out through
    ``emit``, a call that needs approval asks through ``ask`` and the
    user's tool hooks are asked through ``hooks`` (see
    :data:`~gemini_split.server.session.server_tools.Hooks`). A
    sub-agent's calls (``agent_id``, named ``agent``) say so on their
    events and questions, and the policy's ``subagent`` rules see them."""
    if agent_id:
        emit = _as_agent(emit, agent_id)
        asked = ask

        async def ask(question: Any) -> Any:
            return await asked(replace_struct(question, agent_id=agent_id))

    async def call(name: str, args: dict[str, Any]) -> tuple[Any, ToolFailure | None]:
        call_id = "t-" + secrets.token_hex(8)
        if on_call is not None:
            on_call(call_id, name, args)
        if agent:
            return await host.execute(call_id, name, args, emit=emit, ask=ask, hooks=hooks, request_id=request_id,
                                      agent=agent)
        return await host.execute(call_id, name, args, emit=emit, ask=ask, hooks=hooks, request_id=request_id)

    return call


def _as_agent(emit: Emit, agent_id: int) -> Emit:
    """``emit`` that marks tool events as the sub-agent ``agent_id``'s."""
    async def marked(event: ServerEvent) -> None:
        if isinstance(event, (ToolStarted, ToolDelta, ToolCompleted, ToolError)):
            event = replace_struct(event, agent_id=agent_id)
        await emit(event)

    return marked


def _answered(calls: list[FunctionCallChunk], responses: list[dict[str, Any] | None]) -> list[dict[str, Any]]:
    cancelled = {"error": {"code": "cancelled", "message": "the user cancelled this call"}}
    return [r if r is not None else _function_response(c, cancelled) for c, r in zip(calls, responses)]


def _function_response(call: FunctionCallChunk, payload: dict[str, Any]) -> dict[str, Any]:
    part: dict[str, Any] = {"name": call.name, "response": payload}
    if call.call_id:
        part["id"] = call.call_id
    return {"function_response": part}


def _failure_dict(failure: ToolFailure) -> dict[str, Any]:
    out = {"code": failure.code, "message": failure.message}
    if failure.hint:
        out["hint"] = failure.hint
    return out
