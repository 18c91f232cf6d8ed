"""The server side of a connection: handshake, reader, writer, session.

:class:`AgentService` is what every transport's listener calls for each new
connection (:meth:`AgentService.handle_connection`). It runs the handshake,
creates a :class:`Session`, then pumps messages both ways until either side
goes away. Every message in and out passes the connection's sans-IO
:class:`~gemini_split.protocol.Connection`, which holds the protocol's rules;
this module only moves text and runs tasks. A malformed, unknown or
out-of-turn message gets an ``error`` event and the connection goes on; only
a broken handshake is fatal.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from gemini_split import __version__
from gemini_split.memory import GiveBackScheduler
from gemini_split.protocol import (
    ASK_USER_CAPABILITY,
    PROTOCOL_VERSION,
    ClientMessage,
    Connected,
    Connection,
    Phase,
    Error,
    ErrorCode,
    DeleteSession,
    Hello,
    LocalProtocolError,
    encode,
    History,
    ListSessions,
    Pair,
    PairedBrowser,
    PairedBrowsers,
    PairedLink,
    ServerMessage,
    Sessions,
    usable_capabilities,
    ReplayUnavailable,
    RemoteProtocolError,
    quote,
    Replay,
)
from gemini_split.stamping import stamp
from msgspec.structs import replace as msgspec_replace
from gemini_split.transport import (
    Authenticator,
    ConnectionBroken,
    ConnectionClosed,
    MessageStream,
    MessageTooLarge,
    Principal,
)

from .model.callers import CallerModels, CallerRefused, ClientModel, accept_caller
from .config import ServerConfig
from .model.base import Model
from .session.priority import AnswerFirst
from .session.session import Session
from .session.manager import AmbiguousSession, RemoteSession, SessionGone, SessionManager, session_infos
from .session.manager import no_such_session as _no_such_session
from .session.views import OBSERVER, AttachPoint, View
from gemini_split.protocol.replay import DEFAULT_ATTACH_REPLAY, ReplayPlan, mark_replayed, plan_replay, replay_from_query
from .store import EventMark, SessionRecord, SessionStore, StoredEvent, StoreError
from .store.memory import MemoryStore
from .session.features.server_tools import APPROVALS_CAPABILITY, ServerTools, ServerToolsRefused, ToolChoice
from .session.features.tool_hooks import runs_tool_hooks

log = logging.getLogger(__name__)

#: ``server_tool:NAME``: a tool this server runs itself, offered to the model
#: when the client names it in ``tool_discovery.server_tools``.
#: Seconds between two attempts to read a replay from Redis while it is
#: away (among replicas).
REPLAY_RETRY = 0.5

SERVER_CAPABILITIES = ["client_tools", "thinking", "cancel", "history", "state", "server_tool:google_web_search"]


class Refused(Exception):
    """A connection is not admitted: the fatal ``error`` it gets (``code``,
    the message, and the hello it answers when that is known)."""

    def __init__(self, code: ErrorCode, text: str, *, in_reply_to: str | None = None):
        super().__init__(text)
        self.code = code
        self.in_reply_to = in_reply_to


class AgentService:
    """All sessions of one server process.

    ``authenticate`` checks the ``hello`` token on transports that did not
    authenticate the connection themselves (None: no auth)."""

    def __init__(self, model: Model, config: ServerConfig, *, authenticate: Authenticator | None = None,
                 store: SessionStore | None = None, callers: CallerModels | None = None,
                 server_tools: ServerTools | None = None, client_model: ClientModel | None = None):
        self.model = model
        #: The local daemon's models by its callers' keys (``hello.caller``);
        #: None: this server takes no caller's key that way.
        self.callers = callers
        #: ``serve --allow-client-credentials``: the model a session runs on
        #: for a client that sent its own key (None: a sent key is refused).
        self.client_model = client_model
        self.config = config
        self.authenticate = authenticate
        #: ``serve --server-tools``: sessions may run tools here (None: never).
        self.server_tools = server_tools
        #: serve --web: the paired browsers (gemini_split.web.pairing.Pairing), None without --web.
        self.pairing: Any = None
        #: Where sessions are kept; opened and closed by whoever runs the
        #: service (``serve``, embedded mode).
        self.store = store if store is not None else MemoryStore(replay_capacity=config.replay_capacity)
        self._store_opened = False
        #: Requests that have not answered go before streams (server/session/priority.py).
        self.priority = AnswerFirst(max_wait=config.answer_first_wait, busy_tasks=config.answer_first_busy_tasks)
        # The store's background writes wait for a burst's first deltas.
        self.priority.on_rush.append(self.store.defer_writes)
        # Once a burst's sessions were unloaded and the server went quiet:
        # release_idle (the models' idle connections, the store's caches),
        # then freed memory goes back to the system (gemini_split/memory.py).
        self.manager = SessionManager(self.store, self._new_session, detached_grace=config.detached_grace,
                                      allow_attach_by_id=config.allow_attach_by_id,
                                      memory=GiveBackScheduler(release=self.release_idle))
        self.manager.on_forwarded = self._run_forwarded
        #: Every attached connection (by its view): its stream and protocol state.
        self._streams: dict[int, tuple[MessageStream, Connection]] = {}
        #: Connections relayed to another replica now.
        self.relays = 0
        self.shutting_down = False

    async def _run_forwarded(self, command: Any) -> None:
        """A relay on another replica forwarded a client's message for a
        session that runs here (replicas only: their code loads here)."""
        from .replicas.relay import run_forwarded

        await run_forwarded(self.manager, command)

    @property
    def _capabilities(self) -> list[str]:
        """What ``connected`` says this server can do (a relay says the same)."""
        return SERVER_CAPABILITIES + (["server_tools"] if self.server_tools else [])

    @property
    def sessions(self) -> dict[str, Session]:
        """The sessions live in memory now (attached or not)."""
        return self.manager.live

    async def open_store(self) -> None:
        """Open the session store, once (later calls return at once).
        Raises :class:`~gemini_split.server.store.StoreError` naming the
        file when it cannot be used."""
        if not self._store_opened:
            await self.store.open()
            self._store_opened = True

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Open the session store and keep sessions running, between and
        after their connections, until cancelled. Start it (``nursery.start``)
        before serving connections; raises :class:`StoreError` when the store
        cannot be opened. (Embedded mode runs it per connection: sessions
        stopped with it are found again in the store.)"""
        await self.open_store()
        await self.manager.run(task_status=task_status)

    def _new_session(self, *, principal: Principal | None, record: SessionRecord | None = None,
                     session_id: str | None = None) -> Session:
        return Session(model=self.model, config=self.config, principal=principal, store=self.store, record=record,
                       session_id=session_id, priority=self.priority)

    async def create_session(self, principal: Principal | None, *, tools: ToolChoice | None = None) -> Session:
        """Open a new session of ``principal`` in this service: the one call
        a face (gRPC, ACP) makes. ``tools``: run its tools on the server —
        approval mode, project, core/exclude tool lists
        (:class:`~gemini_split.server.session.features.server_tools.ToolChoice`; e.g.
        ``ToolChoice(approval_mode="reject_dangerous")``); None: the
        client's tools. Raises :class:`ServerToolsRefused` (with its stable
        code) when this server does not allow that choice, and
        :class:`OSError` when the workspace cannot be created."""
        if tools is not None:
            tools = self._check_tools(tools)
        session = await self.manager.create(principal)
        if tools is not None:
            self.use_server_tools(session, tools)
        return session

    def _check_tools(self, choice: ToolChoice) -> ToolChoice:
        if self.server_tools is None:
            raise ServerToolsRefused(ErrorCode.SERVER_TOOLS_DISABLED,
                                     "this server does not run tools itself (it was not started with "
                                     "serve --server-tools); use tools on the client")
        return self.server_tools.check(choice)

    def use_server_tools(self, session: Session, choice: ToolChoice) -> None:
        """Give ``session`` its server-side tools (its workspace is created
        now). Raises :class:`OSError`."""
        assert self.server_tools is not None
        host = self.server_tools.open_host(session.id, choice)
        session.use_server_tools(host, choice, approval_timeout=self.server_tools.approval_timeout,
                                 max_mode=self.server_tools.max_approval_mode)
        log.info("session %s: tools run on the server (%s, %s)", session.id, choice.approval_mode,
                 f"project {choice.project}" if choice.project else "own workspace")

    async def release_idle(self) -> None:
        """The server went quiet: the models this service owns close their
        idle connections (requests running go on, the next opens new ones)
        and the store lets go of its caches."""
        await self.model.release_idle()
        if self.callers is not None:
            await self.callers.release_idle()
        await self.store.release_idle()

    async def aclose(self) -> None:
        """Close the model this service owns (its HTTP client and TLS
        context) and the session store (what is queued is written first).
        Idempotent; the owner calls it once, after the last connection."""
        await self.model.aclose()
        if self.callers is not None:
            await self.callers.aclose()
        await self.store.aclose()

    async def __aenter__(self) -> AgentService:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        with trio.CancelScope(shield=True):
            await self.aclose()

    def health(self) -> dict[str, Any]:
        """What ``GET /health`` shows: nothing that identifies anyone."""
        return {
            "status": "shutting_down" if self.shutting_down else "ok",
            "version": __version__,
            "protocol_version": PROTOCOL_VERSION,
            "sessions": len(self.sessions),
        }

    async def shutdown(self, *, grace: float = 5.0) -> None:
        """Refuse new sessions, cancel running requests, tell every client
        why, and close their connections (waiting up to ``grace`` seconds for
        the cancellations to be sent)."""
        self.shutting_down = True
        for session in list(self.sessions.values()):
            # interrupted, as after a crash: a client that resumes on the
            # restarted server sees the same ending (the request is not re-run).
            session.cancel_active(because=(ErrorCode.INTERRUPTED,
                                           "the server is shutting down; the request was stopped and will not be re-run"))
        with trio.move_on_after(grace):
            while any(s.busy for s in self.sessions.values()):
                await trio.sleep(0.05)
            await trio.sleep(0.1)  # let writers flush the last events
        # Said to each connection, not logged in its session: a client that
        # resumes on the restarted server must not replay it.
        for stream, conn in list(self._streams.values()):
            await _send_fatal(stream, conn, ErrorCode.SHUTTING_DOWN, "the server is shutting down")

    async def handle_connection(self, stream: MessageStream) -> None:
        """Serve one connection until it closes. Never raises for the peer's
        mistakes."""
        conn = Connection("server", max_message_size=self.config.max_message_size)
        try:
            admitted = await self._admit(stream, conn)
        except Refused as refusal:
            await _send_fatal(stream, conn, refusal.code, str(refusal), in_reply_to=refusal.in_reply_to)
            return
        if admitted is None:  # relayed to the replica that runs the session
            return
        hello, principal, session = admitted
        label = hello.label or "client"
        if principal is not None and principal.user_id != session.owner:
            label = f"{label} ({principal.user_id})"  # another user's client: said whose
        view = View(close=stream.aclose, label=label, role=hello.role,
                    limit=self.config.outbox_limit, max_bytes=self.config.outbox_bytes,
                    approves=APPROVALS_CAPABILITY in hello.capabilities,
                    tool_hooks=runs_tool_hooks(hello), hook_timeout=hello.tool_hooks_timeout,
                    answers_questions=ASK_USER_CAPABILITY in usable_capabilities(hello))
        try:
            point = self.manager.attach(session, view)
        except SessionGone:
            log.info("session %s moved to another replica before the connection was attached", session.id)
            await stream.aclose("the session moved to another replica; reconnect")
            return
        self._streams[id(view)] = (stream, conn)
        resumed = hello.session_id is not None
        log.info("session %s %s for %s (%s, %s %s)", session.id, "attached" if resumed else "opened", _who(principal),
                 stream.peer, view.role, view.label)
        plan: ReplayPlan | None = None
        replay = hello.replay
        if replay is None and hello.session_id is not None and hello.last_seq is None:
            replay = DEFAULT_ATTACH_REPLAY
        try:
            if replay is not None:
                plan = await self._plan_replay(session, replay, point.last_seq)
            async with trio.open_nursery() as nursery:
                await stream.send(conn.send(stamp(Connected(
                    server=f"gemini-split/{__version__}", session_id=session.id,
                    resume_token=session.resume_token, model=session.model_name,
                    model_auth=getattr(session.model, "auth_description", ""),
                    capabilities=self._capabilities,
                    resumed=resumed, clients=len(point.clients), label=view.label, role=view.role,  # type: ignore[arg-type]
                    attached=point.clients, last_seq=point.last_seq,
                    active_request_id=point.active_request_id, pending_tool_calls=point.pending_tool_calls,
                    pending_approvals=point.pending_approvals, replay_truncated=plan is not None and plan.truncated,
                ))))
                conn.restore(conn.request, last_seq=point.last_seq, decided=dict(session.approvals.settled))
                replay_from = hello.last_seq if resumed and plan is None else None
                nursery.start_soon(self._write_events, stream, conn, session, view, point, replay_from, plan,
                                   nursery.cancel_scope)
                await self._read_messages(stream, conn, session, view)
                nursery.cancel_scope.cancel()
        except* (ConnectionClosed, ConnectionBroken):
            # The connection ended (e.g. while `connected` was being sent):
            # inside the nursery that arrives as a group, and is no failure.
            pass
        finally:
            self.manager.detach(session, view)
            self._streams.pop(id(view), None)
            if not self._streams:
                self._streams = {}  # an emptied dict keeps the table of its largest size
            log.info("session %s: connection closed (%s)", session.id, view.cut_off or view.label)

    # --- admission: each check raises one Refused, in this order ---------------------

    async def _admit(self, stream: MessageStream,
                     conn: Connection) -> tuple[Hello, Principal | None, Session] | None:
        """Admit a new connection: its hello, who it is and the session it
        gets, checked in a fixed order (the first refusal is the one said).
        None: the session runs on another replica and the connection was
        relayed there until it ended. Raises :class:`Refused`."""
        hello = await self._handshake(stream, conn)
        principal = self._authenticated(stream, hello)
        caller = self._caller(stream, hello)
        try:
            hello = self._with_replay_query(stream, hello)
            choice = self._requested_tools(hello)
            session = await self._open_session(hello, principal)
        except BaseException:
            if isinstance(caller, Model):  # the client's key: never kept without its session
                with trio.CancelScope(shield=True):
                    await caller.aclose()
            raise
        if isinstance(session, RemoteSession):
            if isinstance(caller, Model):
                # Its key stays here: the replica that runs the session
                # never sees it (nothing of a key goes through Redis).
                await caller.aclose()
            await self._relay(stream, conn, hello, principal, session)
            return None
        if isinstance(caller, Model):
            session.use_client_model(caller)
        elif caller is not None:
            session.model = caller[0] or self.model
            session.model_name = caller[1] or session.model_name
        self._give_tools(session, self._restored_tools(session, choice))
        return hello, principal, session

    async def _handshake(self, stream: MessageStream, conn: Connection) -> Hello:
        with trio.move_on_after(self.config.hello_timeout) as scope:
            text = await stream.receive()
        if scope.cancelled_caught:
            raise Refused(ErrorCode.UNEXPECTED_MESSAGE, f"no hello within {self.config.hello_timeout:g} seconds")
        try:
            message = conn.receive(text)
        except RemoteProtocolError as exc:
            raise Refused(exc.code, f"handshake failed: {exc}", in_reply_to=exc.in_reply_to) from None
        if self.shutting_down:
            raise Refused(ErrorCode.SHUTTING_DOWN, "the server is shutting down")
        assert isinstance(message, Hello)
        return message

    def _authenticated(self, stream: MessageStream, hello: Hello) -> Principal | None:
        """Who the connection is: as its transport authenticated it, or by
        the hello's token where this service checks tokens itself."""
        principal = stream.principal
        if self.authenticate is not None and principal is None:
            principal = self.authenticate(hello.token)
            if principal is None:
                raise Refused(ErrorCode.UNAUTHORIZED, "missing or invalid token")
        return principal

    def _caller(self, stream: MessageStream, hello: Hello) -> Model | tuple[Model | None, str | None] | None:
        """The model on the caller's own key its session runs on: the local
        daemon's (model, model name), or a model of the session's own from
        a client of ``serve --allow-client-credentials`` (None: no caller
        named)."""
        if hello.caller is None:
            return None
        try:
            if self.client_model is not None and not (self.callers is not None and stream.same_user):
                return self.client_model(hello.caller, stream.private)
            return accept_caller(self.callers, hello.caller, same_user=stream.same_user,
                                 default_model=self.config.model, allowed=self.config.allowed_models)
        except CallerRefused as exc:
            raise Refused(exc.code, str(exc)) from None

    def _with_replay_query(self, stream: MessageStream, hello: Hello) -> Hello:
        """The hello with the replay its WebSocket query asks for, when the
        hello names none."""
        if hello.replay is not None or not stream.replay_query:
            return hello
        try:
            return msgspec_replace(hello, replay=replay_from_query(dict(stream.replay_query)))
        except RemoteProtocolError as exc:
            raise Refused(exc.code, str(exc)) from None

    def _requested_tools(self, hello: Hello) -> ToolChoice | None:
        try:
            return self._tool_choice(hello)
        except ServerToolsRefused as exc:
            raise Refused(exc.code, str(exc)) from None

    async def _open_session(self, hello: Hello, principal: Principal | None) -> Session | RemoteSession:
        """The session the hello names (to resume or attach), or a new one."""
        try:
            if hello.session_id is not None:
                session = await self.manager.find(hello.session_id, hello.resume_token, principal,
                                                  last_seq=hello.last_seq)
                if session is None:
                    # The same answer for an id that never existed, another
                    # user's session and a wrong token.
                    raise Refused(ErrorCode.UNKNOWN_SESSION, _no_such_session(hello.session_id))
                return session
            if hello.role == OBSERVER:
                raise Refused(ErrorCode.INVALID_FIELD,
                              "an observer watches an existing session: name it with session_id")
            created = await self.manager.create(principal, session_id=hello.new_session_id)
            if created is None:
                raise Refused(ErrorCode.SESSION_EXISTS, (
                    f"a session with id {quote(hello.new_session_id)} already exists; "
                    "resume it (--resume), or choose another id"))
            return created
        except AmbiguousSession as exc:  # a beginning of several of the caller's ids
            raise Refused(ErrorCode.UNKNOWN_SESSION, str(exc)) from None
        except StoreError as exc:
            # Replicas on Redis: without the store no session can be opened
            # safely here (running ones go on).
            log.warning("refused a session: %s", exc)
            raise Refused(ErrorCode.STORAGE_ERROR, "the session store is unreachable, so this server opens no "
                          "session now; try again shortly") from None

    def _restored_tools(self, session: Session, choice: ToolChoice | None) -> ToolChoice | None:
        """A session restored from the store (after a restart, or taken over
        from another replica) runs its tools where they ran, whatever this
        connection asks."""
        if session.tool_host is None and session.tool_choice is not None:
            try:
                return self._check_tools(session.tool_choice)
            except ServerToolsRefused as exc:
                raise Refused(exc.code, f"this session runs its tools on the server: {exc}") from None
        return choice

    def _give_tools(self, session: Session, choice: ToolChoice | None) -> None:
        if choice is not None and session.tool_host is None:
            try:
                self.use_server_tools(session, choice)
            except OSError as exc:
                log.error("session %s: cannot create its workspace: %s", session.id, exc)
                raise Refused(ErrorCode.INTERNAL, "the server cannot create a workspace for "
                              "this session; its operator has the details in the log") from None

    async def _relay(self, stream: MessageStream, conn: Connection, hello: Hello, principal: Principal | None,
                     remote: RemoteSession) -> None:
        """Serve a client whose session another replica runs."""
        from .replicas.relay import Relay

        relay = Relay(self.manager.replica, stream, conn, remote.record, remote.holder, principal,
                      resume_token=hello.resume_token, last_seq=hello.last_seq,
                      capabilities=self._capabilities, manager=self.manager)
        relay.role, relay.label = hello.role, hello.label or "client"
        relay.answer_pair = self.answer_pair
        self.relays += 1
        try:
            await relay.run()
        except StoreError as exc:
            await _send_fatal(stream, conn, ErrorCode.STORAGE_ERROR, f"the session store is unreachable: {exc}")
        except (ConnectionClosed, ConnectionBroken):
            pass
        finally:
            self.relays -= 1

    async def _plan_replay(self, session: Session, replay: Replay, upto: int) -> ReplayPlan:
        """Which logged events ``replay`` asks for (see ``protocol/replay.py``):
        planned from the store's marks, or from the in-memory log of a
        session not stored yet."""
        marks = None
        if session.persisted:
            try:
                marks = await self.store.event_marks(session.id)
            except StoreError as exc:  # what memory still has will do
                log.error("session %s: %s", session.id, exc)
        if marks is None:
            marks = [EventMark(e.seq or 0, e.timestamp if isinstance(e.timestamp, int) else 0, e.request_id, e.TYPE)
                     for e in session.log.kept()]
        return plan_replay(marks, replay, upto=upto, hidden=session.timeline.hidden)

    async def _write_events(self, stream: MessageStream, conn: Connection, session: Session, view: View,
                            point: AttachPoint, replay_from: int | None, plan: ReplayPlan | None,
                            scope: trio.CancelScope) -> None:
        """Replay what an attaching client asked for (up to the attach
        point), then send what the session hands this view: each event
        numbered and encoded once by the session's pump, checked by this
        connection, then written."""
        try:
            if (plan is not None or replay_from is not None) and session.events.durable is not None:
                # Among replicas a client is shown only what the shared
                # store has, its replay (read from memory) too.
                await session.events.durable(point.last_seq)
            if plan is not None:
                await self._replay_planned(stream, conn, session, view, plan)
            elif replay_from is not None:
                await self._replay(stream, conn, session, view, replay_from, point.last_seq)
            if plan is not None or replay_from is not None:
                session.catch_up(view, point.last_seq)
            while True:
                texts = []
                taken = await view.take()
                if conn.phase is Phase.CLOSED:
                    return  # the client ended the protocol (a fatal error): nothing more goes out
                for event, text in taken:
                    try:
                        # What an older client cannot read is skipped or
                        # converted here (protocol/versions.py).
                        text = conn.send(event, text=text)
                    except LocalProtocolError:
                        # A bug on our side: never put it on the wire.
                        log.exception("session %s: not sending %s", session.id, type(event).__name__)
                        continue
                    if text is not None:
                        texts.append(text)
                if texts:  # all a view that fell behind has queued, in one write
                    await stream.send_many(texts)
        except (ConnectionClosed, ConnectionBroken):
            scope.cancel()

    async def _replay_planned(self, stream: MessageStream, conn: Connection, session: Session, view: View,
                              plan: ReplayPlan) -> None:
        """The planned events, marked ``replayed``, from memory or the store
        (as the client's version may have them: ``Connection.for_peer``)."""
        if plan.seqs:
            wanted = set(plan.seqs)
            first, last = plan.seqs[0], plan.seqs[-1]
            try:
                for event in session.log.since(first - 1):
                    if event.seq is not None and event.seq > last:
                        break
                    if event.seq in wanted:
                        await _send_replayed(stream, conn, event)
            except ReplayUnavailable:
                async def send(stored: StoredEvent) -> None:
                    if stored.seq in wanted:
                        await _send_replayed_text(stream, conn, stored.data)

                try:
                    await self._replay_stored(session, first - 1, last, send)
                except StoreError as exc:
                    _redraw(view, session, _unreadable(first - 1, exc))

    async def _replay_stored(self, session: Session, after: int, upto: int,
                             send: Callable[[StoredEvent], Awaitable[None]]) -> bool:
        """:meth:`SessionManager.replay`; among replicas, while Redis is
        away, it waits and reads on from where it stopped (answers pause
        then too: a client is shown only what Redis has, and gets all of
        it). Alone, a StoreError is raised (the caller says so)."""
        sent = after

        async def send_noted(stored: StoredEvent) -> None:
            nonlocal sent
            await send(stored)
            sent = stored.seq

        while True:
            try:
                return await self.manager.replay(session, sent, upto, send_noted)
            except StoreError as exc:
                if session.events.durable is None:
                    raise
                log.warning("session %s: %s; the replay goes on when Redis is back", session.id, exc)
                await trio.sleep(REPLAY_RETRY)

    async def _replay(self, stream: MessageStream, conn: Connection, session: Session, view: View, last_seq: int,
                      upto: int) -> None:
        """Every logged event after ``last_seq`` up to the attach point,
        marked ``replayed`` (as the client's version may have them), or say
        they are gone."""
        try:
            for event in session.log.since(last_seq):
                if event.seq is not None and event.seq > upto:
                    break
                await _send_replayed(stream, conn, event)
            complete = True
        except ReplayUnavailable:
            async def send(stored: StoredEvent) -> None:
                await _send_replayed_text(stream, conn, stored.data)

            try:
                complete = await self._replay_stored(session, last_seq, upto, send)
            except StoreError as exc:
                _redraw(view, session, _unreadable(last_seq, exc))
                return
        if not complete:
            # Say so, then what a client needs to redraw: no silent gap.
            _redraw(view, session, Error(
                code=ErrorCode.REPLAY_UNAVAILABLE.value,
                message=f"the events after seq {last_seq} are no longer kept; here is the session's state "
                        "and history instead",
            ))

    def _tool_choice(self, hello: Hello) -> ToolChoice | None:
        """The server tools ``hello`` asks for (None: the client's). Raises
        :class:`ServerToolsRefused`."""
        if hello.tools == "client":
            return None
        if self.server_tools is None:
            return self._check_tools(ToolChoice())  # raises server_tools_disabled
        return self.server_tools.choose(hello)

    async def _read_messages(self, stream: MessageStream, conn: Connection, session: Session, view: View) -> None:
        while True:
            try:
                text = await stream.receive()
            except MessageTooLarge as exc:
                view.send_direct(Error(code=ErrorCode.MESSAGE_TOO_LARGE.value, message=str(exc)))
                continue
            except (ConnectionClosed, ConnectionBroken):
                return
            try:
                message = conn.receive(text)
            except RemoteProtocolError as exc:
                log.info("session %s: bad message: %s", session.id, exc, extra={"refusal": "bad message"})
                view.send_direct(Error(code=exc.code.value, message=str(exc), in_reply_to=exc.in_reply_to,
                                       request_id=exc.request_id))
                continue
            assert isinstance(message, ClientMessage) or isinstance(message, Error)
            if isinstance(message, Error):
                log.warning("session %s: client reported %s: %s%s", session.id, message.code, message.message,
                            " (fatal: the connection ends)" if message.fatal else "",
                            extra={"refusal": "client error"})
                if message.fatal:
                    # The client has closed the protocol: nothing more may be
                    # sent (the writer is cancelled before it runs again).
                    return
                continue
            if isinstance(message, ListSessions | DeleteSession):
                await self._answer_sessions(session, view, message)
                continue
            if isinstance(message, Pair):
                view.send_direct(await self.answer_pair(session.principal, message, where=f"session {session.id}",
                                                        paired_browser=stream.paired_browser))
                continue
            await session.handle(message, view)

    async def _answer_sessions(self, session: Session, view: View, message: ListSessions | DeleteSession) -> None:
        """``list_sessions`` / ``delete_session``: only ever the caller's
        own sessions."""
        try:
            if isinstance(message, DeleteSession):
                if message.session_id == session.id:
                    view.send_direct(Error(code=ErrorCode.INVALID_REQUEST.value, in_reply_to=message.id,
                                           message="this connection's own session cannot be deleted through it"))
                    return
                if not await self.manager.delete(message.session_id, session.principal):
                    view.send_direct(Error(code=ErrorCode.UNKNOWN_SESSION.value, in_reply_to=message.id,
                                           message=_no_such_session(message.session_id)))
                    return
                if self.server_tools is not None:
                    self.server_tools.remove_workspace(message.session_id)
            summaries = await self.manager.list_sessions(session.principal)
        except StoreError as exc:
            view.send_direct(Error(code=ErrorCode.STORAGE_ERROR.value, in_reply_to=message.id,
                                   message=f"the server cannot read its sessions: {exc}"))
            return
        running, attached = await self.manager.activity(s.id for s in summaries)
        view.send_direct(Sessions(in_reply_to=message.id, sessions=session_infos(summaries, running, attached)))

    async def answer_pair(self, principal: Principal | None, message: Pair, *, where: str,
                          paired_browser: str | None = None) -> ServerMessage:
        """(1.4) The answer to ``pair``: a sign-in code, the list of paired
        browsers, or a revocation — always for ``principal``'s own user.
        Kept in the session store (shared by replicas with Redis: a relay
        answers it too). ``where``: for the log. From a paired browser's
        connection (``paired_browser``, its id) only the list: a cookie
        never mints or revokes sign-ins, so revoking a browser leaves
        nothing it paired behind."""
        if self.pairing is None:
            return Error(code=ErrorCode.INVALID_REQUEST.value, in_reply_to=message.id,
                         message="this server serves no web page: start it with serve --web")
        if paired_browser is not None and message.action != "list":
            log.warning("%s: browser %s asked to %s a pairing: refused", where, paired_browser, message.action)
            return Error(code=ErrorCode.FORBIDDEN.value, in_reply_to=message.id,
                         message="a paired browser cannot pair or sign out browsers: run gemini-split pair "
                                 "(or --revoke) in a terminal signed in with your token")
        user = principal.user_id if principal is not None else ""
        try:
            if message.action == "link":
                code, code_id, expires = await self.pairing.new_code(user, principal.permissions if principal else ())
                log.info("%s: a pairing code %s for user %s", where, code_id, user or "(local)")
                return PairedLink(in_reply_to=message.id, code=code, code_id=code_id, expires=int(expires * 1000))
            if message.action == "revoke":
                if not message.browser_id or not await self.pairing.revoke(user, message.browser_id):
                    return Error(code=ErrorCode.INVALID_FIELD.value, in_reply_to=message.id,
                                 message=f"no paired browser {message.browser_id!r} of yours "
                                         "(gemini-split pair --list shows them)")
            elif message.action != "list":
                return Error(code=ErrorCode.INVALID_REQUEST.value, in_reply_to=message.id,
                             message=f"unknown pair action {message.action!r} (link, list, revoke)")
            browsers = await self.pairing.browsers(user)
        except StoreError as exc:
            return Error(code=ErrorCode.STORAGE_ERROR.value, in_reply_to=message.id,
                         message=f"the server cannot reach its paired browsers: {exc}")
        return PairedBrowsers(in_reply_to=message.id, browsers=tuple(
            PairedBrowser(id=b.id, created=int(b.created * 1000), last_used=int(b.last_used * 1000),
                          user_agent=b.user_agent)
            for b in browsers))


