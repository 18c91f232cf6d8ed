"""The client end of the protocol: handshake, prompts, local tools, events.

A :class:`ProtocolClient` wraps one :class:`MessageStream`. After
:meth:`ProtocolClient.handshake` it runs a reader task (``run``, started with
``nursery.start``) that hands every server event to the UI's ``on_event``
callback, runs each ``tool_execution_request`` locally through the
:class:`ToolExecutor` and answers it. :meth:`ProtocolClient.run_turn` sends a
prompt and waits for its ``finished`` or ``error``. Every message in and out
passes a sans-IO :class:`~gemini_split.protocol.Connection`, which holds the
protocol's rules; this module only moves text, runs tasks and waits.

The client never imports google-genai: a thin remote client starts fast.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import trio

from gemini_split import __version__
from gemini_split.protocol import (
    Attachment,
    Caller,
    Cancel,
    ClientMessage,
    RequestState,
    DeleteSession,
    ListSessions,
    SessionInfo,
    Sessions,
    COMPRESSION_SINCE,
    Compress,
    Connected,
    Connection,
    Error,
    ErrorCode,
    Finished,
    GenerateContentRequest,
    GetHistory,
    GetState,
    Hello,
    History,
    LocalProtocolError,
    Phase,
    RemoteProtocolError,
    ServerEvent,
    SessionContext,
    State,
    TextDelta,
    ToolAwaitingApproval,
    ToolDecided,
    ToolDecision,
    ToolDiscovery,
    Replay,
    ToolCallAnswered,
    ToolCompleted,
    ToolError,
    ToolExecutionRequest,
    ToolExecutionResponse,
)
from gemini_split.options import DEFAULT_RECONNECT_TIMEOUT
from gemini_split.stamping import stamp
from gemini_split.transport import (
    ConnectFailed,
    ConnectionBroken,
    ConnectionClosed,
    MessageStream,
    MessageTooLarge,
    TransportError,
)

from .approval import Answer, ApprovalRequest
from .executor import ToolExecutor
from .reconnect import Backoff
from .tools.base import ToolFailed, ToolKind

log = logging.getLogger(__name__)

EventCallback = Callable[[ServerEvent], Awaitable[None]]
#: ``on_connection(state, attempt, reason)``: ``"reconnecting"`` before each
#: attempt (1, 2, …; ``reason`` says what was lost), ``"reconnected"`` once
#: the session is resumed.
ConnectionCallback = Callable[[str, int, str], None]
#: Answers to tool calls kept for a server that asks again after a reconnect.
_ANSWERS_KEPT = 256

CLIENT_CAPABILITIES = ["client_tools", "tool_deltas"]
#: Listed as well when a person can answer approval questions here.
APPROVALS_CAPABILITY = "tool_approvals"
#: How many times AfterAgent hooks may send a turn back to the model.
MAX_HOOK_RETRIES = 5
#: How much of a turn's text is kept for AfterAgent hooks.
MAX_RESPONSE_FOR_HOOKS = 1024 * 1024


class ServerToolChoice(msgspec.Struct, frozen=True):
    """``--tools server``: the session's tools run on the server, in the
    allowlisted ``project`` (None: a fresh workspace), in ``approval_mode``
    (None: the server's choice — ``default`` when this client can answer
    approvals, else ``reject_dangerous``)."""

    project: str | None = None
    approval_mode: str | None = None
    #: Only these of the server's tools (None: all), and never these.
    core_tools: tuple[str, ...] | None = None
    exclude_tools: tuple[str, ...] = ()


class HandshakeFailed(ConnectFailed):
    """The server answered the handshake with an error, or with nonsense.
    ``code`` is the server's error code when it sent one."""

    def __init__(self, message: str, code: str | None = None):
        super().__init__(message)
        self.code = code


class RequestFailed(TransportError):
    """A request (``get_state``, ``get_history``) got no answer: the server
    replied with an error, the connection ended, or ``timeout`` passed.
    ``code`` is the server's error code, ``connection_lost`` or ``timeout``."""

    def __init__(self, message: str, code: str):
        super().__init__(message)
        self.code = code


class TurnOutcome(msgspec.Struct):
    """How a request ended: exactly one of ``finished`` and ``error``."""

    request_id: str
    finished: Finished | None = None
    error: Error | None = None

    @property
    def cancelled(self) -> bool:
        return self.finished is not None and self.finished.reason == "cancelled"


class _Turn:
    def __init__(self, request: GenerateContentRequest | Compress):
        self.request = request
        self.request_id = request.id
        #: Whether any event of this request arrived (the server has it).
        self.acknowledged = False
        #: A cancel the user asked for while the connection was down.
        self.cancel_pending = False
        self.done = trio.Event()
        self.outcome = TurnOutcome(request.id)
        self.tools_cancelled = False
        self._tool_scopes: set[trio.CancelScope] = set()

    def new_tool_scope(self) -> trio.CancelScope:
        """A scope for one tool call of this turn, cancelled with the turn."""
        scope = trio.CancelScope()
        if self.tools_cancelled:
            scope.cancel()
        self._tool_scopes.add(scope)
        return scope

    def cancel_tools(self) -> None:
        self.tools_cancelled = True
        for scope in self._tool_scopes:
            scope.cancel()


