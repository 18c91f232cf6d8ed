"""A session: one conversation, its tools, its running request, its events.

The connection handler feeds a session the client's messages
(:meth:`Session.handle`), already checked by the connection's
:class:`~gemini_split.protocol.Connection` (one request at a time, tool
responses only for pending calls…); the session answers through its
:class:`Outbox`. ``cancel`` stops the running request at once and the
session stays usable. Each request ends with exactly one ``finished`` or one
``error`` carrying its ``request_id``.
"""

from __future__ import annotations

import logging
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import trio

from gemini_split.protocol import (
    Cancel,
    ClientMessage,
    RequestState,
    Error,
    ErrorCode,
    EventLog,
    Finished,
    GenerateContentRequest,
    GetHistory,
    GetState,
    History,
    ServerEvent,
    SessionContext,
    State,
    ToolDiscovery,
    ToolExecutionRequest,
    ToolExecutionResponse,
    ToolFailure,
    ToolSpec,
    quote,
)
from gemini_split.stamping import stamp
from gemini_split.transport import Principal

from .agent import SERVER_TOOLS, AgentRun, TurnLimitExceeded, run_agent
from .config import ServerConfig
from .model import Model, ModelAuthError, ModelError
from .model_names import ModelNameRefused, check_model_name
from .outbox import Outbox
from .store import SessionRecord, SessionStore, StoredEvent, StoreError, hash_token, make_title
from .store.memory import MemoryStore

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


@dataclass
class _ActiveRequest:
    request_id: str
    scope: trio.CancelScope
    #: Set when the server (not the user) stopped the request: it then ends
    #: with this error instead of ``finished`` / ``cancelled``.
    stopped_because: tuple[ErrorCode, str] | None = None


