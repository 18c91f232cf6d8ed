"""The client end of the protocol: handshake, prompts, local tools, events.

A :class:`ProtocolClient` wraps one :class:`MessageStream`. After
:meth:`ProtocolClient.handshake` it runs a reader task (``run``, started with
``nursery.start``) that hands every server event to the UI's ``on_event``
callback. :meth:`ProtocolClient.run_turn` sends a prompt and waits for its
``finished`` or ``error``. Every message in and out passes a sans-IO
:class:`~gemini_split.protocol.Connection`, which holds the protocol's rules
and the state of the running request (its
:class:`~gemini_split.protocol.tracker.RequestTracker`); this module only
moves text, runs tasks and waits.

Two parts live in modules of their own: the tool calls (running the
server's ``tool_execution_request`` on this client's tools once each,
answering approval questions: :mod:`.calls`) and keeping the session
through a dropped connection (silence probing, reconnecting, resuming:
:mod:`.reconnect`).

The client never imports google-genai: a thin remote client starts fast.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import msgspec
import trio

from gemini_split import __version__, telemetry
from gemini_split.protocol import (
    ApprovalModeChanged,
    Attachment,
    Caller,
    Cancel,
    ClientMessage,
    Checkpoints,
    DeleteSession,
    Restore,
    ListSessions,
    SessionInfo,
    Sessions,
    ASK_USER_CAPABILITY,
    TYPED_PROMPT_LIMIT,
    GetSystemPrompt,
    SystemPrompt,
    Pair,
    PairedBrowsers,
    PairedLink,
    Compress,
    Rewind,
    Rewound,
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
    TOOL_HOOKS_CAPABILITY,
    ToolDiscovery,
    Replay,
    RequestStarted,
    RequestState,
)
from gemini_split.agent_invocation import AGENT_TOOL
from gemini_split.options import DEFAULT_RECONNECT_TIMEOUT
from gemini_split.policy.rules import DEFAULT_TIER, Decision
from gemini_split.stamping import stamp
from gemini_split.transport import (
    ConnectFailed,
    ConnectionBroken,
    ConnectionClosed,
    MessageStream,
    MessageTooLarge,
    TransportError,
)

from .calls import ToolCalls
from gemini_split.tools.approval_mode import ApprovalMode
from gemini_split.tools.executor import ToolExecutor
from .failures import HandshakeFailed, RequestFailed
from .reconnect import Reconnector
from .turn import Turn, TurnOutcome

__all__ = [
    "APPROVALS_CAPABILITY",
    "CLIENT_CAPABILITIES",
    "ConnectionCallback",
    "EventCallback",
    "HandshakeFailed",
    "ProtocolClient",
    "RequestFailed",
    "ServerToolChoice",
    "TurnOutcome",
]

if TYPE_CHECKING:
    from gemini_split.tools.mcp.sources import McpServers

log = logging.getLogger(__name__)

EventCallback = Callable[[ServerEvent], Awaitable[None]]
#: ``on_connection(state, attempt, reason)``: ``"reconnecting"`` before each
#: attempt (1, 2, …; ``reason`` says what was lost), ``"reconnected"`` once
#: the session is resumed.
ConnectionCallback = Callable[[str, int, str], None]
CLIENT_CAPABILITIES = ["client_tools", "tool_deltas"]
#: Listed as well when a person can answer approval questions here.
APPROVALS_CAPABILITY = "tool_approvals"
#: How many times AfterAgent hooks may send a turn back to the model.
MAX_HOOK_RETRIES = 5
#: How long a server whose end closed before the hello got there is given
#: to show what it said before closing (it is already written, or never).
_LAST_WORDS_WAIT = 2.0
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


class ProtocolClient:
    """One connection to a server, handshaken, and the session on it (see
    the module's docstring)."""

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
        self.on_event: EventCallback = on_event or _ignore
        self.on_connection: ConnectionCallback = on_connection or _ignore_connection
        self.handshake_timeout = handshake_timeout
        self.connected: Connected | None = None
        #: The protocol's rules and the running request, for this connection
        #: (replaced by a fresh one on each reconnect).
        self.conn = Connection("client")
        #: Awaited before each prompt is sent: tools that join late (MCP
        #: servers still starting when the connection opened) join here.
        self.before_turn: Callable[[], Awaitable[None]] | None = None
        #: The user's hooks (a ``userfiles.hooks.HookRunner``), or None.
        self.hooks: Any = None
        #: A SessionStart hook's context, sent before the next prompt.
        self.pending_hook_context = ""
        #: The model's text of the last turn (AfterAgent's ``prompt_response``).
        self._last_text = ""
        #: The MCP servers lending tools to this client
        #: (:class:`~gemini_split.tools.mcp.sources.McpServers`), if any.
        self.mcp_servers: McpServers | None = None
        #: Tool names ``tools.exclude`` keeps out of the MCP servers' (for ``/mcp reload``).
        self.mcp_exclude: tuple[str, ...] = ()
        #: (1.5) ``agent_mcp_tools(name)`` → the ``ToolSpec``\ s of sub-agent
        #: ``name``'s own MCP servers (``tools/agent_mcp.py``), sent in its
        #: definition's ``mcp_tools`` to a 1.5 server; None: none.
        self.agent_mcp_tools: Callable[[str], tuple] | None = None
        #: (1.5) The sub-agents' own MCP servers (``tools/agent_mcp.py``'s
        #: ``AgentMcp``), for ``/mcp``; None: none.
        self.agent_mcp: Any = None
        #: Which of the tools the server runs itself (``server_tool:NAME``
        #: capabilities, e.g. ``google_web_search``) to ask for.
        self.wants_server_tool: Callable[[str], bool] = lambda name: True
        #: The local daemon's caller (our key, endpoint and model): sent in
        #: ``hello`` only on a stream that proved the server is our own user.
        self.caller: Caller | None = None
        #: ``--send-api-key``: send ``caller`` to this server too, over a
        #: private stream only.
        self.send_api_key = False
        #: Told the id of each session deleted through this client: what
        #: this client kept of it (its edit journal) goes too.
        self.forget_session: Callable[[str], None] = lambda session_id: None
        #: The ``seq`` of each request's ``request_started`` seen (the
        #: latest few hundred): this client's edits are journaled with it.
        self.request_seqs: dict[str, int] = {}
        self.calls = ToolCalls(self)
        self.reconnector = Reconnector(self, reconnect, reconnect_timeout, probe_after, probe_timeout)
        self._turn: Turn | None = None
        self._replies: dict[str, tuple[trio.Event, list[ServerEvent]]] = {}
        self._closed_reason: str | None = None
        self._send_lock = trio.Lock()
        self._token: str | None = None
        self._role = "driver"
        self._label = ""
        self._handshaking = False
        self._over = trio.Event()
        #: The approval mode the server was last told with ``tool_discovery``
        #: (None: none yet; hello's or the first request's is the session's).
        self._announced_mode: ApprovalMode | None = None

    # --- connection ----------------------------------------------------------

    @property
    def last_seq(self) -> int:
        """The highest seq received: what a resume asks to continue after."""
        return self.conn.last_seq

    @property
    def announced(self) -> bool:
        """Whether requests are announced by ``request_started`` (1.2 on both ends)."""
        return self.conn.announced

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

    async def resume_on(self, stream: MessageStream, conn: Connection) -> Connected:
        """Take a reopened ``stream`` and its fresh ``conn`` (handed over by
        the :class:`~.reconnect.Reconnector`) in place of the lost ones, and
        resume this session on them from where the lost connection stood,
        as the same client. Returns the server's ``connected``.

        Raises what :meth:`handshake` raises, and :class:`TransportError`;
        the lost connection's state is then kept (the next attempt resumes
        from it too) and ``stream`` is closed."""
        assert self.connected is not None
        old = self.conn
        self.stream, self.conn = stream, conn
        try:
            connected = await self.handshake(
                token=self._token, session_id=self.connected.session_id,
                resume_token=self.connected.resume_token, last_seq=old.last_seq,
                role=self._role, label=self._label,
            )
        except (HandshakeFailed, ConnectFailed, TransportError):
            self.conn = old
            await stream.aclose()
            raise
        # Go on from where the old connection was. A 1.2 server said
        # where its live events start (connected); a 1.1 one goes on
        # from our state, leaving out the calls we had not answered:
        # it asks again for them.
        request = old.request
        if conn.announced:
            conn.restore(conn.request, last_seq=old.last_seq)
        else:
            conn.restore(
                RequestState(request.request_id, set(), set(request.awaiting_decision)) if request else None,
                last_seq=old.last_seq,
            )
        self.connected = connected
        self._closed_reason = None
        return connected

    async def resend(self, turn: Turn) -> None:
        """Send ``turn``'s request again after a reconnect: the server never
        got it (our state had it running). Raises what :meth:`send` raises."""
        self.conn.restore(None, last_seq=self.conn.last_seq)
        await self.send(turn.request)

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
    def current_turn(self) -> Turn | None:
        """This client's own running turn, if any."""
        return self._turn

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
        hooks = self.executor.hooks
        hooks_timeout = None
        if hooks is not None and hooks.has_tool_hooks and self._role != "observer":
            # Only with some: a server then asks about every call it runs.
            capabilities.append(TOOL_HOOKS_CAPABILITY)
            hooks_timeout = hooks.longest_tool_round()
        if self.executor.user is not None:
            capabilities.append(ASK_USER_CAPABILITY)
        choice = self.tool_choice
        hello = Hello(client=f"gemini-split/{__version__}", capabilities=capabilities, token=token,
                              session_id=session_id, resume_token=resume_token, last_seq=last_seq,
                              new_session_id=new_session_id,
                              caller=self._caller_for_hello(),
                              tools="server" if choice is not None else "client",
                              project=choice.project if choice is not None else None,
                              approval_mode=choice.approval_mode if choice is not None else None,
                              core_tools=choice.core_tools if choice is not None else None,
                              exclude_tools=choice.exclude_tools if choice is not None else (),
                              role=self._role, label=self._label, replay=replay,  # type: ignore[arg-type]
                              tool_hooks_timeout=hooks_timeout)
        try:
            await self.send(hello)
        except ConnectionBroken as exc:
            # The server may have given up before the hello reached it (its
            # hello timeout): what it said before closing is the reason.
            text = await self._last_words()
            if text is None:
                raise
        else:
            with trio.move_on_after(self.handshake_timeout) as scope:
                try:
                    text = await self.stream.receive()
                except (ConnectionClosed, ConnectionBroken) as exc:
                    raise ConnectFailed(
                        f"the server closed the connection during the handshake: {exc.reason}") from None
            if scope.cancelled_caught:
                raise ConnectFailed(f"the server did not answer the handshake within {self.handshake_timeout:g} s")
        try:
            message = self.conn.receive(text)
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

    async def _last_words(self) -> str | None:
        """What a server that closed its end before our hello arrived had
        sent before closing (a refusal, e.g. its hello timeout), or None:
        the first line still unread, waited for briefly."""
        with trio.move_on_after(_LAST_WORDS_WAIT):
            try:
                return await self.stream.receive()
            except (ConnectionClosed, ConnectionBroken, MessageTooLarge):
                return None
        return None

    async def announce_tools(self) -> None:
        """Tell the server which tools this client offers now, in its
        approval mode now (``tool_discovery``; a later one replaces the
        earlier), and the mode when it changed since the last announcement
        (1.6: a running request's next model turn is told it; a session
        whose tools run on the server switches them). In a session whose
        tools run on the server (``tool_choice``) it offers none of its
        own; server-run tools such as ``google_web_search`` are asked for
        either way."""
        executor = self.executor
        if self.connected is not None:
            executor.session_id = self.connected.session_id  # the plans directory is the session's
        mode = executor.policy.mode
        tools = executor.offered() if self.tool_choice is None else []
        switched = self._announced_mode is not None and mode is not self._announced_mode
        self._announced_mode = mode
        await self.send(ToolDiscovery(tools=tools, server_tools=self.server_tools(),
                                      approval_mode=mode.value if switched else None))

    def _mode_switched_by_server(self, event: ApprovalModeChanged) -> None:
        """The session's approval mode changed on the server, in a session
        whose tools it runs: this client's mode is the session's (taken
        without announcing it back)."""
        try:
            mode = ApprovalMode.DEFAULT if event.mode == "reject_dangerous" else ApprovalMode(event.mode)
        except ValueError:
            log.warning("ignored an unknown approval mode from the server: %.40r", event.mode)
            return
        self._announced_mode = mode
        self.executor.policy.mode = mode

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
        :class:`~.reconnect.Reconnector`) when ``reconnect`` was given."""
        async with trio.open_nursery() as nursery:
            self.reconnector.heard()
            nursery.start_soon(self.reconnector.watch_for_silence)
            task_status.started()
            try:
                while True:
                    await self._read_loop(nursery)
                    self.calls.withdraw_all("the connection to the server was lost")
                    if not await self.reconnector.reconnect(nursery):
                        break
            finally:
                self.calls.withdraw_all("the connection to the server was closed")
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

    def end(self, reason: str) -> None:
        """The connection is over for good, for ``reason``."""
        self._closed_reason = reason

    async def cut(self, reason: str) -> None:
        """End the connection for ``reason`` (the reader then sees it end)."""
        self._closed_reason = reason
        await self.stream.aclose(reason)

    async def aclose(self) -> None:
        await self.stream.aclose()

    # --- requests ------------------------------------------------------------

    async def run_turn(self, prompt: str, *, model: str | None = None,
                       attachments: tuple[Attachment, ...] = (),
                       context: SessionContext | None = None, typed: str = "") -> TurnOutcome:
        """Send a prompt (with ``attachments`` as inline data) and wait until
        the server finishes it (or fails). Events reach ``on_event`` meanwhile.
        ``context`` (context files, approval mode, first-turn environment)
        replaces the session's. ``typed``: what the user typed when
        ``prompt`` is its expansion (a custom command), which every client
        and the session's title show as the prompt (1.6).

        With ``hooks`` (a ``userfiles.hooks.HookRunner``): ``BeforeAgent`` runs
        first (a deny or ``continue: false`` ends the turn unsent, with an
        error of code ``hook_blocked``; its ``additionalContext`` is appended
        to the prompt), a ``SessionStart`` hook's context goes before the
        first prompt, and ``AfterAgent`` runs after a finished turn (a deny
        sends its reason as a new prompt, at most :data:`MAX_HOOK_RETRIES`
        times)."""
        hooks = self.hooks
        if hooks is None:
            return await self._run_turn(prompt, model=model, attachments=attachments, context=context, user=prompt,
                                        typed=typed)
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
        outcome = await self._run_turn(sent, model=model, attachments=attachments, context=context, user=prompt,
                                       typed=typed)
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
                        context: SessionContext | None = None, user: str | None = None,
                        typed: str = "") -> TurnOutcome:
        """``user``: the prompt as the user typed it (telemetry's
        ``gemini_cli.user_prompt``); None for a hook's prompt. ``typed``:
        see :meth:`run_turn`."""
        if self.before_turn is not None:
            await self.before_turn()
        if self._announced_mode is not None and self.executor.policy.mode is not self._announced_mode:
            await self.announce_tools()  # switched since (Shift+Tab, /plan, an editor's set_mode)
        # What of the context a server's version lacks (sub-agents before
        # 1.4; remote or denied ones, their own MCP tools before 1.5) the
        # Connection leaves out (protocol/versions.py).
        if context is not None and context.agents:
            context = msgspec.structs.replace(context, agents=self._judged_agents(context.agents))
        if context is not None and context.agents and self.agent_mcp_tools is not None:
            # (1.5) Each sub-agent's own MCP tools, in its definition.
            own = self.agent_mcp_tools
            context = msgspec.structs.replace(context, agents=tuple(
                msgspec.structs.replace(a, mcp_tools=own(a.name)) if a.kind == "local" and own(a.name) else a
                for a in context.agents))
        request = stamp(GenerateContentRequest(prompt=prompt, model=model, attachments=attachments, context=context,
                                               typed=typed[:TYPED_PROMPT_LIMIT]))
        session_id = self.connected.session_id if self.connected is not None else None
        self.executor.session_id = session_id
        if user is not None:
            telemetry.current().user_prompt(user, prompt_id=request.id, session_id=session_id)
        return await self._run_request(request)

    def _judged_agents(self, agents: tuple) -> tuple:
        """(1.5) ``agents`` as the policy (now, in the current approval
        mode) lets the main agent delegate to them: one a policy rule denies
        — by its name (gemini-cli's "sub-agent name as toolName"), or as
        gemini-cli 0.61's ``invoke_agent`` with its ``agent_name``
        (:mod:`gemini_split.agent_invocation`) — carries that rule's message
        in ``denied`` for the server to refuse its call with (a server older
        than 1.5, which would run it anyway, is not sent it: its
        ``Connection`` leaves it out). Judged before the prompt is sent, an
        ``argsPattern`` sees ``agent_name`` only."""
        policy = getattr(self.executor, "policy", None)
        engine = getattr(policy, "engine", None)
        if engine is None:
            return agents
        judged = []
        for agent in agents:
            verdict = engine.decide(AGENT_TOOL, {"agent_name": agent.name}, policy.mode)
            # The approval modes' own rules (plan mode denies what is not
            # read-only) are not about delegating: only a rule of the user's.
            if verdict.decision is not Decision.DENY or verdict.rule is None \
                    or verdict.rule.priority < DEFAULT_TIER + 1:
                judged.append(agent)
            else:
                judged.append(msgspec.structs.replace(agent, denied=(verdict.reason or "denied by policy")[:4096]))
        return tuple(judged)

    async def compress(self) -> TurnOutcome:
        """(1.3) Ask the server to compress the session's history now: its
        ``compressed`` event (through ``on_event``) and ``finished``, or the
        ``error`` that says why nothing changed. Raises
        :class:`RequestFailed` for a server older than 1.3, which cannot."""
        self._require(Compress, "this server cannot compress a session's history (it speaks protocol {peer}; "
                      "{since} can)")
        if self.hooks is not None:  # advisory: it cannot stop the compression
            await self.hooks.fire("PreCompress", {"trigger": "manual"}, target="manual")
        return await self._run_request(stamp(Compress()))

    def _require(self, message: type[ClientMessage], refusal: str) -> None:
        """Raise :class:`RequestFailed` (``unknown_type``) saying ``refusal``
        (``{peer}``: the version the server speaks, ``{since}``: the one
        that has ``message``) when the server's protocol lacks ``message``."""
        old = self.conn.too_old_for(message)
        if old is not None:
            raise RequestFailed(refusal.format(peer=old.peer, since=old.since), ErrorCode.UNKNOWN_TYPE.value)

    def _check_rewind(self) -> None:
        self._require(Rewind, "this server does not support rewinding (protocol {peer}; {since} can)")

    async def rewind(self, before_seq: int, *, revert_files: bool = False, timeout: float = 30.0) -> Rewound:
        """(1.4) Rewind this session to before the prompt whose
        ``request_started`` had ``before_seq`` (``get_history().points``
        lists them): the server's history becomes what it was then, and
        every attached client (this one too, through ``on_event``) hears
        the returned ``rewound``. ``revert_files`` (tools on the server):
        the server also puts back the files its edit tools changed since.
        Nothing is run again.

        Raises :class:`RequestFailed`: ``busy`` while a request runs,
        ``invalid_request`` for a ``before_seq`` that is no prompt of the
        session, ``unknown_type`` for a server older than 1.4 ("this server
        does not support rewinding")."""
        self._check_rewind()
        assert self.connected is not None
        running = self.conn.request.request_id if self.conn.request is not None else self.turn_request_id
        if running is not None:
            raise RequestFailed(f"request {running} is still running: a session cannot be rewound until it ends "
                                "(cancel it or wait)", ErrorCode.BUSY.value)
        try:
            reply = await self._request(Rewind(session_id=self.connected.session_id, before_seq=before_seq,
                                               revert_files=revert_files), timeout)
        except RequestFailed as exc:
            if exc.code == ErrorCode.UNKNOWN_TYPE.value:
                raise RequestFailed("this server does not support rewinding (protocol 1.3)", exc.code) from None
            raise
        assert isinstance(reply, Rewound)
        return reply

    async def restore_call(self, before_seq: int, call_id: str, *, revert_files: bool = False) -> TurnOutcome:
        """(1.4, ``/restore``) Take the session back to just after the model
        turn that proposed the tool call ``call_id`` — made by the request
        whose ``request_started`` had ``before_seq`` — and run a request that
        proposes that same call again through the usual path (a client tool
        runs here after this client's approval; a server tool asks every
        attached client), then goes on as the turn would have. Returns how
        that request ended (its events reach ``on_event``: ``rewound``
        first). Raises :class:`RequestFailed` as :meth:`rewind` does for a
        server older than 1.4; refusals (``busy``, ``invalid_request`` for a
        call the session no longer has) end the returned outcome."""
        self._check_rewind()
        assert self.connected is not None
        return await self._run_request(stamp(Rewind(session_id=self.connected.session_id, before_seq=before_seq,
                                                    revert_files=revert_files, repropose_call_id=call_id)))

    async def _run_request(self, request: GenerateContentRequest | Compress | Rewind) -> TurnOutcome:
        """Send a request and wait until the server finishes it (or fails)."""
        turn = Turn(request)
        self._turn = turn
        self._last_text = ""
        reconnector = self.reconnector
        try:
            if self._closed_reason is not None and not reconnector.active:
                self._connection_lost(self._closed_reason)
            else:
                try:
                    await self.send(request)
                except (ConnectionClosed, ConnectionBroken) as exc:
                    if not reconnector.possible():
                        self._connection_lost(f"the connection to the server was lost: {exc.reason}")
                    # else: sent again once reconnected, if the server never got it
                except LocalProtocolError as exc:
                    if exc.code is ErrorCode.BUSY and self.conn.phase is not Phase.CLOSED:
                        # Another client's request runs in this session (ours
                        # would be self._turn): the documented refusal, not
                        # sent, as the server would have answered it.
                        running = self.conn.request.request_id if self.conn.request is not None else "?"
                        turn.outcome.error = Error(
                            request_id=request.id, code=ErrorCode.BUSY.value,
                            message=f"the session is busy: another client's request ({running}) is still "
                                    "running; send yours again when it has finished")
                        turn.done.set()
                    elif self.conn.phase is not Phase.CLOSED:
                        raise  # not allowed now for another reason: the caller's bug
                    if not (reconnector.active or reconnector.possible() and reconnector.broken):
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
            await self.send(Cancel(request_id=turn.request_id))
        except (ConnectionClosed, ConnectionBroken):
            if self.reconnector.possible():
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
        self.forget_session(session_id)
        return reply.sessions

    async def pair(self, action: str = "link", browser_id: str | None = None,
                   timeout: float = 10.0) -> PairedLink | PairedBrowsers:
        """(1.4) ``pair``: a one-time browser sign-in code (``link``), the
        user's paired browsers (``list``), or revoke one (``revoke``,
        ``browser_id`` or ``"all"``). Raises :class:`RequestFailed`."""
        self._require(Pair, "this server cannot pair browsers (it speaks protocol {peer}; {since} is needed)")
        reply = await self._request(Pair(action=action, browser_id=browser_id), timeout)
        assert isinstance(reply, PairedLink | PairedBrowsers)
        return reply

    async def restore_checkpoint(self, checkpoint_id: str | None = None, *, apply: bool = False,
                                 timeout: float = 120.0) -> Checkpoints:
        """(1.4) The ``restore`` op for a session whose tools run on the
        server: its checkpoints, what restoring ``checkpoint_id`` would
        change, or (``apply``) the files restored. Raises
        :class:`RequestFailed` (the server's error code; ``unknown_type``
        for a server older than 1.4)."""
        self._require(Restore, "this server cannot restore checkpoints (it speaks protocol {peer}; {since} can)")
        assert self.connected is not None
        reply = await self._request(Restore(session_id=self.connected.session_id, checkpoint_id=checkpoint_id,
                                            apply=apply), timeout)
        assert isinstance(reply, Checkpoints)
        return reply

    async def get_system_prompt(self, context: SessionContext | None = None, timeout: float = 10.0) -> SystemPrompt:
        """(1.4) The system instruction the server would send the model
        with ``context`` (None: the session's last). Raises
        :class:`RequestFailed` (``unknown_type`` from a server older than 1.4)."""
        self._require(GetSystemPrompt, "this server cannot show its system prompt (it speaks protocol {peer}; "
                      "{since} can)")
        reply = await self._request(GetSystemPrompt(context=context), timeout)
        assert isinstance(reply, SystemPrompt)
        return reply

    async def get_state(self, timeout: float = 10.0) -> State:
        """Where the session stands. Raises :class:`RequestFailed`."""
        reply = await self._request(GetState(), timeout)
        assert isinstance(reply, State)
        return reply

    async def probe(self, timeout: float) -> None:
        """Ask for the state only to hear the server answer within
        ``timeout``. Raises :class:`RequestFailed` (code ``timeout``)."""
        await self._request(GetState(), timeout)

    # --- sending and receiving -----------------------------------------------------

    async def send(self, message: ClientMessage | Error) -> None:
        """Check, stamp, encode and write one message. Raises
        :class:`LocalProtocolError` when the protocol does not allow it now
        (nothing is sent), :class:`ConnectionClosed`."""
        if self.reconnector.active and not self._handshaking:
            # Not on a connection being set up: the caller retries once resumed.
            raise ConnectionBroken("the connection is being re-established")
        async with self._send_lock:
            await self.stream.send(self.conn.send(stamp(message)))

    async def _request(self, message: ClientMessage, timeout: float) -> ServerEvent:
        message = stamp(message)
        done = trio.Event()
        box: list[ServerEvent] = []
        self._replies[message.id] = (done, box)
        try:
            await self.send(message)
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

    async def _read_loop(self, nursery: trio.Nursery) -> None:
        while True:
            try:
                text = await self.stream.receive()
                self.reconnector.heard()
            except MessageTooLarge as exc:
                log.warning("dropped a message from the server: %s", exc)
                continue
            except ConnectionBroken as exc:
                self._closed_reason = f"the connection to the server was lost: {exc.reason}"
                self.reconnector.broken = True
                return
            except ConnectionClosed as exc:
                self._closed_reason = self._closed_reason or f"the connection to the server was closed: {exc.reason}"
                return
            try:
                message = self.conn.receive(text)
            except RemoteProtocolError as exc:
                if exc.field == "seq":
                    continue  # replayed after a reconnect, and seen already: each event once
                # Tell the server, keep going: a newer server may send types
                # this client does not know.
                log.warning("ignored a message from the server: %s", exc)
                try:
                    await self.send(Error(code=exc.code.value, message=str(exc), in_reply_to=exc.in_reply_to))
                except (ConnectionClosed, ConnectionBroken, LocalProtocolError):
                    pass
                continue
            await self._dispatch(message, nursery)

    async def _dispatch(self, message: Any, nursery: trio.Nursery) -> None:
        """Hand one server message to whoever waits for it: a reply to its
        request, the tool calls, the UI, the running turn."""
        reply_to = getattr(message, "in_reply_to", None)
        if reply_to in self._replies:
            done, box = self._replies[reply_to]
            box.append(message)
            done.set()
            if not isinstance(message, Error | Rewound):  # every client redraws on rewound, the asker too
                return
        turn = self._turn
        if turn is not None and getattr(message, "request_id", None) == turn.request_id:
            turn.acknowledged = True
        if isinstance(message, RequestStarted) and message.request_id is not None and message.seq is not None:
            self.request_seqs[message.request_id] = message.seq
            if len(self.request_seqs) > 256:
                del self.request_seqs[next(iter(self.request_seqs))]
        if isinstance(message, TextDelta) and turn is not None and message.request_id == turn.request_id \
                and len(self._last_text) < MAX_RESPONSE_FOR_HOOKS:
            self._last_text += message.content
        if isinstance(message, ApprovalModeChanged) and self.tool_choice is not None:
            self._mode_switched_by_server(message)
        if await self.calls.intercept(message, turn, nursery):
            return
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
            self.reconnector.broken = message.code == ErrorCode.SHUTTING_DOWN.value
            await self.stream.aclose(message.message)

    def end_turn(self, turn: Turn, error: Error) -> None:
        """End ``turn`` with ``error`` here: the server will send no end of
        it (it lost the request)."""
        if turn.done.is_set():
            return
        turn.cancel_tools()
        turn.outcome.error = error
        turn.done.set()

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