class ProtocolClient:
    def __init__(
        self,
        stream: MessageStream,
        executor: ToolExecutor,
        *,
        on_event: EventCallback | None = None,
        handshake_timeout: float = 15.0,
        probe_after: float = 30.0,
        probe_timeout: float = 15.0,
        reconnect: Callable[[], Awaitable[MessageStream]] | None = None,
        reconnect_timeout: float = DEFAULT_RECONNECT_TIMEOUT,
        on_connection: ConnectionCallback | None = None,
        tool_choice: ServerToolChoice | None = None,
    ):
        self.stream = stream
        self.executor = executor
        #: ``--tools server``: the session's tools run on the server (None: here).
        self.tool_choice = tool_choice
        # Server-side approval questions being asked here, by call id, and
        # the ones answered here (their tool_decided is not news to the UI).
        self._asking: dict[str, trio.CancelScope] = {}
        # The request each question belongs to, and why a question was
        # withdrawn (told to the asker, so that it ends visibly).
        self._asking_request: dict[str, str | None] = {}
        self._withdrawn: dict[str, str] = {}
        self._asked: dict[str, trio.Event] = {}  # set once the question is off the screen
        self._decided_here: OrderedDict[str, None] = OrderedDict()
        self.on_event: EventCallback = on_event or _ignore
        self.handshake_timeout = handshake_timeout
        self.probe_after = probe_after
        self.probe_timeout = probe_timeout
        self._last_heard = 0.0
        self.connected: Connected | None = None
        self._conn = Connection("client")
        self._turn: _Turn | None = None
        self._replies: dict[str, tuple[trio.Event, list[ServerEvent]]] = {}
        self._closed_reason: str | None = None
        self._send_lock = trio.Lock()
        #: Awaited before each prompt is sent: tools that join late (MCP
        #: servers still starting when the connection opened) join here.
        self.before_turn: Callable[[], Awaitable[None]] | None = None
        #: The user's hooks (a ``client.hooks.HookRunner``), or None.
        self.hooks: Any = None
        #: A SessionStart hook's context, sent before the next prompt.
        self.pending_hook_context = ""
        #: The model's text of the last turn (AfterAgent's ``prompt_response``).
        self._last_text = ""
        #: The MCP servers lending tools to this client
        #: (:class:`~gemini_split.client.mcp.sources.McpServers`), if any.
        self.mcp_servers: Any = None
        #: Which of the tools the server runs itself (``server_tool:NAME``
        #: capabilities, e.g. ``google_web_search``) to ask for.
        self.wants_server_tool: Callable[[str], bool] = lambda name: True
        #: Opens a new stream to the same server (None: never reconnect).
        self.reconnect = reconnect
        self.reconnect_timeout = reconnect_timeout
        self.on_connection: ConnectionCallback = on_connection or _ignore_connection
        self._token: str | None = None
        #: The local daemon's caller (our key, endpoint and model): sent in
        #: ``hello`` only on a stream that proved the server is our own user.
        self.caller: Caller | None = None
        #: ``--send-api-key``: send ``caller`` to this server too, over a
        #: private stream only.
        self.send_api_key = False
        self._role = "driver"
        self._label = ""
        #: Set when the peer or the network ended the connection (not us, not
        #: a fatal error): worth reconnecting.
        self._broken = False
        self._reconnecting = False
        self._handshaking = False
        # Tool calls by id: running now, or answered (kept for a server that
        # asks again after a reconnect: a call runs once).
        self._running_calls: set[str] = set()
        self._call_scopes: dict[str, trio.CancelScope] = {}
        self._over = trio.Event()
        self._answers: OrderedDict[str, ToolExecutionResponse] = OrderedDict()

    # --- connection ----------------------------------------------------------

    @property
    def last_seq(self) -> int:
        """The highest seq received: what a resume asks to continue after."""
        return self._conn.last_seq

    async def handshake(self, *, token: str | None = None, session_id: str | None = None,
                        resume_token: str | None = None, last_seq: int | None = None,
                        new_session_id: str | None = None,
                        role: str = "driver", label: str = "", replay: Replay | None = None) -> Connected:
        """Send hello and the tool list; return the server's ``connected``.
        ``session_id`` (an id or ``"latest"``) resumes or attaches to a
        session instead of opening a new one; with ``last_seq`` the server
        replays every event after it, with ``replay`` the turns or times it
        names. ``new_session_id`` opens a new session under that id.
        ``role="observer"`` watches read-only; ``label`` names this client to
        the others attached.

        Raises :class:`HandshakeFailed` (with the server's error code, e.g.
        ``unauthorized`` or ``unknown_session``) or :class:`ConnectFailed`
        when the peer closes, times out or answers with something that is
        not the protocol."""
        self._token = token
        self._role, self._label = role, label
        self._handshaking = True
        try:
            return await self._handshake(token, session_id, resume_token, last_seq, new_session_id, replay)
        finally:
            self._handshaking = False

    def _caller_for_hello(self) -> Caller | None:
        """What ``hello.caller`` carries: ours for a server the transport
        proved is our own user, or (``--send-api-key``) for a server over a
        private stream. Raises :class:`ConnectFailed` rather than send a key
        over a stream that is neither TLS nor on this machine."""
        if self.caller is None or self.stream.same_user:
            return self.caller
        if not self.send_api_key:
            return None
        if not self.stream.private:
            raise ConnectFailed(f"--send-api-key: not sending your API key to {self.stream.peer}: the connection "
                                "is neither TLS (wss://) nor to this machine")
        return self.caller

    @property
    def turn_request_id(self) -> str | None:
        """The request of this client's own running turn, if any."""
        return self._turn.request_id if self._turn is not None else None

    @property
    def observer(self) -> bool:
        """Whether this client watches read-only."""
        return self._role == "observer"

    async def _handshake(self, token: str | None, session_id: str | None, resume_token: str | None,
                         last_seq: int | None, new_session_id: str | None = None,
                         replay: Replay | None = None) -> Connected:
        capabilities = list(CLIENT_CAPABILITIES)
        if self.executor.asker is not None:
            capabilities.append(APPROVALS_CAPABILITY)
        choice = self.tool_choice
        await self._send(Hello(client=f"gemini-split/{__version__}", capabilities=capabilities, token=token,
                               session_id=session_id, resume_token=resume_token, last_seq=last_seq,
                               new_session_id=new_session_id,
                               caller=self._caller_for_hello(),
                               tools="server" if choice is not None else "client",
                               project=choice.project if choice is not None else None,
                               approval_mode=choice.approval_mode if choice is not None else None,
                               core_tools=choice.core_tools if choice is not None else None,
                               exclude_tools=choice.exclude_tools if choice is not None else (),
                               role=self._role, label=self._label, replay=replay))  # type: ignore[arg-type]
        with trio.move_on_after(self.handshake_timeout) as scope:
            try:
                text = await self.stream.receive()
            except (ConnectionClosed, ConnectionBroken) as exc:
                raise ConnectFailed(f"the server closed the connection during the handshake: {exc.reason}") from None
        if scope.cancelled_caught:
            raise ConnectFailed(f"the server did not answer the handshake within {self.handshake_timeout:g} s")
        try:
            message = self._conn.receive(text)
        except RemoteProtocolError as exc:
            preview = text[:200].replace("\n", "\\n")
            raise HandshakeFailed(
                f"the server did not speak the gemini-split protocol ({exc}); it sent: {preview!r}"
                + _stderr_tail(self.stream)
            ) from None
        if isinstance(message, Error):
            raise HandshakeFailed(f"the server refused the connection: {message.message}", code=message.code)
        assert isinstance(message, Connected)
        self.connected = message
        await self.announce_tools()
        return message

    async def announce_tools(self) -> None:
        """Tell the server which tools this client offers now
        (``tool_discovery``; a later one replaces the earlier). In a session
        whose tools run on the server (``tool_choice``) it offers none of its
        own; server-run tools such as ``google_web_search`` are asked for
        either way."""
        tools = self.executor.registry.specs() if self.tool_choice is None else []
        await self._send(ToolDiscovery(tools=tools, server_tools=self.server_tools()))

    def server_tools(self) -> tuple[str, ...]:
        """The server-run tools this client asks for: those the server
        offers that ``wants_server_tool`` accepts."""
        offered = self.connected.capabilities if self.connected is not None else ()
        names = (c.partition(":")[2] for c in offered if c.startswith("server_tool:"))
        return tuple(n for n in names if n and self.wants_server_tool(n))

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Read the server's messages until the connection ends for good.
        Tool calls run in this task's nursery. A connection the peer or the
        network broke is reopened and the session resumed (see
        :meth:`_reconnect`) when ``reconnect`` was given."""
        async with trio.open_nursery() as nursery:
            self._last_heard = trio.current_time()
            nursery.start_soon(self._watch_for_silence)
            task_status.started()
            try:
                while True:
                    await self._read_loop(nursery)
                    # A question cannot outlive its connection: a server that
                    # still waits for it asks again once reconnected.
                    self._withdraw(list(self._asking), "the connection to the server was lost")
                    if not await self._reconnect(nursery):
                        break
            finally:
                self._withdraw(list(self._asking), "the connection to the server was closed")
                self._connection_lost(self._closed_reason or "the connection to the server was closed")
                self._over.set()
                nursery.cancel_scope.cancel()

    async def wait_closed(self) -> None:
        """Wait until the connection has ended for good (reconnects spent)."""
        await self._over.wait()

    @property
    def closed_reason(self) -> str | None:
        """Why the connection ended (None while it is open)."""
        return self._closed_reason

    async def aclose(self) -> None:
        await self.stream.aclose()

    # --- requests ------------------------------------------------------------

    async def run_turn(self, prompt: str, *, model: str | None = None,
                       attachments: tuple[Attachment, ...] = (),
                       context: SessionContext | None = None) -> TurnOutcome:
        """Send a prompt (with ``attachments`` as inline data) and wait until
        the server finishes it (or fails). Events reach ``on_event`` meanwhile.
        ``context`` (context files, approval mode, first-turn environment)
        replaces the session's.

        With ``hooks`` (a ``client.hooks.HookRunner``): ``BeforeAgent`` runs
        first (a deny or ``continue: false`` ends the turn unsent, with an
        error of code ``hook_blocked``; its ``additionalContext`` is appended
        to the prompt), a ``SessionStart`` hook's context goes before the
        first prompt, and ``AfterAgent`` runs after a finished turn (a deny
        sends its reason as a new prompt, at most :data:`MAX_HOOK_RETRIES`
        times)."""
        hooks = self.hooks
        if hooks is None:
            return await self._run_turn(prompt, model=model, attachments=attachments, context=context)
        before = await hooks.fire("BeforeAgent", {"prompt": prompt})
        if before.denied or before.stopped:
            why = before.reason if before.denied else before.stop_reason
            request_id = stamp(GenerateContentRequest(prompt="")).id
            return TurnOutcome(request_id, error=Error(
                request_id=request_id, code="hook_blocked",
                message=f"a BeforeAgent hook blocked this prompt: {why}"))
        sent = prompt
        if before.additional_context:
            sent = f"{sent}\n\n{before.additional_context}"
        if self.pending_hook_context:
            sent, self.pending_hook_context = f"{self.pending_hook_context}\n\n{sent}", ""
        outcome = await self._run_turn(sent, model=model, attachments=attachments, context=context)
        retried = False
        for _ in range(MAX_HOOK_RETRIES):
            if outcome.finished is None or outcome.cancelled or not hooks.has("AfterAgent"):
                break
            after = await hooks.fire("AfterAgent", {"prompt": prompt, "prompt_response": self._last_text,
                                                    "stop_hook_active": retried})
            if after.stopped or not after.denied:
                break
            retried = True
            outcome = await self._run_turn(after.reason, model=model, context=context)
        return outcome

    async def _run_turn(self, prompt: str, *, model: str | None = None,
                        attachments: tuple[Attachment, ...] = (),
                        context: SessionContext | None = None) -> TurnOutcome:
        if self.before_turn is not None:
            await self.before_turn()
        return await self._run_request(stamp(GenerateContentRequest(prompt=prompt, model=model,
                                                                    attachments=attachments, context=context)))

    async def compress(self) -> TurnOutcome:
        """(1.3) Ask the server to compress the session's history now: its
        ``compressed`` event (through ``on_event``) and ``finished``, or the
        ``error`` that says why nothing changed. Raises
        :class:`RequestFailed` for a server older than 1.3, which cannot."""
        if self._conn.version < COMPRESSION_SINCE:
            raise RequestFailed("this server cannot compress a session's history (it speaks protocol "
                                f"{'.'.join(map(str, self._conn.version))}; 1.3 can)", ErrorCode.UNKNOWN_TYPE.value)
        if self.hooks is not None:  # advisory: it cannot stop the compression
            await self.hooks.fire("PreCompress", {"trigger": "manual"}, target="manual")
        return await self._run_request(stamp(Compress()))

    async def _run_request(self, request: GenerateContentRequest | Compress) -> TurnOutcome:
        """Send a request and wait until the server finishes it (or fails)."""
        turn = _Turn(request)
        self._turn = turn
        self._last_text = ""
        try:
            if self._closed_reason is not None and not self._reconnecting:
                self._connection_lost(self._closed_reason)
            else:
                try:
                    await self._send(request)
                except (ConnectionClosed, ConnectionBroken) as exc:
                    if not self._may_reconnect():
                        self._connection_lost(f"the connection to the server was lost: {exc.reason}")
                    # else: sent again once reconnected, if the server never got it
                except LocalProtocolError as exc:
                    if exc.code is ErrorCode.BUSY and self._conn.phase is not Phase.CLOSED:
                        # Another client's request runs in this session (ours
                        # would be self._turn): the documented refusal, not
                        # sent, as the server would have answered it.
                        running = self._conn.request.request_id if self._conn.request is not None else "?"
                        turn.outcome.error = Error(
                            request_id=request.id, code=ErrorCode.BUSY.value,
                            message=f"the session is busy: another client's request ({running}) is still "
                                    "running; send yours again when it has finished")
                        turn.done.set()
                    elif self._conn.phase is not Phase.CLOSED:
                        raise  # not allowed now for another reason: the caller's bug
                    if not (self._reconnecting or self._may_reconnect() and self._broken):
                        self._connection_lost(self._closed_reason or "the server closed the session")
            await turn.done.wait()
        finally:
            self._turn = None
        return turn.outcome

    async def cancel(self) -> None:
        """Cancel the running turn: local tools stop at once, and the server
        is asked to stop (it answers ``finished`` with reason ``cancelled``)."""
        turn = self._turn
        if turn is None:
            return
        turn.cancel_tools()
        try:
            await self._send(Cancel(request_id=turn.request_id))
        except (ConnectionClosed, ConnectionBroken):
            if self._may_reconnect():
                turn.cancel_pending = True  # sent once reconnected
            else:
                self._connection_lost("the connection to the server was lost")

    async def get_history(self, timeout: float = 10.0) -> History:
        """The conversation so far. Raises :class:`RequestFailed`."""
        reply = await self._request(GetHistory(), timeout)
        assert isinstance(reply, History)
        return reply

    async def list_sessions(self, timeout: float = 10.0) -> tuple[SessionInfo, ...]:
        """The caller's sessions on this server, newest first. Raises
        :class:`RequestFailed`."""
        reply = await self._request(ListSessions(), timeout)
        assert isinstance(reply, Sessions)
        return reply.sessions

    async def delete_session(self, session_id: str, timeout: float = 10.0) -> tuple[SessionInfo, ...]:
        """Delete one of the caller's sessions; the ones left. Raises
        :class:`RequestFailed` (``unknown_session`` when there is no such
        session of the caller's)."""
        reply = await self._request(DeleteSession(session_id=session_id), timeout)
        assert isinstance(reply, Sessions)
        return reply.sessions

    async def get_state(self, timeout: float = 10.0) -> State:
        """Where the session stands. Raises :class:`RequestFailed`."""
        reply = await self._request(GetState(), timeout)
        assert isinstance(reply, State)
        return reply

    # --- internals -----------------------------------------------------------

    async def _send(self, message: ClientMessage | Error) -> None:
        """Check, stamp, encode and write one message. Raises
        :class:`LocalProtocolError` when the protocol does not allow it now
        (nothing is sent), :class:`ConnectionClosed`."""
        if self._reconnecting and not self._handshaking:
            # Not on a connection being set up: the caller retries once resumed.
            raise ConnectionBroken("the connection is being re-established")
        async with self._send_lock:
            await self.stream.send(self._conn.send(stamp(message)))

    async def _request(self, message: ClientMessage, timeout: float) -> ServerEvent:
        message = stamp(message)
        done = trio.Event()
        box: list[ServerEvent] = []
        self._replies[message.id] = (done, box)
        try:
            await self._send(message)
            with trio.move_on_after(timeout):
                await done.wait()
        except (ConnectionClosed, ConnectionBroken) as exc:
            raise RequestFailed(f"the connection to the server was lost: {exc.reason}",
                                ErrorCode.CONNECTION_LOST.value) from None
        except LocalProtocolError as exc:  # after a fatal error: closed
            raise RequestFailed(str(exc), ErrorCode.CONNECTION_LOST.value) from None
        finally:
            self._replies.pop(message.id, None)
        if not box:
            raise RequestFailed(f"the server did not answer {message.TYPE} within {timeout:g} s", "timeout")
        reply = box[0]
        if isinstance(reply, Error):
            raise RequestFailed(reply.message, reply.code)
        return reply

    async def _watch_for_silence(self) -> None:
        """Notice a server that vanished without closing (a network
        partition, a frozen host): while a turn runs and nothing has arrived
        for ``probe_after`` seconds, ask for the state; no answer within
        ``probe_timeout`` ends the connection. A live server answers at once,
        even while the model or a tool takes its time."""
        while True:
            await trio.sleep_until(self._last_heard + self.probe_after)
            silent_for = trio.current_time() - self._last_heard
            if self._turn is None or silent_for < self.probe_after:
                if silent_for >= self.probe_after:
                    self._last_heard = trio.current_time()  # idle: nothing to wait for
                continue
            if self._reconnecting:
                self._last_heard = trio.current_time()
                continue
            try:
                await self._request(GetState(), self.probe_timeout)
            except RequestFailed as exc:
                if exc.code != "timeout":
                    self._last_heard = trio.current_time()
                    continue  # the connection is down already: the reader deals with it
                self._closed_reason = (
                    f"the server stopped answering (nothing for {silent_for:.0f} s, "
                    f"and no reply to a probe within {self.probe_timeout:g} s)"
                )
                self._broken = True  # a silent network is worth reconnecting through
                await self.stream.aclose(self._closed_reason)
                self._last_heard = trio.current_time()

    async def _read_loop(self, nursery: trio.Nursery) -> None:
        while True:
            try:
                text = await self.stream.receive()
                self._last_heard = trio.current_time()
            except MessageTooLarge as exc:
                log.warning("dropped a message from the server: %s", exc)
                continue
            except ConnectionBroken as exc:
                self._closed_reason = f"the connection to the server was lost: {exc.reason}"
                self._broken = True
                return
            except ConnectionClosed as exc:
                self._closed_reason = self._closed_reason or f"the connection to the server was closed: {exc.reason}"
                return
            try:
                message = self._conn.receive(text)
            except RemoteProtocolError as exc:
                if exc.field == "seq":
                    continue  # replayed after a reconnect, and seen already: each event once
                # Tell the server, keep going: a newer server may send types
                # this client does not know.
                log.warning("ignored a message from the server: %s", exc)
                try:
                    await self._send(Error(code=exc.code.value, message=str(exc), in_reply_to=exc.in_reply_to))
                except (ConnectionClosed, ConnectionBroken, LocalProtocolError):
                    pass
                continue
            await self._dispatch(message, nursery)

    async def _dispatch(self, message: Any, nursery: trio.Nursery) -> None:
        reply_to = getattr(message, "in_reply_to", None)
        if reply_to in self._replies:
            done, box = self._replies[reply_to]
            box.append(message)
            done.set()
            if not isinstance(message, Error):
                return
        turn = self._turn
        if turn is not None and getattr(message, "request_id", None) == turn.request_id:
            turn.acknowledged = True
        if isinstance(message, TextDelta) and turn is not None and message.request_id == turn.request_id \
                and len(self._last_text) < MAX_RESPONSE_FOR_HOOKS:
            self._last_text += message.content
        if isinstance(message, ToolExecutionRequest) and self._runs_here(message, turn):
            await self._tool_requested(message, nursery)
            return
        if isinstance(message, ToolCallAnswered) and message.call_id in self._running_calls \
                and (turn is None or message.request_id != turn.request_id):
            self._abandon_call(message.call_id)
        if isinstance(message, ToolAwaitingApproval) and self.executor.asker is not None \
                and not message.replayed and not self.observer:
            # A replayed question is history (one still waiting is asked
            # again, unlogged, after the replay).
            if message.call_id not in self._asking:  # asked again after a reconnect: one question
                self._asking[message.call_id] = trio.CancelScope()
                self._asking_request[message.call_id] = message.request_id
                self._asked[message.call_id] = trio.Event()
                nursery.start_soon(self._answer_approval, message)
        elif isinstance(message, ToolDecided):
            if message.call_id in self._asking:
                # Decided elsewhere (the UI shows by whom), expired or cancelled: stop asking.
                self._withdraw([message.call_id], "" if message.decision in ("approve", "approve_always", "deny")
                               else f"the call was {message.decision}")
                asked = self._asked.get(message.call_id)
                if asked is not None:
                    # Said once the menu has gone, not drawn over its last lines.
                    with trio.move_on_after(5):
                        await asked.wait()
            elif message.call_id in self._decided_here:
                return
        elif isinstance(message, ToolCompleted | ToolError | ToolCallAnswered):
            self._withdraw([message.call_id], "the call ended")
        elif isinstance(message, Finished | Error) and message.request_id is not None or \
                isinstance(message, Error) and message.fatal:
            ended = message.request_id
            self._withdraw([call for call, request in self._asking_request.items()
                            if request == ended or ended is None],
                           "the request was interrupted" if isinstance(message, Error) else "the request ended")
        await self.on_event(message)
        if isinstance(message, Finished | Error) and turn is not None:
            belongs = message.request_id == turn.request_id
            if belongs or (isinstance(message, Error) and message.fatal):
                if isinstance(message, Finished):
                    turn.outcome.finished = message
                else:
                    turn.outcome.error = message
                turn.done.set()
        if isinstance(message, Error) and message.fatal:
            self._closed_reason = message.message
            # A server going down for a restart is worth waiting for.
            self._broken = message.code == ErrorCode.SHUTTING_DOWN.value
            await self.stream.aclose(message.message)

    def _runs_here(self, request: ToolExecutionRequest, turn: _Turn | None) -> bool:
        """Whether this client runs a tool call: never a replayed one or as
        an observer; its own prompt's calls, and calls handed over to it
        (their client left). A 1.1 server asks only the one client."""
        if request.replayed or self.observer:
            return False
        if not self._conn.announced:
            return True
        return request.handover or (turn is not None and turn.request_id == request.request_id)

    def _abandon_call(self, call_id: str) -> None:
        """Another client answered a call handed over to this one too: stop it."""
        scope = self._call_scopes.get(call_id)
        if scope is not None:
            scope.cancel()

    async def _tool_requested(self, request: ToolExecutionRequest, nursery: trio.Nursery) -> None:
        """Run a call once, however often the server asks (it asks again
        after a reconnect when it has no answer)."""
        if request.id in self._running_calls:
            return  # the answer goes out when it is done
        answer = self._answers.get(request.id)
        if answer is not None:  # answered, but the answer was lost with the connection
            try:
                await self._send(answer)
            except (ConnectionClosed, ConnectionBroken):
                pass
            return
        self._running_calls.add(request.id)
        nursery.start_soon(self._run_tool, request)

    async def _run_tool(self, request: ToolExecutionRequest) -> None:
        turn = self._turn
        scope = turn.new_tool_scope() if turn is not None and turn.request_id == request.request_id else trio.CancelScope()
        self._call_scopes[request.id] = scope
        result: Any = None
        failure = None
        try:
            with scope:
                result, failure = await self.executor.execute(
                    request.id, request.tool, request.parameters, self.on_event, request_id=request.request_id,
                )
        finally:
            self._call_scopes.pop(request.id, None)
        self._running_calls.discard(request.id)
        if scope.cancelled_caught:
            return  # the server cancelled the request too; nothing to answer
        answer = stamp(ToolExecutionResponse(request_id=request.id, result=result, error=failure))
        self._answers[request.id] = answer
        while len(self._answers) > _ANSWERS_KEPT:
            self._answers.popitem(last=False)
        try:
            await self._send(answer)
        except (ConnectionClosed, ConnectionBroken):
            log.info("could not answer %s now: the connection is down (the server asks again)", request.id)
        except LocalProtocolError as exc:  # the request ended meanwhile, or the call is asked again
            log.info("not answering %s now: %s", request.id, exc)

    def _withdraw(self, call_ids: list[str], reason: str) -> None:
        """Stop asking about these calls (their question is over: decided
        elsewhere, the call or request ended, the connection went).
        ``reason`` is told to the asker ("" when the UI shows it already)."""
        for call_id in call_ids:
            scope = self._asking.get(call_id)
            if scope is not None and not scope.cancel_called:
                self._withdrawn[call_id] = reason
                scope.cancel()

    async def _answer_approval(self, question: ToolAwaitingApproval) -> None:
        """Ask this client's person about a server-side call (the same
        question as for a local one) and send the decision, unless another
        client decided first (then the question is withdrawn)."""
        scope = self._asking[question.call_id]
        message: str | None = None
        answer = Answer.NO
        try:
            with scope:
                try:
                    answer = await self.executor.asker.ask(ApprovalRequest(
                        question.call_id, _ServerTool(question.tool, question.kind), dict(question.parameters),
                        question.description, reason=question.reason, always_scope=question.always_scope,
                        executes_later=question.executes_later,
                    ))
                except ToolFailed as refused:  # "No, and tell the model…": the words go with the refusal
                    words = str(refused)
                    message = words.partition(" and said: ")[2] or words
            if scope.cancelled_caught:
                reason = self._withdrawn.pop(question.call_id, "")
                withdrawn = getattr(self.executor.asker, "withdrawn", None)
                if reason and withdrawn is not None:
                    withdrawn(question.tool, reason)
                return
            verdict = {Answer.YES: "approve", Answer.ALWAYS: "approve_always"}.get(answer, "deny")
            decision = ToolDecision(
                call_id=question.call_id, decision=verdict, approved=verdict != "deny",
                always=verdict == "approve_always", message=message,
                parameters_hash=question.parameters_hash if verdict != "deny" else None,
            )
            self._decided_here[question.call_id] = None
            while len(self._decided_here) > _ANSWERS_KEPT:
                self._decided_here.popitem(last=False)
            self._asking.pop(question.call_id, None)  # its tool_decided must not withdraw it now
            try:
                await self._send(decision)
            except (ConnectionClosed, ConnectionBroken):
                log.info("could not send the decision on %s: the connection is down", question.call_id)
            except LocalProtocolError as exc:  # decided elsewhere meanwhile, or the request ended
                log.info("not sending the decision on %s: %s", question.call_id, exc)
        finally:
            self._asking.pop(question.call_id, None)
            self._asking_request.pop(question.call_id, None)
            self._withdrawn.pop(question.call_id, None)
            asked = self._asked.pop(question.call_id, None)
            if asked is not None:
                asked.set()

    # --- reconnecting ----------------------------------------------------------

    def _may_reconnect(self) -> bool:
        return self.reconnect is not None and self.reconnect_timeout > 0 and self.connected is not None

    async def _reconnect(self, nursery: trio.Nursery) -> bool:
        """After the connection broke: open a new one with jittered backoff
        for up to ``reconnect_timeout`` seconds and resume the session from
        the last seq seen. Returns False when it is over for good (not
        broken by the peer, the server no longer has the session, or no
        server answered in time), with ``_closed_reason`` saying why."""
        if not (self._broken and self._may_reconnect()):
            return False
        assert self.connected is not None and self.reconnect is not None
        self._broken = False
        self._reconnecting = True
        lost_because = self._closed_reason or "the connection to the server was lost"
        last_failure = lost_because
        # Where the lost connection stood: every attempt resumes from here
        # (a failed attempt's fresh state must not replace it).
        old = self._conn
        try:
            for attempt, delay in enumerate(Backoff(timeout=self.reconnect_timeout).delays(), 1):
                await trio.sleep(delay)
                self.on_connection("reconnecting", attempt, lost_because)
                try:
                    with trio.fail_after(self.handshake_timeout):
                        stream = await self.reconnect()
                except (TransportError, trio.TooSlowError) as exc:
                    last_failure = str(exc) or "no answer"
                    continue
                self.stream, self._conn = stream, Connection("client")
                try:
                    connected = await self.handshake(
                        token=self._token, session_id=self.connected.session_id,
                        resume_token=self.connected.resume_token, last_seq=old.last_seq,
                        role=self._role, label=self._label,
                    )
                except HandshakeFailed as exc:
                    self._conn = old
                    await stream.aclose()
                    if exc.code in (ErrorCode.UNKNOWN_SESSION.value, ErrorCode.UNAUTHORIZED.value):
                        self._closed_reason = (
                            f"reconnected, but the server no longer has this session ({exc}); start a new one"
                            if exc.code == ErrorCode.UNKNOWN_SESSION.value else str(exc))
                        return False
                    last_failure = str(exc)
                    continue
                except (ConnectFailed, TransportError) as exc:
                    self._conn = old
                    await stream.aclose()
                    last_failure = str(exc)
                    continue
                # Go on from where the old connection was. A 1.2 server said
                # where its live events start (connected); a 1.1 one goes on
                # from our state, leaving out the calls we had not answered:
                # it asks again for them.
                request = old.request
                if self._conn.announced:
                    self._conn.restore(self._conn.request, last_seq=old.last_seq)
                else:
                    self._conn.restore(
                        RequestState(request.request_id, set(), set(request.awaiting_decision)) if request else None,
                        last_seq=old.last_seq,
                    )
                self.connected = connected
                self._closed_reason = None
                self._last_heard = trio.current_time()
                self.on_connection("reconnected", attempt, "")
                nursery.start_soon(self._after_reconnect)
                return True
            self._closed_reason = (f"{lost_because}; could not reconnect within "
                                   f"{self.reconnect_timeout:g} s ({last_failure})")
            return False
        finally:
            self._reconnecting = False

    async def _after_reconnect(self) -> None:
        """Finish what the cut interrupted: a cancel the user asked for, and
        a prompt the server never got (resent only when ``state`` says it
        is not running it; the replay has arrived by then)."""
        turn = self._turn
        if turn is None or turn.done.is_set():
            return
        try:
            if turn.cancel_pending:
                turn.cancel_pending = False
                await self._send(Cancel(request_id=turn.request_id))
            if not turn.acknowledged:
                state = await self.get_state()
                if not turn.done.is_set() and not turn.acknowledged and state.active_request_id != turn.request_id:
                    # The server never got it: send it again (our state had it running).
                    self._conn.restore(None, last_seq=self._conn.last_seq)
                    await self._send(turn.request)
        except (RequestFailed, ConnectionClosed, ConnectionBroken):
            pass  # down again: the next reconnect tries again

    def _connection_lost(self, reason: str) -> None:
        turn = self._turn
        if turn is not None and not turn.done.is_set():
            turn.cancel_tools()
            turn.outcome.error = Error(
                request_id=turn.request_id, code=ErrorCode.CONNECTION_LOST.value, message=reason, fatal=True,
            )
            turn.done.set()
        for done, box in self._replies.values():
            if not done.is_set():
                box.append(Error(code=ErrorCode.CONNECTION_LOST.value, message=reason, fatal=True))
                done.set()


class _ServerTool(msgspec.Struct, frozen=True):
    """A tool the server runs, as an approval question names it (the UI
    reads ``name`` and ``kind``)."""

    name: str
    kind_name: str = ""

    @property
    def kind(self) -> ToolKind:
        try:
            return ToolKind(self.kind_name)
        except ValueError:
            return ToolKind.EXECUTE  # unknown: shown as the most careful kind

    trusted = False


async def _ignore(event: ServerEvent) -> None:
    return None


def _ignore_connection(state: str, attempt: int, reason: str) -> None:
    return None


def _stderr_tail(stream: MessageStream) -> str:
    """The end of a spawned server's stderr, where the transport keeps one
    (stdio does): usually the real reason a handshake went wrong."""
    tail_of = getattr(stream, "stderr_tail", None)
    tail = tail_of().strip() if callable(tail_of) else ""
    return "\nThe end of its stderr:\n  " + tail.replace("\n", "\n  ") if tail else ""