class Session:
    """Create with the server's model and config; call :meth:`run` in a
    nursery (via ``nursery.start``) before handing it messages."""

    def __init__(self, *, model: Model, config: ServerConfig, principal: Principal | None = None,
                 store: SessionStore | None = None, record: SessionRecord | None = None,
                 session_id: str | None = None):
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
        self.model = model
        self.config = config
        self.model_name = config.model
        self.history: list[dict[str, Any]] = []
        self.tools: list[ToolSpec] = []
        #: Server-run tools the client asked for (``tool_discovery.server_tools``).
        self.server_tools: tuple[str, ...] = ()
        #: The client's latest SessionContext (context files, approval mode…).
        self.context: SessionContext | None = None
        self.log = EventLog(config.replay_capacity, config.replay_bytes)
        if record is not None:  # restored from the store
            self.id, self.owner, self.token_hash = record.id, record.owner, record.token_hash
            self.resume_token = None
            self.title, self.turns, self.history = record.title, record.turns, record.history
            self.model_name = record.model or config.model
            self.log.last_seq = record.last_seq
            self.persisted = True
        self.outbox = Outbox(config.outbox_limit, max_bytes=config.outbox_bytes)
        self._pending: dict[str, _PendingCall] = {}
        self._active: _ActiveRequest | None = None
        self._nursery: trio.Nursery | None = None

    # --- lifetime ------------------------------------------------------------

    async def _persist(self) -> None:
        """Record this session in the store (raises StoreError)."""
        now = time.time()
        await self.store.create(SessionRecord(
            id=self.id, owner=self.owner, token_hash=self.token_hash,
            created=now, updated=now, model=self.model_name,
        ))

    def log_events(self, events: list[ServerEvent]) -> list[tuple[ServerEvent, str]]:
        """Number events taken from the outbox and encode each once (the
        in-memory event log), and hand them to the store's event log
        (batched off the hot path). Returns them with their text, for
        whoever sends them."""
        batch = [self.log.append(stamp(event)) for event in events]
        for event, _ in batch:
            if isinstance(event, ToolExecutionRequest) and event.id in self._pending:
                self._pending[event.id].seq = event.seq
        if self.persisted:
            self.store.append_events(self.id, [StoredEvent(e.seq or 0, e.request_id, text) for e, text in batch])
        return batch

    @property
    def outbox_pending(self) -> bool:
        return len(self.outbox) > 0

    def request_state(self, *, last_seq: int | None) -> RequestState | None:
        """The running request as a connection resuming after ``last_seq``
        must see it once the replay is over: the calls the client will get
        again (:meth:`resend_pending_calls`) are left out, as the resent
        requests put them back."""
        if self._active is None:
            return None
        resent = set(self._calls_to_resend(last_seq))
        waiting = {cid for cid, p in self._pending.items() if not p.done.is_set() and cid not in resent}
        return RequestState(self._active.request_id, waiting)

    def resend_pending_calls(self, last_seq: int | None) -> None:
        """Ask again (same ids) for the tool calls still unanswered that a
        client resuming after ``last_seq`` had been sent already: it may
        have lost them, or its answer may have been lost. (Later ones are in
        its replay.) The first answer to each is the one taken."""
        for call_id in self._calls_to_resend(last_seq):
            request = self._pending[call_id].request
            assert request is not None
            self.emit_nowait(request)

    def _calls_to_resend(self, last_seq: int | None) -> list[str]:
        return [cid for cid, p in self._pending.items()
                if not p.done.is_set() and p.request is not None and p.seq is not None
                and (last_seq is None or p.seq <= last_seq)]

    async def interrupted(self, request_id: str) -> None:
        """A request was running when the server stopped: end it, for whoever
        resumes, with ``interrupted`` (it is not run again)."""
        # Logged at once, not through the outbox: it is part of what the
        # resuming client replays (its connection state expects it there).
        self.log_events([Error(
            request_id=request_id, code=ErrorCode.INTERRUPTED.value,
            message="interrupted: the server stopped while this request was running; it was not run "
                    "again (the conversation goes on from the last completed answer)",
        )])
        try:
            await self.store.set_running(self.id, None, updated=time.time())
        except StoreError as exc:
            log.error("session %s: %s", self.id, exc)

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Own the session's request tasks until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    @property
    def busy(self) -> bool:
        return self._active is not None

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

    async def handle(self, message: ClientMessage) -> None:
        """Act on one message from the client, which the connection's
        :class:`~gemini_split.protocol.Connection` has accepted. Never raises
        for the client's mistakes: those are answered with ``error`` events."""
        if isinstance(message, GenerateContentRequest):
            self._start_request(message)
        elif isinstance(message, ToolExecutionResponse):
            self._resolve_call(message)
        elif isinstance(message, ToolDiscovery):
            self.tools = list(message.tools)
            self.server_tools = tuple(n for n in message.server_tools if n in SERVER_TOOLS)
        elif isinstance(message, Cancel):
            if message.request_id is None or (self._active and self._active.request_id == message.request_id):
                self.cancel_active()
        elif isinstance(message, GetHistory):
            self.emit_nowait(History(in_reply_to=message.id, messages=list(self.history)))
        elif isinstance(message, GetState):
            self.emit_nowait(self.state(in_reply_to=message.id))

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
        )

    # --- outgoing events -------------------------------------------------------

    async def emit(self, event: ServerEvent) -> None:
        await self.outbox.put(event)

    def emit_nowait(self, event: ServerEvent) -> None:
        self.outbox.put_nowait(event)

    def reply_error(self, code: ErrorCode, text: str, *, in_reply_to: str | None = None,
                    request_id: str | None = None, fatal: bool = False) -> None:
        self.emit_nowait(Error(
            code=code.value, message=text, fatal=fatal, in_reply_to=in_reply_to, request_id=request_id,
        ))

    # --- requests ----------------------------------------------------------------

    def _start_request(self, request: GenerateContentRequest) -> None:
        if self._nursery is None:
            raise RuntimeError("Session.run must be started before requests are handled")
        if self._active is not None:  # the Connection refuses a second request
            raise RuntimeError(f"request {self._active.request_id} is still running")
        if not request.prompt.strip():
            self.emit_nowait(Error(
                request_id=request.id, in_reply_to=request.id, code=ErrorCode.INVALID_REQUEST.value,
                message="the prompt is empty",
            ))
            return
        if request.model:
            try:
                self.model_name = check_model_name(
                    request.model, self.config.allowed_models, default=self.config.model)
            except ModelNameRefused as exc:
                self.emit_nowait(Error(
                    request_id=request.id, in_reply_to=request.id, code=exc.code.value, message=str(exc),
                ))
                return
        self._active = _ActiveRequest(request.id, trio.CancelScope())
        self._nursery.start_soon(self._run_request, request, self._active)

    async def _run_request(self, request: GenerateContentRequest, active: _ActiveRequest) -> None:
        if request.context is not None:
            self.context = request.context
        run = AgentRun(request_id=request.id, model_name=self.model_name, history=self.history,
                       tools=list(self.tools), context=self.context,
                       server_tools=self.server_tools)
        error: tuple[ErrorCode, str] | None = None
        if not self.title:
            self.title = make_title(request.prompt)
        try:
            if not self.persisted:
                await self._persist()
                self.persisted = True
            await self.store.set_running(self.id, request.id, updated=time.time())
        except StoreError as exc:
            self._storage_failed(request.id, exc)
        try:
            with active.scope:
                try:
                    await run_agent(
                        run, request.prompt, model=self.model, config=self.config,
                        attachments=request.attachments,
                        emit=self.emit, call_tool=lambda name, args: self._call_tool(request.id, name, args),
                    )
                except TurnLimitExceeded as exc:
                    error = (ErrorCode.TURN_LIMIT, str(exc))
                except ModelAuthError as exc:
                    error = (ErrorCode.MODEL_AUTH, str(exc))
                except ModelError as exc:
                    code = ErrorCode.RATE_LIMITED if exc.status == 429 else (
                        ErrorCode.MODEL_UNAVAILABLE if exc.retryable else ErrorCode.MODEL_ERROR)
                    error = (code, str(exc))
                except Exception as exc:  # a bug must end the request, not the session
                    log.exception("request %s failed", request.id)
                    error = (ErrorCode.INTERNAL, f"internal error: {type(exc).__name__}: {exc}")
        finally:
            self._active = None
        if active.scope.cancelled_caught and active.stopped_because is not None:
            error = active.stopped_because
        self.turns += 1
        try:
            # Durable before finished is sent: a client that saw finished
            # can always resume this history.
            with trio.CancelScope(shield=True):
                await self.store.save_turn(self.id, history=self.history, updated=time.time(), turns=self.turns,
                                           title=self.title, model=self.model_name)
        except StoreError as exc:
            self._storage_failed(request.id, exc)
        if error is not None:
            self.emit_nowait(Error(request_id=request.id, in_reply_to=request.id, code=error[0].value, message=error[1],
                                   usage=run.usage, api=run.api.as_message()))
        else:
            reason = "cancelled" if active.scope.cancelled_caught else "stop"
            self.emit_nowait(Finished(request_id=request.id, usage=run.usage, turns=run.turns, reason=reason,
                                      api=run.api.as_message()))

    def _storage_failed(self, request_id: str, exc: StoreError) -> None:
        log.error("session %s: %s", self.id, exc)
        # No request_id: this does not end the request, which goes on.
        self.emit_nowait(Error(
            code=ErrorCode.STORAGE_ERROR.value, fatal=False,
            message=f"the server could not save this session ({exc}); it goes on in memory, "
                    "but will not survive a server restart",
        ))

    async def _call_tool(self, request_id: str, name: str, args: dict[str, Any]) -> tuple[Any, ToolFailure | None]:
        """Ask the client to run a tool; wait for its answer or the timeout."""
        event = stamp(ToolExecutionRequest(request_id=request_id, tool=name, parameters=args, timeout=self.config.tool_timeout))
        pending = _PendingCall(request=event)
        self._pending[event.id] = pending
        try:
            await self.emit(event)
            with trio.move_on_after(self.config.tool_timeout):
                await pending.done.wait()
        finally:
            del self._pending[event.id]
        response = pending.response
        if response is None:
            log.warning("session %s: client did not answer %s (%s) within %ss", self.id, event.id, name, self.config.tool_timeout)
            return None, ToolFailure(
                code="timeout",
                message=f"the client did not answer within {self.config.tool_timeout:g} seconds",
                hint="the user's machine may be busy or disconnected; do not retry the same call",
            )
        return response.result, response.error

    def _resolve_call(self, response: ToolExecutionResponse) -> None:
        pending = self._pending.get(response.request_id)
        if pending is None or pending.done.is_set():  # it timed out here meanwhile
            self.reply_error(ErrorCode.UNEXPECTED_MESSAGE,
                             f"tool call {quote(response.request_id)} is no longer waiting for an answer",
                             in_reply_to=response.id)
            return
        pending.response = response
        pending.done.set()
