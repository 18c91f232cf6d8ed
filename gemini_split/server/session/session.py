"""A session: one conversation, its tools, its running request, its events.

The connection handlers feed a session their clients' messages
(:meth:`Session.handle`, naming the :class:`~.views.View` each came from),
already checked by each connection's
:class:`~gemini_split.protocol.Connection` (one request at a time, tool
responses only for pending calls, nothing from observers…); the session
answers through its :class:`Outbox` (events every view gets, numbered and
logged once) or straight to one view (replies). ``cancel`` stops the running
request at once and the session stays usable. Each request starts with one
``request_started`` and ends with exactly one ``finished`` or one ``error``
carrying its ``request_id``.

Several clients: any driver may prompt (a second prompt while one runs is
``busy``) or cancel. A client tool call goes to the client whose prompt
started the request (its *origin*); when the origin is gone, it is handed
over (asked again, ``handover``) to every attached driver offering the tool,
and the first answer wins (``tool_call_answered`` tells the others).
"""

from __future__ import annotations

import logging
import secrets
import time
from dataclasses import dataclass, field
from collections.abc import Callable
from typing import Any

import trio
from msgspec import UNSET
from msgspec.structs import replace

from gemini_split import telemetry
from gemini_split.protocol import (
    AgentFinished,
    AgentStarted,
    Cancel,
    ProtocolError,
    decode,
    RequestStarted,
    Rewind,
    RewindPoint,
    Rewound,
    ToolCallAnswered,
    ToolStarted,
    ClientMessage,
    Compress,
    Compressed,
    RequestTracker,
    Error,
    ErrorCode,
    EventLog,
    Finished,
    GenerateContentRequest,
    GetHistory,
    GetState,
    GetSystemPrompt,
    SystemPrompt,
    History,
    Restore,
    HookResponse,
    ServerEvent,
    SessionContext,
    State,
    ToolAwaitingApproval,
    ToolDecision,
    ToolDiscovery,
    ToolExecutionRequest,
    ToolExecutionResponse,
    ToolFailure,
    ToolProgress,
    ToolSpec,
    TextDelta,
    Usage,
    encode,
    quote,
)
from gemini_split.stamping import stamp
from gemini_split.transport import Principal

from .loop import SERVER_TOOLS, AgentRun, TurnLimitExceeded, call_server_tool, instruction_for, run_agent
from .agents import STREAMED_LIMIT, remote_wait
from .approvals import Approvals, DecisionRefused
from ..config import ServerConfig
from ..model.base import Model, ModelAuthError, ModelError
from ..model.names import ModelNameRefused, check_model_name
from .broadcast import Broadcast
from .compression import Compression, CompressionFailed, compress, estimated_tokens
from .outbox import Outbox
from .priority import AnswerFirst
from .restore_op import answer_restore
from ..store import SessionRecord, SessionStore, StoredEvent, StoreError, hash_token, make_title
from ..store.memory import MemoryStore
from .rewind import Rewinding, RewindRefused, Timeline
from .server_tools import ToolChoice, ToolHost
from .tool_hooks import HookRefused, ToolHooks
from .views import AttachPoint, View

log = logging.getLogger(__name__)

#: The owner of sessions opened without authentication (embedded mode, a
#: loopback server without tokens).
LOCAL_OWNER = "local"


@dataclass
class _PendingCall:
    done: trio.Event = field(default_factory=trio.Event)
    response: ToolExecutionResponse | None = None
    #: What was sent, to send again to a client that reattaches, and the
    #: seq it was logged with (None while it waits in the outbox).
    request: ToolExecutionRequest | None = None
    seq: int | None = None
    #: The views this call was handed over to already.
    offered: set[View] = field(default_factory=set)


@dataclass
class _ActiveRequest:
    request_id: str
    scope: trio.CancelScope
    #: The view whose prompt started it: its tool calls go there.
    origin: View | None = None
    #: Set when the server (not the user) stopped the request: it then ends
    #: with this error instead of ``finished`` / ``cancelled``.
    stopped_because: tuple[ErrorCode, str] | None = None


