"""One turn, folded from server events: the one place that does it.

A :class:`Turn` is applied every server event a front end receives and
hands back the small typed changes it means (:data:`Change`): text added,
a tool call started or ended, a retry, the turn's end. Front ends (the
one-shot renderers, the follower of other clients' turns, the ACP and gRPC
faces, the REPL) render changes; what the turn holds so far (the text since
the last tool call, the calls still running, the retries) is read off the
turn, never kept again by a front end. Modelled on simonw/llm's
``Response``.

Sans-IO like the rest of :mod:`gemini_split.protocol`: no I/O, no trio, no
clock. A caller that wants tool durations passes ``now`` (any monotonic
clock, in seconds) to :meth:`Turn.apply`.

Events that are not about a turn (``connected``, ``clients_changed``,
``state``, ``history``…) give no change: a front end handles those itself.
"""

from __future__ import annotations

from typing import Any

from msgspec import Struct

from .messages import (
    AgentFinished,
    AgentStarted,
    ApiStats,
    Compressed,
    Error,
    Finished,
    RequestStarted,
    Retrying,
    ServerEvent,
    TextDelta,
    ThinkingDelta,
    ToolAwaitingApproval,
    ToolCompleted,
    ToolDecided,
    ToolDelta,
    ToolError,
    ToolExecutionRequest,
    ToolFailure,
    ToolStarted,
    Usage,
)

__all__ = [
    "AgentBegan",
    "AgentEnded",
    "AgentOutput",
    "AgentState",
    "ApprovalAsked",
    "ApprovalDecided",
    "Change",
    "Notice",
    "RetryScheduled",
    "TextAdded",
    "ThoughtAdded",
    "ToolCall",
    "ToolCallEnded",
    "ToolCallOutput",
    "ToolCallRequested",
    "ToolCallStarted",
    "Turn",
    "TurnBegan",
    "TurnEnded",
]


class TurnBegan(Struct, frozen=True, kw_only=True):
    """A request began (``request_started``): ``client`` sent ``prompt``."""

    request_id: str | None
    prompt: str
    client: str


class TextAdded(Struct, frozen=True, kw_only=True):
    """The model wrote ``text`` (possibly empty: a front end decides)."""

    request_id: str | None
    text: str


class ThoughtAdded(Struct, frozen=True, kw_only=True):
    """The model thought ``text`` aloud."""

    request_id: str | None
    text: str


class ToolCallRequested(Struct, frozen=True, kw_only=True):
    """The server asks a client to run a tool (``tool_execution_request``;
    ``handover``: the call moves from a client that went away).
    ``text_before`` is the model's text since the previous tool call (the
    turn's text starts afresh after it; empty for a handover)."""

    request_id: str | None
    call_id: str
    name: str
    args: dict[str, Any]
    handover: bool
    text_before: str
    #: (1.4) The agent that called (0: the main agent).
    agent_id: int = 0


class ToolCallStarted(Struct, frozen=True, kw_only=True):
    """A tool call began to run (``tool_started``). ``text_before`` is the
    model's text since the previous tool call (the turn's text starts
    afresh after it)."""

    request_id: str | None
    call_id: str
    name: str
    args: dict[str, Any]
    text_before: str
    #: (1.4) The agent that called (0: the main agent).
    agent_id: int = 0


class ToolCallOutput(Struct, frozen=True, kw_only=True):
    """Output of a running call (``stream``: ``stdout`` or ``stderr``).
    ``call`` is None for a call this turn never saw start."""

    request_id: str | None
    call_id: str
    text: str
    stream: str
    call: ToolCall | None
    agent_id: int = 0


class ToolCallEnded(Struct, frozen=True, kw_only=True):
    """A tool call ended: ``ok`` with ``result``, or not with ``error``.
    ``duration`` (seconds) when the turn saw it start and was given ``now``
    both times; ``call`` is None for a call it never saw start."""

    request_id: str | None
    call_id: str
    name: str
    ok: bool
    result: Any
    error: ToolFailure | None
    duration: float | None
    call: ToolCall | None
    agent_id: int = 0


class ApprovalAsked(Struct, frozen=True, kw_only=True):
    """A server-side call waits for a decision (the event, unchanged)."""

    request_id: str | None
    event: ToolAwaitingApproval


class ApprovalDecided(Struct, frozen=True, kw_only=True):
    """A question about a call was settled (``decision`` as ``tool_decided``)."""

    request_id: str | None
    call_id: str
    decision: str
    by: str
    #: (1.6) The approval carried text the user changed (``tool_decided.modified``).
    modified: bool = False


