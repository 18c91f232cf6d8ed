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
from typing import Any

import trio

from gemini_split import __version__
from gemini_split.protocol import (
    PROTOCOL_VERSION,
    ClientMessage,
    Connected,
    Connection,
    Error,
    ErrorCode,
    DeleteSession,
    Hello,
    LocalProtocolError,
    encode,
    History,
    ListSessions,
    SessionInfo,
    Sessions,
    ReplayUnavailable,
    RemoteProtocolError,
    TextDelta,
    ThinkingDelta,
    ToolDelta,
    quote,
)
from gemini_split.stamping import stamp
from gemini_split.transport import (
    Authenticator,
    ConnectionBroken,
    ConnectionClosed,
    MessageStream,
    MessageTooLarge,
    Principal,
)

from .callers import CallerModels, CallerRefused, accept_caller
from .config import ServerConfig
from .model import Model
from .session import Session
from .sessions import LATEST, SessionManager, View
from .store import SessionRecord, SessionStore, StoreError
from .store.memory import MemoryStore

log = logging.getLogger(__name__)

#: ``server_tool:NAME``: a tool this server runs itself, offered to the model
#: when the client names it in ``tool_discovery.server_tools``.
SERVER_CAPABILITIES = ["client_tools", "thinking", "cancel", "history", "state", "server_tool:google_web_search"]


