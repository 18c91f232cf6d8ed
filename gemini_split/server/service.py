"""The server side of a connection: handshake, reader, writer, session.

:class:`AgentService` is what every transport's listener calls for each new
connection (:meth:`AgentService.handle_connection`). It runs the handshake,
creates a :class:`Session`, then pumps messages both ways until either side
goes away. A malformed or unknown message gets an ``error`` event and the
connection goes on; only a broken handshake is fatal.
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
    ConnectionState,
    Error,
    ErrorCode,
    Hello,
    RemoteProtocolError,
    decode,
    encode,
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

from .config import ServerConfig
from .model import Model
from .session import Session

log = logging.getLogger(__name__)

SERVER_CAPABILITIES = ["client_tools", "thinking", "cancel", "history", "state"]


class AgentService:
    """All sessions of one server process.

    ``authenticate`` checks the ``hello`` token on transports that did not
    authenticate the connection themselves (None: no auth)."""

    def __init__(self, model: Model, config: ServerConfig, *, authenticate: Authenticator | None = None):
        self.model = model
        self.config = config
        self.authenticate = authenticate
        self.sessions: dict[str, Session] = {}
        self._streams: dict[str, MessageStream] = {}
        self.shutting_down = False

    async def aclose(self) -> None:
        """Close the model this service owns (its HTTP client and TLS
        context). Idempotent; the owner calls it once, after the last
        connection."""
        await self.model.aclose()

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
            session.cancel_active(because=(ErrorCode.SHUTTING_DOWN, "the server is shutting down; the request was stopped"))
        with trio.move_on_after(grace):
            while any(s.busy for s in self.sessions.values()):
                await trio.sleep(0.05)
            for session in list(self.sessions.values()):
                session.reply_error(None, ErrorCode.SHUTTING_DOWN, "the server is shutting down", fatal=True)
            await trio.sleep(0.1)  # let writers flush the last events
        for stream in list(self._streams.values()):
            await stream.aclose("server shutting down")

    async def handle_connection(self, stream: MessageStream) -> None:
        """Serve one connection until it closes. Never raises for the peer's
        mistakes."""
        state = ConnectionState("server")
        hello = await self._handshake(stream, state)
        if hello is None:
            return
        principal = stream.principal
        if self.authenticate is not None and principal is None:
            principal = self.authenticate(hello.token)
            if principal is None:
                await _send_fatal(stream, ErrorCode.UNAUTHORIZED, "missing or invalid token")
                return
        session = Session(model=self.model, config=self.config, principal=principal)
        self.sessions[session.id] = session
        self._streams[session.id] = stream
        log.info("session %s opened for %s (%s)", session.id, _who(principal), stream.peer)
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(session.run)
                await stream.send(encode(stamp(Connected(
                    server=f"gemini-split/{__version__}", session_id=session.id,
                    resume_token=session.resume_token, model=session.model_name,
                    capabilities=SERVER_CAPABILITIES,
                ))))
                nursery.start_soon(_write_events, stream, session, nursery.cancel_scope)
                await self._read_messages(stream, state, session)
                nursery.cancel_scope.cancel()
        except (ConnectionClosed, ConnectionBroken):
            pass
        finally:
            del self.sessions[session.id]
            del self._streams[session.id]
            log.info("session %s closed", session.id)

    async def _handshake(self, stream: MessageStream, state: ConnectionState) -> Hello | None:
        with trio.move_on_after(self.config.hello_timeout) as scope:
            text = await stream.receive()
        if scope.cancelled_caught:
            await _send_fatal(stream, ErrorCode.UNEXPECTED_MESSAGE,
                              f"no hello within {self.config.hello_timeout:g} seconds")
            return None
        try:
            message = decode(text, max_size=self.config.max_message_size)
            state.receive(message)
        except RemoteProtocolError as exc:
            await _send_fatal(stream, exc.code, f"handshake failed: {exc}")
            return None
        if self.shutting_down:
            await _send_fatal(stream, ErrorCode.SHUTTING_DOWN, "the server is shutting down")
            return None
        assert isinstance(message, Hello)
        return message

    async def _read_messages(self, stream: MessageStream, state: ConnectionState, session: Session) -> None:
        while True:
            try:
                text = await stream.receive()
            except MessageTooLarge as exc:
                session.reply_error(None, ErrorCode.MESSAGE_TOO_LARGE, str(exc))
                continue
            except (ConnectionClosed, ConnectionBroken):
                return
            try:
                message = decode(text, max_size=self.config.max_message_size)
                state.receive(message)
            except RemoteProtocolError as exc:
                log.info("session %s: bad message: %s", session.id, exc)
                session.reply_error(None, exc.code, str(exc))
                continue
            assert isinstance(message, ClientMessage) or isinstance(message, Error)
            if isinstance(message, Error):
                log.warning("session %s: client reported %s: %s", session.id, message.code, message.message)
                continue
            await session.handle(message)


async def _write_events(stream: MessageStream, session: Session, scope: trio.CancelScope) -> None:
    try:
        while True:
            for event in await session.outbox.take():
                await stream.send(encode(event))
    except (ConnectionClosed, ConnectionBroken):
        scope.cancel()


async def _send_fatal(stream: MessageStream, code: ErrorCode, text: str) -> None:
    try:
        await stream.send(encode(stamp(Error(code=code.value, message=text, fatal=True))))
    except (ConnectionClosed, ConnectionBroken):
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