def _unreadable(last_seq: int, exc: StoreError) -> Error:
    """The error a replay the store could not read ends with (not fatal)."""
    return Error(code=ErrorCode.STORAGE_ERROR.value,
                 message=f"the events after seq {last_seq} could not be read from the session store ({exc}); "
                         "here is the session's state and history instead")


def _redraw(view: View, session: Session, error: Error) -> None:
    """Tell ``view`` why its replay stopped, then what a client needs to
    redraw: no silent gap, and the connection goes on."""
    view.send_direct(error)
    view.send_direct(session.state())
    view.send_direct(History(messages=list(session.history)))


async def _send_replayed(stream: MessageStream, conn: Connection, event: ServerMessage) -> None:
    sent = conn.for_peer(event)
    if sent is not None:
        await stream.send(mark_replayed(encode(sent)))


async def _send_replayed_text(stream: MessageStream, conn: Connection, text: str) -> None:
    sent = conn.text_for_peer(text)
    if sent is not None:
        await stream.send(mark_replayed(sent))


async def _send_fatal(stream: MessageStream, conn: Connection, code: ErrorCode, text: str,
                      *, in_reply_to: str | None = None) -> None:
    try:
        await stream.send(conn.send(stamp(Error(code=code.value, message=text, fatal=True, in_reply_to=in_reply_to))))
    except (ConnectionClosed, ConnectionBroken, LocalProtocolError):
        pass
    await stream.aclose(text)


def _who(principal: Principal | None) -> str:
    return principal.user_id if principal else "anonymous"


def create_model(name: str, *, api_key: str | None = None, base_url: str | None = None,
                 auth: Any = None) -> Model:
    """The model behind a server: ``scripted:FILE`` replays a script,
    anything else is a Gemini model name (google-genai imported here),
    reached with ``auth`` (a :class:`~.model.credentials.ModelAuth`) or ``api_key``."""
    if name.startswith("scripted:"):
        from .model.scripted import ScriptedModel

        return ScriptedModel.from_file(name.removeprefix("scripted:"))
    from .model.gemini import GeminiModel

    if auth is None and not api_key:
        raise ValueError("an API key is required for the Gemini API")
    return GeminiModel(api_key, base_url=base_url, auth=auth)
