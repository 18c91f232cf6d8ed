"""A session: one conversation, its tools, its running request, its events.

The connection handlers feed a session their clients' messages
(:meth:`Session.handle`, naming the :class:`~.views.View` each came from),
already checked by each connection's
:class:`~gemini_split.protocol.Connection` (one request at a time, tool
responses only for pending calls, nothing from observers…); the session
answers through its :class:`Outbox` (events every view gets, numbered and
logged once) or straight to one view (replies). ``cancel`` stops the running
request at once and the session stays usable. Each request is a
:class:`~.request.run.RequestRun` (one ``request_started``, then exactly
one ``finished`` or one ``error`` carrying its ``request_id``); what each
kind does is its body (``features/``).

Several clients: any driver may prompt (a second prompt while one runs is
``busy``) or cancel. A client tool call goes to the client whose prompt
started the request (its *origin*); when the origin is gone, it is handed
over to every attached driver offering the tool
(:class:`~.request.tool_calls.ClientCalls`).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

import trio
from msgspec import UNSET
from msgspec.structs import replace

from gemini_split.protocol import (
    Cancel,
    ClientMessage,
    Compress,
    Error,
    ErrorCode,
    EventLog,
    GenerateContentRequest,
    GetHistory,
    GetState,
    GetSystemPrompt,
    History,
    HookResponse,
    RequestStarted,
    Restore,
    Rewind,
    ServerEvent,
    SessionContext,
    State,
    ToolAwaitingApproval,
    ToolDecision,
    ToolDiscovery,
    ToolExecutionRequest,
    ToolExecutionResponse,
    ToolProgress,
    ToolSpec,
    quote,
)
from gemini_split.transport import Principal

from ..config import ServerConfig
from ..model.base import Model
from ..store import SessionRecord, SessionStore, hash_token
from ..store.memory import MemoryStore
from .broadcast import Broadcast
from .features.agents import remote_progress
from .features.approvals import EDIT_SHARE, Approvals, DecisionRefused
from .features.assembly import start_prompt
from .features.compression import CompressBody, estimated_tokens
from .features.modes import take_announcement
from .features.prompts import system_prompt
from .features.restore_op import answer_restore
from .features.rewind import Timeline
from .features.rewind_op import points, rewind
from .features.server_tools import ToolChoice, ToolHost
from .features.tool_hooks import HookRefused, ToolHooks
from .outbox import Outbox
from .priority import AnswerFirst
from .request.run import Body, RequestRun
from .request.resends import Resends
from .request.saving import Saving
from .request.tool_calls import ClientCalls
from .views import View

#: The owner of sessions opened without authentication (embedded mode, a loopback server without tokens).
LOCAL_OWNER = "local"


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
        self.title, self.turns = "", 0
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
        #: The last model call's prompt size (tokens), which automatic compression compares with its threshold.
        self.last_prompt_tokens = 0
        self.tools: list[ToolSpec] = []
        #: Server-run tools the client asked for (``tool_discovery.server_tools``).
        self.server_tools: tuple[str, ...] = ()
        #: The client's latest SessionContext (context files, approval mode…).
        self.context: SessionContext | None = None
        #: Counts approval mode switches (a running request follows them:
        #: ``features/modes.py``); the most permissive one allowed.
        self.mode_epoch, self.max_approval_mode = 0, "yolo"
        self.log = EventLog(config.replay_capacity, config.replay_bytes)
        self.resends = Resends(self.log)  # a request's id sent again: that request
        #: Where its tools run, as the store keeps it: server-side tools so
        #: chosen, or None (the client's). A restored session keeps it.
        self.tool_choice: ToolChoice | None = None
        #: Where each prompt and tool call sits in the conversation, and
        #: what compressions dropped: what ``rewind`` needs (1.4).
        self.timeline = Timeline()
        #: A rewind is being saved: no request may start meanwhile.
        self.rewinding = False
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
        #: What it writes to its store (written at its first request).
        self.saving = Saving(self, self.store, persisted=record is not None)
        #: The way of its events to every view: outbox, log, views, pump.
        self.events = Broadcast(self.id, self.log, Outbox(config.outbox_limit, max_bytes=config.outbox_bytes))
        self.events.on_logged = self._logged
        self.events.on_view_left = self._view_left
        #: Server-side tools (``hello.tools = "server"``), or None: the
        #: client's tools. Set by :meth:`use_server_tools`.
        self.tool_host: ToolHost | None = None
        #: The questions server-side tools ask the attached clients.
        self.approvals = Approvals(self.emit_nowait,
                                   can_answer=lambda: any(v.approves and v.may_act for v in self.views),
                                   can_answer_questions=lambda: any(v.answers_questions and v.may_act
                                                                    for v in self.views),
                                   edit_limit=config.max_message_size // EDIT_SHARE)
        #: The user's tool hooks around server-side tools, run by a client (1.4).
        self.tool_hooks = ToolHooks(lambda: self._active, lambda: self.views, max_wait=config.tool_timeout)
        #: The tool calls its clients run.
        self.client_calls = ClientCalls(self.id, emit=self.emit, emit_nowait=self.emit_nowait,
                                        active=lambda: self._active, views=lambda: self.views)
        self.events.after_fan_out = self.client_calls.handed_out
        #: (1.4) The running request's sub-agents at work (``state.agents``),
        #: and the slots of the cap on how many run at once.
        self.running_agents: dict[int, Any] = {}
        self.agent_slots = trio.CapacityLimiter(max(1, config.max_subagents))
        #: Called whenever :attr:`busy` turns true or false (the session's
        #: manager publishes it to other replicas' session lists).
        self.busy_changed: Callable[[], None] = lambda: None
        self._active_request: RequestRun | None = None
        self._nursery: trio.Nursery | None = None

    # --- lifetime ------------------------------------------------------------

    @property
    def persisted(self) -> bool:
        """Whether the store has this session yet (written at its first request)."""
        return self.saving.persisted

    def _logged(self, batch: list[tuple[ServerEvent, str]]) -> None:
        """Events were logged (:meth:`Broadcast.log_events`): note the seq
        of each pending call and question, and hand them to the store."""
        for event, _ in batch:
            self.timeline.logged(event)
            self.resends.logged(event)
            if isinstance(event, ToolExecutionRequest):
                self.client_calls.asks.logged(event.id, event)
            elif isinstance(event, ToolAwaitingApproval):
                self.approvals.logged(event)
        if self.config.observe_events is not None:
            self.config.observe_events(self, batch)
        self.saving.logged(batch)

    @property
    def outbox(self) -> Outbox:
        return self.events.outbox

    @property
    def views(self) -> list[View]:
        """The attached views, in the order they joined."""
        return self.events.views

    # --- views ---------------------------------------------------------------

    def _view_left(self, view: View) -> None:
        """Its request's tool calls are handed over to the drivers left;
        a hook it was running will not answer."""
        self.tool_hooks.view_left(view)
        if self._active is not None and self._active.origin is view:
            self._active.origin = None
            self.client_calls.hand_over()

    def catch_up(self, view: View, upto: int) -> None:
        """``view``'s replay (up to seq ``upto``, its attach point) is over:
        ask it again (unlogged) what the session still waits for — the tool
        calls of a request whose origin left (:meth:`hand_over_calls`) and
        the approval questions logged by then and still open (same call ids:
        the first decision from anyone wins; later ones reach it live)."""
        self.client_calls.hand_over(view)
        if view.may_act and view.approves:
            for question in self.approvals.pending():
                if question.seq is not None and question.seq <= upto:
                    view.send_direct(replace(question, id=UNSET, timestamp=UNSET, seq=None))

    def use_server_tools(self, host: ToolHost, choice: ToolChoice, *, approval_timeout: float,
                         max_mode: str = "yolo") -> None:
        """Run this session's tools on the server through ``host`` (closed
        when the session stops; opened for ``choice``), asking approvals for
        up to ``approval_timeout`` seconds each, switching to modes up to
        ``max_mode``."""
        self.tool_host, self.tool_choice = host, choice
        self.tools = host.specs()
        self.approvals.timeout, self.max_approval_mode = approval_timeout, max_mode

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
    def _active(self) -> RequestRun | None:
        """The request running now, if any."""
        return self._active_request

    @_active.setter
    def _active(self, active: RequestRun | None) -> None:
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
        self._active.cancel(because)
        return True

    # --- incoming messages -------------------------------------------------------

    async def handle(self, message: ClientMessage, view: View) -> None:
        """Act on one message from the client of ``view``, which its
        connection's :class:`~gemini_split.protocol.Connection` has accepted
        (so an observer's prompts, cancels and answers never get here).
        Never raises for the client's mistakes: those are answered with
        ``error`` events."""
        if isinstance(message, GenerateContentRequest):
            start_prompt(self, message, view)
        elif isinstance(message, Compress) and not self.refuse_if_busy(message.id, "/compress", view):
            self.emit_nowait(RequestStarted(request_id=message.id, prompt="/compress", client=view.label))
            self.take_tools(view)
            self.start(message.id, CompressBody(self, message.id), view)
        elif isinstance(message, Rewind):
            await rewind(self, message, view)
        elif isinstance(message, ToolExecutionResponse):
            self.client_calls.answer(message, view)
        elif isinstance(message, ToolProgress):
            waiting = self.client_calls.waiting(message.request_id)
            delta = remote_progress(message, waiting.question if waiting else None, self.running_agents)
            if delta is not None:
                self.emit_nowait(delta)
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
            take_announcement(self, message, view)
        elif isinstance(message, Cancel):
            if message.request_id is None or (self._active and self._active.request_id == message.request_id):
                self.cancel_active()
        elif isinstance(message, GetHistory):
            view.send_direct(History(in_reply_to=message.id, messages=list(self.history), points=points(self)))
        elif isinstance(message, GetState):
            view.send_direct(self.state(in_reply_to=message.id))
        elif isinstance(message, Restore):
            await answer_restore(self, view, message)
        elif isinstance(message, GetSystemPrompt):
            view.send_direct(system_prompt(self, message, view))

    def state(self, *, in_reply_to: str | None = None) -> State:
        return State(
            in_reply_to=in_reply_to,
            session_id=self.id,
            model=self.model_name,
            busy=self.busy,
            active_request_id=self._active.request_id if self._active else None,
            pending_tool_calls=sorted(self.client_calls.asks.keys()),
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

    # --- requests ----------------------------------------------------------------

    def refuse_if_busy(self, request_id: str, prompt: str, view: View) -> bool:
        """Refuse (a reply to the asker) a request while another one runs or
        a rewind is being saved; True when it must not start. An id sent
        again (with ``prompt``) is that request, never rerun (``Resends``)."""
        refusal = None
        if self.rewinding:
            refusal = "the session is being rewound by another client; send the prompt again"
        elif self.resends.answer(request_id, prompt, view):
            return True
        elif self._active is not None:
            # Another client's request started first (this one's connection
            # had not heard of it yet).
            refusal = (f"request {quote(self._active.request_id)} (from another client) is still running; "
                       "cancel it or wait")
        if refusal is not None:
            view.send_direct(Error(request_id=request_id, in_reply_to=request_id, code=ErrorCode.BUSY.value,
                                   message=refusal))
        return refusal is not None

    def _request_ended(self) -> None:
        self._active = None

    def take_tools(self, view: View) -> None:
        """A request uses the tools its client announced (unless the server runs the session's own)."""
        if view.tools is not None and self.tool_host is None:
            self.tools = list(view.tools)

    def start(self, request_id: str, body: Body, view: View) -> None:
        """Run ``body`` as the session's request ``request_id``, started by
        ``view`` (its ``request_started`` sent already)."""
        if self._nursery is None:
            raise RuntimeError("Session.run must be started before requests are handled")
        self.saving.starting()  # its start is shown only once stored
        self.resends.started(request_id)
        self._active = RequestRun(request_id, body, origin=view if view.attached else None, priority=self.priority,
                                  record_start=self.saving.record_start, save=self.saving.save,
                                  emit_nowait=self.emit_nowait, on_ended=self._request_ended,
                                  when_delivered=self.events.when_delivered)
        self._nursery.start_soon(self._active.run, self._nursery)