class AgentService:
    """All sessions of one server process.

    ``authenticate`` checks the ``hello`` token on transports that did not
    authenticate the connection themselves (None: no auth)."""

    def __init__(self, model: Model, config: ServerConfig, *, authenticate: Authenticator | None = None,
                 store: SessionStore | None = None, callers: CallerModels | None = None):
        self.model = model
        #: The local daemon's models by its callers' keys (``hello.caller``);
        #: None: this server takes no caller's key (every other server).
        self.callers = callers
        self.config = config
        self.authenticate = authenticate
        #: Where sessions are kept; opened and closed by whoever runs the
        #: service (``serve``, embedded mode).
        self.store = store if store is not None else MemoryStore(replay_capacity=config.replay_capacity)
        self._store_opened = False
        self.manager = SessionManager(self.store, self._new_session, detached_grace=config.detached_grace)
        #: The connection attached to each session: its stream and protocol state.
        self._streams: dict[str, tuple[MessageStream, Connection]] = {}
        self.shutting_down = False

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
                       session_id=session_id)

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
        hello = await self._handshake(stream, conn)
        if hello is None:
            return
        principal = stream.principal
        if self.authenticate is not None and principal is None:
            principal = self.authenticate(hello.token)
            if principal is None:
                await _send_fatal(stream, conn, ErrorCode.UNAUTHORIZED, "missing or invalid token")
                return
        caller = None
        if hello.caller is not None:  # the local daemon: the session runs on its caller's key
            try:
                caller = accept_caller(self.callers, hello.caller, same_user=stream.same_user,
                                       default_model=self.config.model, allowed=self.config.allowed_models)
            except CallerRefused as exc:
                await _send_fatal(stream, conn, exc.code, str(exc))
                return
        if hello.session_id is not None:
            session = await self.manager.find(hello.session_id, hello.resume_token, principal, last_seq=hello.last_seq)
            if session is None:
                # The same answer for an id that never existed, another
                # user's session and a wrong token.
                await _send_fatal(stream, conn, ErrorCode.UNKNOWN_SESSION, _no_such_session(hello.session_id))
                return
        else:
            session = await self.manager.create(principal, session_id=hello.new_session_id)
            if session is None:
                await _send_fatal(stream, conn, ErrorCode.SESSION_EXISTS, (
                    f"a session with id {quote(hello.new_session_id)} already exists; "
                    "resume it (--resume), or choose another id"))
                return
        if caller is not None:
            session.model = caller[0] or self.model
            session.model_name = caller[1] or session.model_name
        view = View(close=stream.aclose)
        await self.manager.attach(session, view)
        self._streams[session.id] = (stream, conn)
        resumed = hello.session_id is not None
        log.info("session %s %s for %s (%s)", session.id, "resumed" if resumed else "opened", _who(principal), stream.peer)
        try:
            async with trio.open_nursery() as nursery:
                await stream.send(conn.send(stamp(Connected(
                    server=f"gemini-split/{__version__}", session_id=session.id,
                    resume_token=session.resume_token, model=session.model_name,
                    capabilities=SERVER_CAPABILITIES, resumed=resumed,
                ))))
                if resumed:
                    conn.restore(session.request_state(last_seq=hello.last_seq), last_seq=session.log.last_seq)
                replay_from = hello.last_seq if resumed else None
                nursery.start_soon(self._write_events, stream, conn, session, replay_from, nursery.cancel_scope)
                await self._read_messages(stream, conn, session)
                nursery.cancel_scope.cancel()
        except* (ConnectionClosed, ConnectionBroken):
            # The connection ended (e.g. while `connected` was being sent):
            # inside the nursery that arrives as a group, and is no failure.
            pass
        finally:
            self.manager.detach(session, view)
            if self._streams.get(session.id, (None,))[0] is stream:
                del self._streams[session.id]
            log.info("session %s: connection closed", session.id)

    async def _write_events(self, stream: MessageStream, conn: Connection, session: Session,
                            replay_from: int | None, scope: trio.CancelScope) -> None:
        """Replay what a resuming client missed, then send events as they
        gather, each numbered and encoded once by the event log, checked by
        the connection, then written. (This task is the session's only
        taker of events while attached.)"""
        try:
            if replay_from is not None:
                await self._replay(stream, session, replay_from)
            while True:
                batch = session.log_events(await session.outbox.take())
                started = trio.current_time()
                for event, text in batch:
                    try:
                        conn.send(event, text=text)
                    except LocalProtocolError:
                        # A bug on our side: never put it on the wire.
                        log.exception("session %s: not sending %s", session.id, type(event).__name__)
                        continue
                    await stream.send(text)
                # Back-pressure: after a write that took d seconds, let
                # events gather for a few times as long while a stream is
                # under way (see GATHER_FACTOR).
                spent = trio.current_time() - started
                if spent > 0 and batch and isinstance(batch[-1][0], _DELTAS):
                    await trio.sleep(min(GATHER_FACTOR * spent, GATHER_LIMIT))
        except (ConnectionClosed, ConnectionBroken):
            scope.cancel()

    async def _replay(self, stream: MessageStream, session: Session, last_seq: int) -> None:
        """Every logged event after ``last_seq``, as first sent (checked by
        the connection then: the client's restored state continues from
        them), or say they are gone."""
        try:
            for event in session.log.since(last_seq):
                await stream.send(encode(event))
            complete = True
        except ReplayUnavailable:
            complete = await self.manager.replay(session, last_seq, lambda e: stream.send(e.data))
        if not complete:
            # Say so, then what a client needs to redraw: no silent gap.
            session.emit_nowait(Error(
                code=ErrorCode.REPLAY_UNAVAILABLE.value,
                message=f"the events after seq {last_seq} are no longer kept; here is the session's state "
                        "and history instead",
            ))
            session.emit_nowait(session.state())
            session.emit_nowait(History(messages=list(session.history)))
        session.resend_pending_calls(last_seq)

    async def _handshake(self, stream: MessageStream, conn: Connection) -> Hello | None:
        with trio.move_on_after(self.config.hello_timeout) as scope:
            text = await stream.receive()
        if scope.cancelled_caught:
            await _send_fatal(stream, conn, ErrorCode.UNEXPECTED_MESSAGE,
                              f"no hello within {self.config.hello_timeout:g} seconds")
            return None
        try:
            message = conn.receive(text)
        except RemoteProtocolError as exc:
            await _send_fatal(stream, conn, exc.code, f"handshake failed: {exc}", in_reply_to=exc.in_reply_to)
            return None
        if self.shutting_down:
            await _send_fatal(stream, conn, ErrorCode.SHUTTING_DOWN, "the server is shutting down")
            return None
        assert isinstance(message, Hello)
        return message

    async def _read_messages(self, stream: MessageStream, conn: Connection, session: Session) -> None:
        while True:
            try:
                text = await stream.receive()
            except MessageTooLarge as exc:
                session.reply_error(ErrorCode.MESSAGE_TOO_LARGE, str(exc))
                continue
            except (ConnectionClosed, ConnectionBroken):
                return
            try:
                message = conn.receive(text)
            except RemoteProtocolError as exc:
                log.info("session %s: bad message: %s", session.id, exc, extra={"refusal": "bad message"})
                session.reply_error(exc.code, str(exc), in_reply_to=exc.in_reply_to, request_id=exc.request_id)
                continue
            assert isinstance(message, ClientMessage) or isinstance(message, Error)
            if isinstance(message, Error):
                log.warning("session %s: client reported %s: %s", session.id, message.code, message.message)
                continue
            if isinstance(message, ListSessions | DeleteSession):
                await self._answer_sessions(session, message)
                continue
            await session.handle(message)

    async def _answer_sessions(self, session: Session, message: ListSessions | DeleteSession) -> None:
        """``list_sessions`` / ``delete_session``: only ever the caller's
        own sessions."""
        try:
            if isinstance(message, DeleteSession):
                if message.session_id == session.id:
                    session.reply_error(ErrorCode.INVALID_REQUEST,
                                        "this connection's own session cannot be deleted through it",
                                        in_reply_to=message.id)
                    return
                if not await self.manager.delete(message.session_id, session.principal):
                    session.reply_error(ErrorCode.UNKNOWN_SESSION, _no_such_session(message.session_id),
                                        in_reply_to=message.id)
                    return
            summaries = await self.manager.list_sessions(session.principal)
        except StoreError as exc:
            session.reply_error(ErrorCode.STORAGE_ERROR, f"the server cannot read its sessions: {exc}",
                                in_reply_to=message.id)
            return
        session.emit_nowait(Sessions(in_reply_to=message.id, sessions=tuple(
            SessionInfo(id=s.id, title=s.title, created=int(s.created * 1000), updated=int(s.updated * 1000),
                        turns=s.turns, model=s.model)
            for s in summaries
        )))