class RetryScheduled(Struct, frozen=True, kw_only=True):
    """A model call failed and is repeated after ``delay`` seconds."""

    request_id: str | None
    attempt: int
    max_attempts: int
    delay: float
    error: str
    agent_id: int = 0


class HistoryCompressed(Struct, frozen=True, kw_only=True):
    """(1.3) The session's history was compressed: the prompt took
    ``before_tokens``, now about ``after_tokens``; ``automatic`` when it
    passed the threshold during this request (else ``/compress``)."""

    request_id: str | None
    before_tokens: int
    after_tokens: int
    automatic: bool

    def describe(self) -> str:
        """gemini-cli's line for it."""
        why = " (automatically: the prompt passed the compression threshold)" if self.automatic else ""
        return f"Chat history compressed from {self.before_tokens} to {self.after_tokens} tokens{why}."


class AgentBegan(Struct, frozen=True, kw_only=True):
    """(1.4) A sub-agent started (``agent_started``): ``state`` is its
    running record in :attr:`Turn.agents`."""

    request_id: str | None
    agent_id: int
    state: AgentState


class AgentOutput(Struct, frozen=True, kw_only=True):
    """(1.4) A sub-agent wrote ``text`` (``thought``: thought aloud). Not
    part of the turn's answer: only its report reaches the main agent."""

    request_id: str | None
    agent_id: int
    text: str
    thought: bool = False
    state: AgentState | None = None


class AgentEnded(Struct, frozen=True, kw_only=True):
    """(1.4) A sub-agent finished (``agent_finished``): ``state`` holds its
    outcome, counts, tokens and summary; ``duration`` in seconds when the
    turn saw it start and was given ``now`` both times."""

    request_id: str | None
    agent_id: int
    state: AgentState
    duration: float | None = None


class Notice(Struct, frozen=True, kw_only=True):
    """An ``error`` that belongs to no request: a warning unless ``fatal``."""

    code: str
    message: str
    fatal: bool


class TurnEnded(Struct, frozen=True, kw_only=True):
    """The request is over: ``reason`` is ``stop`` or ``cancelled``
    (``finished``) or ``error`` (an ``error`` naming the request, then
    ``error_code``/``error_message``/``fatal`` say it). ``usage``, ``api``
    and ``turns`` as the event reported them (None/0 when it did not);
    ``retries`` counts the ``retrying`` events seen since the previous
    end; ``text`` is the model's text after its last tool call."""

    request_id: str | None
    reason: str
    usage: Usage | None
    api: ApiStats | None
    turns: int
    retries: int
    text: str
    error_code: str | None = None
    error_message: str | None = None
    fatal: bool = False


Change = (TurnBegan | TextAdded | ThoughtAdded | ToolCallRequested | ToolCallStarted | ToolCallOutput
          | ToolCallEnded | ApprovalAsked | ApprovalDecided | RetryScheduled | HistoryCompressed | Notice
          | TurnEnded | AgentBegan | AgentOutput | AgentEnded)
"""Everything :meth:`Turn.apply` may hand out."""


class AgentState:
    """(1.4) A sub-agent of the turn, as its events tell it: ``outcome`` is
    None while it runs; ``tool`` the tool it runs now ("" between tools)."""

    __slots__ = ("agent_id", "name", "parent_call_id", "model", "task", "started_at", "tool", "tool_calls",
                 "turns", "usage", "outcome", "summary", "text", "tools", "refused_tools")

    def __init__(self, event: AgentStarted, started_at: float | None):
        self.agent_id = event.agent_id
        self.name = event.name
        self.parent_call_id = event.parent_call_id
        self.model = event.model
        self.task = event.task
        self.tools = event.tools
        self.refused_tools = event.refused_tools
        self.started_at = started_at
        self.tool = ""
        self.tool_calls = 0
        self.turns = 0
        self.usage: Usage | None = None
        self.outcome: str | None = None
        self.summary = ""
        #: Its text so far (the last message, after its last tool call).
        self.text = ""

    def finish(self, event: AgentFinished) -> None:
        self.outcome, self.summary, self.turns = event.outcome, event.summary, event.turns
        self.tool_calls = max(self.tool_calls, event.tool_calls)
        self.usage = event.usage
        self.tool = ""

    def __repr__(self) -> str:
        return f"AgentState({self.agent_id}, {self.name!r}, outcome={self.outcome!r})"