class Session:
    """Create with the server's model and config; call :meth:`run` in a
    nursery (via ``nursery.start``) before handing it messages."""

    def __init__(self, *, model: Model, config: ServerConfig, principal: Principal | None = None,
                 store: SessionStore | None = None, record: SessionRecord | None = None,
                 session_id: str | None = None, priority: AnswerFirst | None = None):
        self.id = session_id or "s-" + secrets.token_hex(8)
        #: The resume token; None for a session restored from the store
        #: until a client presents it (the store keeps only its hash).
        self.resume_token: str | None = secrets.token_urlsafe(24)
        self.token_hash = hash_token(self.resume_token)
        self.principal = principal
        self.owner = principal.user_id if principal is not None else LOCAL_OWNER
        self.store = store if store is not None else MemoryStore()
        self.title = ""
        self.turns = 0
        #: Whether the store has this session yet: it is written at its
        #: first request (a connection that never prompts leaves nothing).
        self.persisted = False
        #: While that first record is being written (:meth:`_record_start`):
        #: every event logged so far, handed to the store once it exists.
        self._unstored: list[StoredEvent] | None = None
        self.model = model
        #: Models made from clients' own keys (:meth:`use_client_model`).
        self._client_models: list[Model] = []
        self.config = config
        #: The server's requests in answer-first order (server/session/priority.py);
        #: a session of its own has its own.
        self.priority = priority if priority is not None else AnswerFirst(
            max_wait=config.answer_first_wait, busy_tasks=config.answer_first_busy_tasks)
        self.model_name = config.model
        self.history: list[dict[str, Any]] = []
        #: The last model call's prompt size (tokens): what the automatic
        #: compression compares with its threshold.
        self.last_prompt_tokens = 0
        self.tools: list[ToolSpec] = []
        #: Server-run tools the client asked for (``tool_discovery.server_tools``).
        self.server_tools: tuple[str, ...] = ()
        #: The client's latest SessionContext (context files, approval mode…).
        self.context: SessionContext | None = None
        self.log = EventLog(config.replay_capacity, config.replay_bytes)
        #: Where its tools run, as the store keeps it: server-side tools so
        #: chosen, or None (the client's). A restored session keeps it.
        self.tool_choice: ToolChoice | None = None
        #: Where each prompt and tool call sits in the conversation, and
        #: what compressions dropped: what ``rewind`` needs (1.4).
        self.timeline = Timeline()
        #: A rewind is being saved: no request may start meanwhile.
        self._rewinding = False
        if record is not None:  # restored from the store
            self.id, self.owner, self.token_hash = record.id, record.owner, record.token_hash
            self.resume_token = None
            self.title, self.turns, self.history = record.title, record.turns, record.history
            # The API's count is not stored: estimated, as gemini-cli does without one.
            self.last_prompt_tokens = estimated_tokens(self.history)
            self.model_name = record.model or config.model
            self.log.last_seq = record.last_seq
            self.tool_choice = ToolChoice.from_record(record.approval)
            self.timeline = Timeline.from_record(record.timeline, record.archive)
            self.persisted = True
        #: The way of its events to every view: outbox, log, views, pump.
        self.events = Broadcast(self.id, self.log, Outbox(config.outbox_limit, max_bytes=config.outbox_bytes))
        self.events.on_logged = self._logged
        self.events.after_fan_out = self._handed_out
        self.events.on_view_left = self._view_left
        #: Server-side tools (``hello.tools = "server"``), or None: the
        #: client's tools. Set by :meth:`use_server_tools`.
        self.tool_host: ToolHost | None = None
        #: The questions server-side tools ask the attached clients.
        self.approvals = Approvals(self.emit_nowait,
                                   can_answer=lambda: any(v.approves and v.may_act for v in self.views),
                                   can_answer_questions=lambda: any(v.answers_questions and v.may_act
                                                                    for v in self.views))
        #: The user's tool hooks around server-side tools, run by a client (1.4).
        self.tool_hooks = ToolHooks(self._hooks_client, max_wait=config.tool_timeout)
        self._pending: dict[str, _PendingCall] = {}
        #: (1.4) The running request's sub-agents at work (``state.agents``),
        #: and the slots of the cap on how many run at once.
        self.running_agents: dict[int, Any] = {}
        self.agent_slots = trio.CapacityLimiter(max(1, config.max_subagents))
        #: Called whenever :attr:`busy` turns true or false (the session's
        #: manager publishes it to other replicas' session lists).
        self.busy_changed: Callable[[], None] = lambda: None
        self._active_request: _ActiveRequest | None = None
        self._nursery: trio.Nursery | None = None

    # --- lifetime ------------------------------------------------------------

    async def _record_start(self, request_id: str, done: trio.Event) -> None:
        """Write to the store that ``request_id`` runs — with the session's
        record itself at its first request (then the events logged so far
        follow it) — and set ``done`` however that ends. A failure is said
        to the clients (``storage_error``) and the request goes on.

        It runs beside the request, not before it: a store write waits its
        turn behind every other session's (one writer thread, or a Redis
        round trip), and 1,000 sessions starting at once made each first
        delta wait seconds for it. What a client is promised is unchanged:
        the request's ``finished`` waits for this (and for the turn's own
        write, ``save_turn``), and the session's events reach the store in
        order, after its record."""
        try:
            if self.persisted:
                await self.store.set_running(self.id, request_id, updated=time.time())
                return
            # Every event logged until the record exists is kept here (the
            # in-memory log is bounded; the store must get them all).
            self._unstored = [StoredEvent(e.seq or 0, e.request_id, encode(e), _ms(e.timestamp), e.TYPE)
                              for e in self.log.kept()]
            now = time.time()
            try:
                await self.store.create(SessionRecord(
                    id=self.id, owner=self.owner, token_hash=self.token_hash,
                    created=now, updated=now, model=self.model_name, running_request=request_id,
                    title=self.title,  # listed while the first prompt still runs
                    approval=self.tool_choice.to_record() if self.tool_choice is not None else {},
                    project=self.context.workspace_dirs[0] if self.context and self.context.workspace_dirs else "",
                ))
            except BaseException:
                self._unstored = None
                raise
            # No await from here on: log_events hands over what comes next.
            self.store.append_events(self.id, self._unstored)
            self._unstored = None
            self.persisted = True
        except StoreError as exc:
            self._storage_failed(request_id, exc)
        finally:
            done.set()

    def _logged(self, batch: list[tuple[ServerEvent, str]]) -> None:
        """Events were logged (:meth:`Broadcast.log_events`): note the seq
        of each pending call and question, and hand them to the store's
        event log (batched off the hot path)."""
        for event, _ in batch:
            if isinstance(event, ToolExecutionRequest):
                if event.id in self._pending:
                    self._pending[event.id].seq = event.seq
            elif isinstance(event, ToolAwaitingApproval):
                self.approvals.logged(event)
            if isinstance(event, RequestStarted):
                self.timeline.started(event.request_id or "", event.seq or 0)
            elif isinstance(event, ToolExecutionRequest):
                self.timeline.call_logged(event.id, event.seq or 0)
            elif isinstance(event, ToolStarted | ToolAwaitingApproval):
                self.timeline.call_logged(event.call_id, event.seq or 0)
        if self.config.observe_events is not None:
            self.config.observe_events(self, batch)
        if self.persisted or self._unstored is not None:
            stored = [StoredEvent(e.seq or 0, e.request_id, text, _ms(e.timestamp), e.TYPE) for e, text in batch]
            if self.persisted:
                self.store.append_events(self.id, stored)
            else:
                self._unstored.extend(stored)

    @property
    def outbox(self) -> Outbox:
        return self.events.outbox

    @property
    def views(self) -> list[View]:
        """The attached views, in the order they joined."""
        return self.events.views

    @property
    def logged(self) -> RequestTracker:
        """The request as the event log stands (what a view attaching now
        is told at the start of its live part)."""
        return self.events.logged

    # --- views ---------------------------------------------------------------

    def _view_left(self, view: View) -> None:
        """Its request's tool calls are handed over to the drivers left;
        a hook it was running will not answer."""
        self.tool_hooks.view_left(view)
        if self._active is not None and self._active.origin is view:
            self._active.origin = None
            self.hand_over_calls()

    def _hooks_client(self, request_id: str) -> View | None:
        """Who runs the user's tool hooks for ``request_id``: its origin if
        that client runs them (``tool_hooks``), nobody if it does not; once
        the origin has left, the first attached driver that runs them."""
        active = self._active
        if active is None or active.request_id != request_id:
            return None
        if active.origin is not None:
            return active.origin if active.origin.tool_hooks and active.origin.attached else None
        return next((v for v in self.views if v.tool_hooks and v.may_act and v.attached), None)

    def _handed_out(self) -> None:
        if self._active is not None and self._active.origin is None and self._pending:
            # Calls nobody's own (their origin left): now logged, every
            # driver may answer them.
            self.hand_over_calls()

    def catch_up(self, view: View, upto: int) -> None:
        """``view``'s replay (up to seq ``upto``, its attach point) is over:
        ask it again (unlogged) what the session still waits for — the tool
        calls of a request whose origin left (:meth:`hand_over_calls`) and
        the approval questions logged by then and still open (same call ids:
        the first decision from anyone wins; later ones reach it live)."""
        self.hand_over_calls(view)
        if view.may_act and view.approves:
            for question in self.approvals.pending():
                if question.seq is not None and question.seq <= upto:
                    view.send_direct(replace(question, id=UNSET, timestamp=UNSET, seq=None))

    def hand_over_calls(self, view: View | None = None) -> None:
        """Ask again (same ids, unlogged, ``handover``) for the unanswered
        tool calls of a request whose origin is not attached: of ``view``
        only, or of every driver attached. Each view is asked once per
        call; the first answer wins."""
        if self._active is None or self._active.origin is not None:
            return
        targets = [view] if view is not None else list(self.views)
        for call_id, pending in self._pending.items():
            if pending.done.is_set() or pending.request is None or pending.seq is None:
                continue  # an unlogged request reaches every view live
            for target in targets:
                if target.may_act and target.attached and target not in pending.offered \
                        and target.offers(pending.request.tool):
                    pending.offered.add(target)
                    target.send_direct(replace(pending.request, seq=None, handover=True))

    async def interrupted(self, request_id: str) -> None:
        """A request was running when the server stopped: end it, for whoever
        resumes, with ``interrupted`` (it is not run again)."""
        # Logged at once, not through the outbox: it is part of what the
        # resuming client replays (its connection state expects it there).
        # Its sub-agents that had not finished end first, each once: they
        # are not run again either.
        self.events.log_events([
            AgentFinished(request_id=request_id, agent_id=started.agent_id, name=started.name,
                          parent_call_id=started.parent_call_id, outcome="interrupted",
                          summary="the server stopped while this sub-agent was running; it was not run again")
            for started in await self._unfinished_agents(request_id)
        ] + [Error(
            request_id=request_id, code=ErrorCode.INTERRUPTED.value,
            message="interrupted: the server stopped while this request was running; it was not run "
                    "again (the conversation goes on from the last completed answer)",
        )])
        try:
            await self.store.set_running(self.id, None, updated=time.time())
        except StoreError as exc:
            log.error("session %s: %s", self.id, exc)

    async def _unfinished_agents(self, request_id: str) -> list[AgentStarted]:
        """The sub-agents of ``request_id`` the store saw start and not
        finish (its event log's marks say where: only those are read)."""
        try:
            marks = await self.store.event_marks(self.id)
        except StoreError as exc:
            log.error("session %s: %s", self.id, exc)
            return []
        started: dict[int, AgentStarted] = {}
        for mark in marks or ():
            if mark.request_id != request_id or mark.type not in (AgentStarted.TYPE, AgentFinished.TYPE):
                continue
            try:
                page = await self.store.events_after(self.id, mark.seq - 1, limit=1)
                event = decode(page[0].data) if page else None
            except (StoreError, ProtocolError) as exc:
                log.error("session %s: event %d unreadable: %s", self.id, mark.seq, exc)
                continue
            if isinstance(event, AgentStarted):
                started[event.agent_id] = event
            elif isinstance(event, AgentFinished):
                started.pop(event.agent_id, None)
        return list(started.values())

    def use_server_tools(self, host: ToolHost, choice: ToolChoice, *, approval_timeout: float) -> None:
        """Run this session's tools on the server through ``host`` (closed
        when the session stops; opened for ``choice``), asking approvals for
        up to ``approval_timeout`` seconds each."""
        self.tool_host = host
        self.tool_choice = choice
        self.tools = host.specs()
        self.approvals.timeout = approval_timeout

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Own the session's request tasks until cancelled; then close the
        models made from its clients' keys (the keys go with them)."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                await trio.sleep_forever()
        finally:
            if self.tool_host is not None:
                self.tool_host.close()
            models, self._client_models = self._client_models, []
            with trio.CancelScope(shield=True):
                for model in models:
                    await model.aclose()

    def use_client_model(self, model: Model) -> None:
        """Talk to Gemini through ``model``, made from the key the client
        that just attached sent (``serve --allow-client-credentials``), until
        another client's replaces it. It is this session's alone: closed
        when the session unloads, never stored."""
        self._client_models.append(model)
        self.model = model

    @property
    def busy(self) -> bool:
        return self._active is not None

    @property
    def _active(self) -> _ActiveRequest | None:
        """The request running now, if any."""
        return self._active_request

    @_active.setter
    def _active(self, active: _ActiveRequest | None) -> None:
        was_busy = self._active_request is not None
        self._active_request = active
        if (active is not None) != was_busy:
            self.busy_changed()

    def cancel_active(self, because: tuple[ErrorCode, str] | None = None) -> bool:
        """Cancel the running request, if any. Returns whether one ran.

        ``because`` is for the server's own reasons (shutting down): the
        request then ends with that error, so the client knows it was not
        the user who stopped it."""
        if self._active is None:
            return False
        self._active.stopped_because = because
        self._active.scope.cancel()
        return True

    # --- incoming messages -------------------------------------------------------

    async def handle(self, message: ClientMessage, view: View) -> None:
        """Act on one message from the client of ``view``, which its
        connection's :class:`~gemini_split.protocol.Connection` has accepted
        (so an observer's prompts, cancels and answers never get here).
        Never raises for the client's mistakes: those are answered with
        ``error`` events."""
        if isinstance(message, (GenerateContentRequest, Compress)):
            self._start_request(message, view)
        elif isinstance(message, Rewind):
            await self._rewind(message, view)
        elif isinstance(message, ToolExecutionResponse):
            self._resolve_call(message, view)
        elif isinstance(message, ToolProgress):
            self._progress(message)
        elif isinstance(message, ToolDecision):
            try:
                self.approvals.decide(message, by=view.label)
            except DecisionRefused as exc:
                view.send_direct(Error(code=exc.code.value, message=str(exc), in_reply_to=message.id))
        elif isinstance(message, HookResponse):
            try:
                self.tool_hooks.answer(message, view)
            except HookRefused as exc:
                view.send_direct(Error(code=exc.code.value, message=str(exc), in_reply_to=message.id))
        elif isinstance(message, ToolDiscovery):
            view.tools = list(message.tools)
            if view.may_act:
                if self.tool_host is None:  # a server-tools session runs its own
                    self.tools = list(message.tools)
                self.server_tools = tuple(n for n in message.server_tools if n in SERVER_TOOLS)
                self.hand_over_calls(view)
        elif isinstance(message, Cancel):
            if message.request_id is None or (self._active and self._active.request_id == message.request_id):
                self.cancel_active()
        elif isinstance(message, GetHistory):
            view.send_direct(History(in_reply_to=message.id, messages=list(self.history), points=self.points()))
        elif isinstance(message, GetState):
            view.send_direct(self.state(in_reply_to=message.id))
        elif isinstance(message, Restore):
            await answer_restore(self, view, message)
        elif isinstance(message, GetSystemPrompt):
            view.send_direct(self.system_prompt(message, view))

    def system_prompt(self, message: GetSystemPrompt, view: View) -> SystemPrompt:
        """(1.4) The system instruction the next model call would get, with
        the context asked about (or the session's last) and the tools of
        ``view`` (or the session's own, when the server runs them)."""
        context = message.context or self.context
        tools = view.tools if view.tools is not None and self.tool_host is None else self.tools
        run = AgentRun(request_id=message.id if isinstance(message.id, str) else "", model_name=self.model_name,
                       history=[], tools=list(tools), context=context, server_tools=self.server_tools)
        return SystemPrompt(in_reply_to=message.id, text=instruction_for(run, self.config) or "",
                            custom=getattr(context, "system_prompt", None) is not None
                            and self.config.system_instruction is None)

    def state(self, *, in_reply_to: str | None = None) -> State:
        return State(
            in_reply_to=in_reply_to,
            session_id=self.id,
            model=self.model_name,
            busy=self.busy,
            active_request_id=self._active.request_id if self._active else None,
            pending_tool_calls=sorted(self._pending),
            history_length=len(self.history),
            last_seq=self.log.last_seq,
            pending_approvals=tuple(self.approvals.pending()),
            tools="server" if self.tool_host is not None else "client",
            agents=tuple(agent.info() for agent in self.running_agents.values()),
        )

    # --- outgoing events -------------------------------------------------------

    async def emit(self, event: ServerEvent) -> None:
        await self.events.emit(event)

    def emit_nowait(self, event: ServerEvent) -> None:
        self.events.emit_nowait(event)

    def reply_error(self, code: ErrorCode, text: str, *, in_reply_to: str | None = None,
                    request_id: str | None = None, fatal: bool = False) -> None:
        self.emit_nowait(Error(
            code=code.value, message=text, fatal=fatal, in_reply_to=in_reply_to, request_id=request_id,
        ))

    # --- requests ----------------------------------------------------------------

    def _start_request(self, request: GenerateContentRequest | Compress, view: View) -> None:
        if self._nursery is None:
            raise RuntimeError("Session.run must be started before requests are handled")
        if self._rewinding:
            view.send_direct(Error(
                request_id=request.id, in_reply_to=request.id, code=ErrorCode.BUSY.value,
                message="the session is being rewound by another client; send the prompt again"))
            return
        if self._active is not None:
            # Another client's request started first (this one's connection
            # had not heard of it yet).
            view.send_direct(Error(
                request_id=request.id, in_reply_to=request.id, code=ErrorCode.BUSY.value,
                message=f"request {quote(self._active.request_id)} (from another client) is still running; "
                        "cancel it or wait",
            ))
            return
        compressing = isinstance(request, Compress)
        if not compressing and not request.prompt.strip():
            # Refused before it starts: a reply to the asker, not a session
            # event every attached client would see (and the log would keep).
            view.send_direct(Error(
                request_id=request.id, in_reply_to=request.id, code=ErrorCode.INVALID_REQUEST.value,
                message="the prompt is empty",
            ))
            return
        self.emit_nowait(RequestStarted(request_id=request.id, prompt="/compress" if compressing else request.prompt,
                                        client=view.label))
        if not compressing and request.model:
            try:
                self.model_name = check_model_name(
                    request.model, self.config.allowed_models, default=self.config.model)
            except ModelNameRefused as exc:
                self.emit_nowait(Error(
                    request_id=request.id, in_reply_to=request.id, code=exc.code.value, message=str(exc),
                ))
                return
        if view.tools is not None and self.tool_host is None:
            self.tools = list(view.tools)
        self._active = _ActiveRequest(request.id, trio.CancelScope(), origin=view if view.attached else None)
        if compressing:
            self._nursery.start_soon(self._run_compress, request, self._active)
        else:
            self._nursery.start_soon(self._run_request, request, self._active)

    async def _run_request(self, request: GenerateContentRequest, active: _ActiveRequest) -> None:
        if request.context is not None:
            self.context = request.context
        run = AgentRun(request_id=request.id, model_name=self.model_name, history=self.history,
                       tools=list(self.tools), context=self.context,
                       server_tools=self.server_tools, pace=self.priority.request(),
                       last_prompt_tokens=self.last_prompt_tokens, on_compressed=self.timeline.compressed,
                       running_agents=self.running_agents, agent_slots=self.agent_slots,
                       hooks=self.tool_hooks.bind(request.id),
                       session_id=self.id)
        self.timeline.begin(request.id, self.history)
        error: tuple[ErrorCode, str] | None = None
        if not self.title:
            self.title = make_title(request.prompt)
        recorded = trio.Event()
        assert self._nursery is not None
        self._nursery.start_soon(self._record_start, request.id, recorded)
        try:
            with active.scope:
                def tool_caller(agent_id: int) -> Any:
                    return self._tool_caller(request.id, agent_id)

                try:
                    await run_agent(
                        run, request.prompt, model=self.model, config=self.config,
                        attachments=request.attachments, emit=self.emit, call_tool=tool_caller(0),
                        tool_caller=tool_caller,
                    )
                except TurnLimitExceeded as exc:
                    error = (ErrorCode.TURN_LIMIT, str(exc))
                except ModelError as exc:
                    error = _model_error(exc)
                except Exception as exc:  # a bug must end the request, not the session
                    log.exception("request %s failed", request.id)
                    error = (ErrorCode.INTERNAL, f"internal error: {type(exc).__name__}: {exc}")
        finally:
            # What follows (the turn's save, the next request's start) is
            # written after the record of this one's start.
            run.pace.done()
            with trio.CancelScope(shield=True):
                await recorded.wait()
            self._active = None
            self.last_prompt_tokens = run.last_prompt_tokens
        if active.scope.cancelled_caught and active.stopped_because is not None:
            error = active.stopped_because
        self.turns += 1
        # Durable before finished is sent: a client that saw finished
        # can always resume this history.
        await self._save(request.id)
        if error is not None:
            self.emit_nowait(Error(request_id=request.id, in_reply_to=request.id, code=error[0].value, message=error[1],
                                   usage=run.usage, api=run.api.as_message()))
        else:
            reason = "cancelled" if active.scope.cancelled_caught else "stop"
            self.emit_nowait(Finished(request_id=request.id, usage=run.usage, turns=run.turns, reason=reason,
                                      api=run.api.as_message()))

    async def _run_compress(self, request: Compress, active: _ActiveRequest) -> None:
        """A ``compress`` request: the history compressed (saved before
        ``compressed`` is sent) or, on any failure, as it was."""
        done: Compression | None = None
        error: tuple[ErrorCode, str] | None = None
        recorded = trio.Event()
        assert self._nursery is not None
        self._nursery.start_soon(self._record_start, request.id, recorded)
        try:
            with active.scope:
                try:
                    done = await compress(self.history, model=self.model, model_name=self.model_name,
                                          prompt_tokens=self.last_prompt_tokens or None)
                except CompressionFailed as exc:
                    error = (ErrorCode.INVALID_REQUEST, str(exc))
                except ModelError as exc:
                    error = _model_error(exc)
        finally:
            with trio.CancelScope(shield=True):
                await recorded.wait()
            self._active = None
        if done is not None:
            self.timeline.compressed(list(self.history), done.history)
            self.history[:] = done.history
            self.last_prompt_tokens = done.after_tokens
            await self._save(request.id)
            self.emit_nowait(Compressed(request_id=request.id, before_tokens=done.before_tokens,
                                        after_tokens=done.after_tokens))
            telemetry.current().chat_compression(tokens_before=done.before_tokens, tokens_after=done.after_tokens,
                                                 prompt_id=request.id, session_id=self.id)
        if error is not None:
            self.emit_nowait(Error(request_id=request.id, in_reply_to=request.id, code=error[0].value,
                                   message=error[1]))
        else:
            self.emit_nowait(Finished(request_id=request.id, usage=done.usage if done else Usage(), turns=1,
                                      reason="stop" if done else "cancelled"))

    async def _save(self, request_id: str | None) -> None:
        """Save the history (and the rewind timeline with it): durable on
        return, shielded; a failure is said to the clients."""
        timeline = self.timeline
        archive = timeline.archive if timeline.archive_changed else None
        try:
            with trio.CancelScope(shield=True):
                await self.store.save_turn(self.id, history=self.history, updated=time.time(), turns=self.turns,
                                           title=self.title, model=self.model_name,
                                           timeline=timeline.to_record(), archive=archive)
            if archive is not None:
                timeline.archive_changed = False
        except StoreError as exc:
            self._storage_failed(request_id, exc)

    def _tool_caller(self, request_id: str, agent_id: int = 0) -> Any:
        """How the agent loop calls a tool for ``request_id`` (for the agent
        ``agent_id``: 0 the main agent): on the server (``hello.tools =
        "server"``) or through the client; each of the main agent's calls'
        place in the conversation noted for ``/restore``."""
        if self.tool_host is not None:
            # A sub-agent asks for its tool path once it runs (it is listed).
            running = self.running_agents.get(agent_id) if agent_id else None
            return call_server_tool(
                self.tool_host, request_id=request_id, emit=self.emit, ask=self.approvals.ask, agent_id=agent_id,
                on_call=None if agent_id else (lambda call_id, name, args: self.timeline.note_call(
                    call_id, request_id, name, args, self.history)),
                hooks=self.tool_hooks.bind(request_id),
                agent=running.definition.name if running is not None else "")
        running = self.running_agents.get(agent_id) if agent_id else None
        if running is not None and running.definition.kind == "remote":
            # (1.5) Its call runs as long as the agent may, on the client.
            wait = remote_wait(running.definition, self.config)
            return lambda name, args: self._call_tool(request_id, name, args, agent_id=agent_id, wait=wait)
        return lambda name, args: self._call_tool(request_id, name, args, agent_id=agent_id)

    # --- rewinding (1.4) ------------------------------------------------------------

    def points(self) -> tuple[RewindPoint, ...]:
        """The prompts ``rewind`` can go back to, oldest first."""
        journal = getattr(self.tool_host, "edits", None)
        points = self.timeline.points(self.history)
        out = []
        for i, (mark, text) in enumerate(points):
            files = 0
            if journal is not None:  # the step: this prompt's request and those up to the next prompt
                upto = points[i + 1][0].seq if i + 1 < len(points) else None
                files = journal.count([rid for rid in self.timeline.requests_since(mark.seq or 0)
                                       if upto is None or self.timeline.requests[rid] < upto])
            out.append(RewindPoint(seq=mark.seq or 0, request_id=mark.request_id, prompt=text, files=files))
        return tuple(out)

    async def _rewind(self, message: Rewind, view: View) -> None:
        """``rewind``: refused (a reply to the asker), or the history taken
        back, saved, and said to every view (``rewound``); with
        ``repropose_call_id``, the request that proposes that call again."""
        repropose = message.repropose_call_id is not None
        request_id = message.id if repropose else None

        def refuse(code: ErrorCode, text: str) -> None:
            view.send_direct(Error(code=code.value, message=text, in_reply_to=message.id, request_id=request_id))

        if message.session_id != self.id:
            # The same answer as for any session the caller cannot reach.
            refuse(ErrorCode.UNKNOWN_SESSION, f"no session {quote(message.session_id)} to rewind here (a "
                   "connection rewinds the session it is attached to)")
            return
        if self._active is not None or self._rewinding:
            refuse(ErrorCode.BUSY, "a request is running: a session cannot be rewound until it ends "
                   "(cancel it or wait)")
            return
        if self._nursery is None:
            raise RuntimeError("Session.run must be started before requests are handled")
        try:
            if repropose:
                done = self.timeline.repropose(self.history, message.before_seq, message.repropose_call_id or "")
            else:
                done = self.timeline.rewind(self.history, message.before_seq)
        except RewindRefused as exc:
            refuse(ErrorCode.INVALID_REQUEST, str(exc))
            return
        if message.revert_files and self.tool_host is None:
            refuse(ErrorCode.INVALID_REQUEST, "revert_files: this session's tools run on the client, which "
                   "puts its own files back")
            return
        self._rewinding = True
        try:
            files = await trio.to_thread.run_sync(self._revert_files, done) if message.revert_files else ()
            if done.site is None:
                hide_from = done.mark.seq or message.before_seq
            else:  # the call's own events on; nothing of the turn before it
                hide_from = done.site.seq or self.log.last_seq + 1
            self.timeline.apply(self.history, done, hide_from=hide_from)
            self.turns = len(self.timeline.marks)
            self.last_prompt_tokens = estimated_tokens(self.history)
            log.info("session %s: rewound to before seq %d by %s%s", self.id, message.before_seq, view.label,
                     f" (re-proposing {message.repropose_call_id})" if repropose else "")
            await self._save(request_id)
        finally:
            self._rewinding = False
        rewound = Rewound(before_seq=message.before_seq, prompt=done.prompt, points=len(self.timeline.marks),
                          by=view.label, files=tuple(files))
        if not repropose:
            self.emit_nowait(replace(rewound, in_reply_to=message.id))
            return
        self.emit_nowait(RequestStarted(request_id=message.id, prompt="/restore", client=view.label))
        self._active = _ActiveRequest(message.id, trio.CancelScope(), origin=view if view.attached else None)
        self._nursery.start_soon(self._run_repropose, message, done,
                                 replace(rewound, request_id=message.id,
                                         repropose_call_id=message.repropose_call_id), self._active)

    def _revert_files(self, done: Rewinding) -> list[Any]:
        """Put back, newest first, what the server's edit tools changed from
        the prompt rewound to on (or from the re-proposed call on)."""
        journal = getattr(self.tool_host, "edits", None)
        if journal is None:
            return []
        if done.site is None:
            return journal.revert(self.timeline.requests_since(done.mark.seq or 0))
        call_id = next(cid for cid, site in self.timeline.calls.items() if site is done.site)
        return journal.revert(self.timeline.requests_since(done.site.request_seq or 0), from_call=call_id)

    async def _run_repropose(self, message: Rewind, done: Rewinding, rewound: Rewound,
                             active: _ActiveRequest) -> None:
        """The request a re-proposing ``rewind`` started: ``rewound``, then
        the call proposed again and the turn going on from its answer."""
        await self.emit(rewound)
        run = AgentRun(request_id=message.id, model_name=self.model_name, history=self.history,
                       tools=list(self.tools), context=self.context,
                       server_tools=self.server_tools, pace=self.priority.request(),
                       last_prompt_tokens=self.last_prompt_tokens, on_compressed=self.timeline.compressed,
                       running_agents=self.running_agents, agent_slots=self.agent_slots,
                       hooks=self.tool_hooks.bind(message.id))
        assert done.site is not None
        error: tuple[ErrorCode, str] | None = None
        recorded = trio.Event()
        assert self._nursery is not None
        self._nursery.start_soon(self._record_start, message.id, recorded)
        try:
            with active.scope:
                try:
                    await run_agent(run, "", model=self.model, config=self.config, emit=self.emit,
                                    call_tool=self._tool_caller(message.id), repropose=done.site.part,
                                    tool_caller=lambda agent_id: self._tool_caller(message.id, agent_id))
                except TurnLimitExceeded as exc:
                    error = (ErrorCode.TURN_LIMIT, str(exc))
                except ModelError as exc:
                    error = _model_error(exc)
                except Exception as exc:  # a bug must end the request, not the session
                    log.exception("request %s failed", message.id)
                    error = (ErrorCode.INTERNAL, f"internal error: {type(exc).__name__}: {exc}")
        finally:
            run.pace.done()
            with trio.CancelScope(shield=True):
                await recorded.wait()
            self._active = None
            self.last_prompt_tokens = run.last_prompt_tokens
        if active.scope.cancelled_caught and active.stopped_because is not None:
            error = active.stopped_because
        await self._save(message.id)
        if error is not None:
            self.emit_nowait(Error(request_id=message.id, in_reply_to=message.id, code=error[0].value,
                                   message=error[1], usage=run.usage, api=run.api.as_message()))
        else:
            reason = "cancelled" if active.scope.cancelled_caught else "stop"
            self.emit_nowait(Finished(request_id=message.id, usage=run.usage, turns=run.turns, reason=reason,
                                      api=run.api.as_message()))

    def _storage_failed(self, request_id: str, exc: StoreError) -> None:
        log.error("session %s: %s", self.id, exc)
        # No request_id: this does not end the request, which goes on.
        self.emit_nowait(Error(
            code=ErrorCode.STORAGE_ERROR.value, fatal=False,
            message=f"the server could not save this session ({exc}); it goes on in memory, "
                    "but will not survive a server restart",
        ))

    async def _call_tool(self, request_id: str, name: str, args: dict[str, Any], *,
                         agent_id: int = 0, wait: float | None = None) -> tuple[Any, ToolFailure | None]:
        """Ask the client to run a tool (for the agent ``agent_id``); wait
        for its answer or ``wait`` seconds (default ``tool_timeout``)."""
        if wait is None:
            wait = self.config.tool_timeout
        event = stamp(ToolExecutionRequest(request_id=request_id, tool=name, parameters=args,
                                           timeout=wait, agent_id=agent_id))
        if not agent_id:  # a sub-agent's calls are in its own history, not the conversation
            self.timeline.note_call(event.id, request_id, name, args, self.history)
        pending = _PendingCall(request=event)
        self._pending[event.id] = pending
        if self._active is not None and self._active.origin is not None:
            pending.offered.add(self._active.origin)
        try:
            await self.emit(event)
            with trio.move_on_after(wait):
                await pending.done.wait()
        finally:
            del self._pending[event.id]
        response = pending.response
        if response is None:
            log.warning("session %s: client did not answer %s (%s) within %ss", self.id, event.id, name, wait)
            return None, ToolFailure(
                code="timeout",
                message=f"the client did not answer within {wait:g} seconds",
                hint="the user's machine may be busy or disconnected; do not retry the same call",
            )
        return response.result, response.error

    def _progress(self, message: ToolProgress) -> None:
        """(1.5) A remote sub-agent's text so far, from the client making its
        call: sent on as that sub-agent's ``text_delta`` (at most
        :data:`~.agents.STREAMED_LIMIT` characters a run). Progress on any
        other call, or one no longer waiting, is dropped."""
        pending = self._pending.get(message.request_id)
        if pending is None or pending.done.is_set() or pending.request is None or not pending.request.agent_id:
            return
        agent = self.running_agents.get(pending.request.agent_id)
        if agent is None or agent.definition.kind != "remote" or agent.streamed >= STREAMED_LIMIT:
            return
        content = message.content[:STREAMED_LIMIT - agent.streamed]
        agent.streamed += len(content)
        self.emit_nowait(TextDelta(request_id=pending.request.request_id, content=content,
                                   agent_id=pending.request.agent_id))

    def _resolve_call(self, response: ToolExecutionResponse, view: View) -> None:
        pending = self._pending.get(response.request_id)
        if pending is None or pending.done.is_set():  # answered by another client, or timed out here
            view.send_direct(Error(
                code=ErrorCode.UNEXPECTED_MESSAGE.value, in_reply_to=response.id,
                message=f"tool call {quote(response.request_id)} is no longer waiting for an answer",
            ))
            return
        pending.response = response
        pending.done.set()
        assert pending.request is not None
        self.emit_nowait(ToolCallAnswered(request_id=pending.request.request_id, call_id=response.request_id,
                                          client=view.label))


def _model_error(exc: ModelError) -> tuple[ErrorCode, str]:
    """The error a request ends with when the model call failed."""
    if isinstance(exc, ModelAuthError):
        return ErrorCode.MODEL_AUTH, str(exc)
    code = ErrorCode.RATE_LIMITED if exc.status == 429 else (
        ErrorCode.MODEL_UNAVAILABLE if exc.retryable else ErrorCode.MODEL_ERROR)
    return code, str(exc)


def _ms(timestamp: object) -> int:
    return timestamp if isinstance(timestamp, int) else 0