#: After a write that took ``d`` seconds, a writer lets events gather for
#: ``GATHER_FACTOR * d`` seconds, at most ``GATHER_LIMIT``.
GATHER_FACTOR = 4
GATHER_LIMIT = 0.01
_DELTAS = (TextDelta, ThinkingDelta, ToolDelta)


def _no_such_session(session_id: str) -> str:
    """The one answer for a session that does not exist, is not the
    caller's, or was named with a wrong token."""
    if session_id == LATEST:
        return "no earlier session to resume"
    return f"no session {session_id!r} (it may have expired or been deleted)"


async def _send_fatal(stream: MessageStream, conn: Connection, code: ErrorCode, text: str,
                      *, in_reply_to: str | None = None) -> None:
    try:
        await stream.send(conn.send(stamp(Error(code=code.value, message=text, fatal=True, in_reply_to=in_reply_to))))
    except (ConnectionClosed, ConnectionBroken, LocalProtocolError):
        pass
    await stream.aclose(text)


def _who(principal: Principal | None) -> str:
    return principal.user_id if principal else "anonymous"


def create_model(name: str, *, api_key: str | None, base_url: str | None = None) -> Model:
    """The model behind a server: ``scripted:FILE`` replays a script,
    anything else is a Gemini model name (google-genai imported here)."""
    if name.startswith("scripted:"):
        from .scripted import ScriptedModel

        return ScriptedModel.from_file(name.removeprefix("scripted:"))
    from .gemini import GeminiModel

    if not api_key:
        raise ValueError("an API key is required for the Gemini API")
    return GeminiModel(api_key, base_url=base_url)