class ToolCall:
    """A call the turn saw start; still running while in :attr:`Turn.running`."""

    __slots__ = ("call_id", "name", "args", "started_at", "lines", "partial", "streamed", "agent_id")

    def __init__(self, call_id: str, name: str, args: dict[str, Any], started_at: float | None,
                 agent_id: int = 0):
        self.call_id = call_id
        #: (1.4) The agent that called it (0: the main agent).
        self.agent_id = agent_id
        self.name = name
        self.args = args
        self.started_at = started_at
        #: Its streamed output so far: the complete lines, and the last,
        #: unfinished one.
        self.lines: list[str] = []
        self.partial = ""
        #: Whether output came as ``tool_delta`` events.
        self.streamed = False

    def add_output(self, text: str) -> None:
        pieces = (self.partial + text).split("\n")
        self.partial = pieces.pop()
        self.lines.extend(pieces)

    def all_lines(self) -> list[str]:
        """Its output so far, the unfinished line included."""
        return self.lines + ([self.partial] if self.partial else [])

    def __repr__(self) -> str:
        return f"ToolCall({self.call_id!r}, {self.name!r})"


class Turn:
    """The turn so far. :meth:`apply` each event; read the state here.

    One turn at a time: after its end, an event of another request (or a
    ``request_started``) starts the next one afresh; a late event of the
    same request still counts in it."""

    def __init__(self) -> None:
        self.request_id: str | None = None
        self.prompt = ""
        self.client = ""
        self._text: list[str] = []
        #: All of the model's text, its messages before and after a tool
        #: call apart by a blank line.
        self.answer = ""
        #: Calls started and not ended, by call id, in the order they started.
        self.running: dict[str, ToolCall] = {}
        #: How many tool calls started in this turn (sub-agents' included).
        self.tool_calls = 0
        #: (1.4) The turn's sub-agents by ``agent_id``, in the order they started.
        self.agents: dict[int, AgentState] = {}
        self.retries = 0
        self.ended: TurnEnded | None = None

    @property
    def text(self) -> str:
        """The model's text since the last tool call (all of it if none ran)."""
        return "".join(self._text)

    def _begin_if_ended(self, request_id: str | None = None) -> None:
        if self.ended is not None and request_id != self.request_id:
            self.__init__()  # type: ignore[misc]
            self.request_id = request_id

    def _take_text(self) -> str:
        text = self.text
        self._text.clear()
        return text

    def apply(self, event: ServerEvent, *, now: float | None = None) -> list[Change]:
        """Fold ``event`` into the turn; what it changed, in order (empty
        for an event that is not about a turn)."""
        rid = event.request_id
        if isinstance(event, RequestStarted):
            self.__init__()  # type: ignore[misc]
            self.request_id, self.prompt, self.client = rid, event.prompt, event.client
            return [TurnBegan(request_id=rid, prompt=event.prompt, client=event.client)]
        if isinstance(event, Error) and rid is None:
            return [Notice(code=event.code, message=event.message, fatal=event.fatal)]
        if isinstance(event, (Finished, Error)):
            return [self._end(event)]
        if not isinstance(event, (TextDelta, ThinkingDelta, ToolExecutionRequest, ToolStarted, ToolDelta,
                                  ToolCompleted, ToolError, ToolAwaitingApproval, ToolDecided, Retrying,
                                  Compressed, AgentStarted, AgentFinished)):
            return []
        self._begin_if_ended(rid)
        if self.request_id is None:
            self.request_id = rid
        if isinstance(event, (AgentStarted, AgentFinished)):
            return self._agent(event, now)
        if isinstance(event, (TextDelta, ThinkingDelta)) and event.agent_id:
            agent = self.agents.get(event.agent_id)
            if agent is not None and isinstance(event, TextDelta):
                agent.text += event.content
            return [AgentOutput(request_id=rid, agent_id=event.agent_id, text=event.content,
                                thought=isinstance(event, ThinkingDelta), state=agent)]
        if isinstance(event, TextDelta):
            self._text.append(event.content)
            self.answer += event.content
            return [TextAdded(request_id=rid, text=event.content)]
        if isinstance(event, ThinkingDelta):
            return [ThoughtAdded(request_id=rid, text=event.content)]
        if isinstance(event, ToolExecutionRequest):
            # The message id is the call's id (the answer names it). A
            # handover asks again for a call already asked: the text stays.
            if event.agent_id:
                return [ToolCallRequested(request_id=rid, call_id=event.id or "", name=event.tool,
                                          args=dict(event.parameters), handover=event.handover, text_before="",
                                          agent_id=event.agent_id)]
            return [ToolCallRequested(request_id=rid, call_id=event.id or "", name=event.tool,
                                      args=dict(event.parameters), handover=event.handover,
                                      text_before="" if event.handover else self._take_text())]
        if isinstance(event, ToolStarted):
            call = ToolCall(event.call_id, event.tool, dict(event.parameters), now, event.agent_id)
            self.running[event.call_id] = call
            self.tool_calls += 1
            if event.agent_id:
                agent = self.agents.get(event.agent_id)
                if agent is not None:
                    agent.tool, agent.tool_calls, agent.text = event.tool, agent.tool_calls + 1, ""
                return [ToolCallStarted(request_id=rid, call_id=event.call_id, name=event.tool, args=call.args,
                                        text_before="", agent_id=event.agent_id)]
            if self.answer and not self.answer.endswith("\n\n"):
                self.answer = self.answer.rstrip("\n") + "\n\n"
            return [ToolCallStarted(request_id=rid, call_id=event.call_id, name=event.tool,
                                    args=call.args, text_before=self._take_text())]
        if isinstance(event, ToolDelta):
            call = self.running.get(event.call_id)
            if call is not None:
                call.streamed = True
                call.add_output(event.content)
            return [ToolCallOutput(request_id=rid, call_id=event.call_id, text=event.content,
                                   stream=event.stream, call=call, agent_id=event.agent_id)]
        if isinstance(event, (ToolCompleted, ToolError)):
            call = self.running.pop(event.call_id, None)
            duration = None
            if call is not None and call.started_at is not None and now is not None:
                duration = now - call.started_at
            ok = isinstance(event, ToolCompleted)
            agent = self.agents.get(event.agent_id) if event.agent_id else None
            if agent is not None and agent.tool == event.tool:
                agent.tool = ""
            return [ToolCallEnded(agent_id=event.agent_id, request_id=rid, call_id=event.call_id, name=event.tool, ok=ok,
                                  result=event.result if ok else None,  # type: ignore[union-attr]
                                  error=None if ok else event.error,  # type: ignore[union-attr]
                                  duration=duration, call=call)]
        if isinstance(event, ToolAwaitingApproval):
            return [ApprovalAsked(request_id=rid, event=event)]
        if isinstance(event, ToolDecided):
            return [ApprovalDecided(request_id=rid, call_id=event.call_id, decision=event.decision, by=event.by,
                                    modified=event.modified)]
        if isinstance(event, Compressed):
            return [HistoryCompressed(request_id=rid, before_tokens=event.before_tokens,
                                      after_tokens=event.after_tokens, automatic=event.automatic)]
        assert isinstance(event, Retrying)
        self.retries += 1
        return [RetryScheduled(request_id=rid, attempt=event.attempt, max_attempts=event.max_attempts,
                               delay=event.delay, error=event.error, agent_id=event.agent_id)]

    def _agent(self, event: AgentStarted | AgentFinished, now: float | None) -> list[Change]:
        rid = event.request_id
        if isinstance(event, AgentStarted):
            state = self.agents[event.agent_id] = AgentState(event, now)
            return [AgentBegan(request_id=rid, agent_id=event.agent_id, state=state)]
        state = self.agents.get(event.agent_id)
        if state is None:  # its start was before what this client saw (an interrupted one)
            state = self.agents[event.agent_id] = AgentState(AgentStarted(
                request_id=rid, agent_id=event.agent_id, name=event.name, parent_call_id=event.parent_call_id), None)
        state.finish(event)
        duration = now - state.started_at if now is not None and state.started_at is not None else None
        return [AgentEnded(request_id=rid, agent_id=event.agent_id, state=state, duration=duration)]

    def running_agents(self) -> list[AgentState]:
        """The sub-agents still at work, in the order they started."""
        return [a for a in self.agents.values() if a.outcome is None]

    def forget(self, call_id: str) -> ToolCall | None:
        """Stop counting ``call_id`` as running: its end will not come (a
        view closes while it runs). The call, if it was running."""
        return self.running.pop(call_id, None)

    def _end(self, event: Finished | Error) -> TurnEnded:
        if isinstance(event, Finished):
            ended = TurnEnded(request_id=event.request_id, reason=event.reason, usage=event.usage,
                              api=event.api, turns=event.turns, retries=self.retries, text=self.text)
        else:
            ended = TurnEnded(request_id=event.request_id, reason="error", usage=event.usage, api=event.api,
                              turns=0, retries=self.retries, text=self.text, error_code=event.code,
                              error_message=event.message, fatal=event.fatal)
        self.retries = 0
        self.ended = ended
        return ended
