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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import trio

from gemini_split import __version__
from gemini_split.protocol import (
    Attachment,
    Cancel,
    ClientMessage,
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
    State,
    ToolDiscovery,
    ToolExecutionRequest,
    ToolExecutionResponse,
)
from gemini_split.stamping import stamp
from gemini_split.transport import (
    ConnectFailed,
    ConnectionBroken,
    ConnectionClosed,
    MessageStream,
    MessageTooLarge,
    TransportError,
)

from .executor import ToolExecutor

log = logging.getLogger(__name__)

EventCallback = Callable[[ServerEvent], Awaitable[None]]

CLIENT_CAPABILITIES = ["client_tools", "tool_deltas"]


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


@dataclass
class TurnOutcome:
    """How a request ended: exactly one of ``finished`` and ``error``."""

    request_id: str
    finished: Finished | None = None
    error: Error | None = None

    @property
    def cancelled(self) -> bool:
        return self.finished is not None and self.finished.reason == "cancelled"


class _Turn:
    def __init__(self, request_id: str):
        self.request_id = request_id
        self.done = trio.Event()
        self.outcome = TurnOutcome(request_id)
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
    ):
        self.stream = stream
        self.executor = executor
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
        #: The MCP servers lending tools to this client
        #: (:class:`~gemini_split.client.mcp.sources.McpServers`), if any.
        self.mcp_servers: Any = None

    # --- connection ----------------------------------------------------------

    async def handshake(self, *, token: str | None = None) -> Connected:
        """Send hello and the tool list; return the server's ``connected``.

        Raises :class:`HandshakeFailed` (with the server's error code, e.g.
        ``unauthorized``) or :class:`ConnectFailed` when the peer closes,
        times out or answers with something that is not the protocol."""
        await self._send(Hello(client=f"gemini-split/{__version__}", capabilities=CLIENT_CAPABILITIES, token=token))
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
        (``tool_discovery``; a later one replaces the earlier)."""
        await self._send(ToolDiscovery(tools=self.executor.registry.specs()))

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Read the server's messages until the connection ends. Tool calls
        run in this task's nursery."""
        async with trio.open_nursery() as nursery:
            self._last_heard = trio.current_time()
            nursery.start_soon(self._watch_for_silence)
            task_status.started()
            try:
                await self._read_loop(nursery)
            finally:
                self._connection_lost(self._closed_reason or "the connection to the server was closed")
                nursery.cancel_scope.cancel()

    async def aclose(self) -> None:
        await self.stream.aclose()

    # --- requests ------------------------------------------------------------

    async def run_turn(self, prompt: str, *, model: str | None = None,
                       attachments: tuple[Attachment, ...] = ()) -> TurnOutcome:
        """Send a prompt (with ``attachments`` as inline data) and wait until
        the server finishes it (or fails). Events reach ``on_event`` meanwhile."""
        if self.before_turn is not None:
            await self.before_turn()
        request = stamp(GenerateContentRequest(prompt=prompt, model=model, attachments=attachments))
        turn = _Turn(request.id)
        self._turn = turn
        try:
            if self._closed_reason is not None:
                self._connection_lost(self._closed_reason)
            else:
                try:
                    await self._send(request)
                except (ConnectionClosed, ConnectionBroken) as exc:
                    self._connection_lost(f"the connection to the server was lost: {exc.reason}")
                except LocalProtocolError:
                    if self._conn.phase is not Phase.CLOSED:
                        raise  # a turn is running already: the caller's bug
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
            self._connection_lost("the connection to the server was lost")

    async def get_history(self, timeout: float = 10.0) -> History:
        """The conversation so far. Raises :class:`RequestFailed`."""
        reply = await self._request(GetHistory(), timeout)
        assert isinstance(reply, History)
        return reply

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
            try:
                await self._request(GetState(), self.probe_timeout)
            except RequestFailed as exc:
                if exc.code != "timeout":
                    return  # closed already, or a server without get_state: stop probing
                self._closed_reason = (
                    f"the server stopped answering (nothing for {silent_for:.0f} s, "
                    f"and no reply to a probe within {self.probe_timeout:g} s)"
                )
                await self.stream.aclose(self._closed_reason)
                return

    async def _read_loop(self, nursery: trio.Nursery) -> None:
        while True:
            try:
                text = await self.stream.receive()
                self._last_heard = trio.current_time()
            except MessageTooLarge as exc:
                log.warning("dropped a message from the server: %s", exc)
                continue
            except (ConnectionClosed, ConnectionBroken) as exc:
                self._closed_reason = f"the connection to the server was lost: {exc.reason}"
                return
            try:
                message = self._conn.receive(text)
            except RemoteProtocolError as exc:
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
        if isinstance(message, ToolExecutionRequest):
            nursery.start_soon(self._run_tool, message)
            return
        await self.on_event(message)
        turn = self._turn
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
            await self.stream.aclose(message.message)

    async def _run_tool(self, request: ToolExecutionRequest) -> None:
        turn = self._turn
        scope = turn.new_tool_scope() if turn is not None and turn.request_id == request.request_id else trio.CancelScope()
        result: Any = None
        failure = None
        with scope:
            result, failure = await self.executor.execute(
                request.id, request.tool, request.parameters, self.on_event, request_id=request.request_id,
            )
        if scope.cancelled_caught:
            return  # the server cancelled the request too; nothing to answer
        try:
            await self._send(ToolExecutionResponse(request_id=request.id, result=result, error=failure))
        except (ConnectionClosed, ConnectionBroken):
            log.info("could not answer %s: connection closed", request.id)
        except LocalProtocolError as exc:  # the request ended meanwhile
            log.info("not answering %s: %s", request.id, exc)

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


def _stderr_tail(stream: MessageStream) -> str:
    """The end of a spawned server's stderr, where the transport keeps one
    (stdio does): usually the real reason a handshake went wrong."""
    tail_of = getattr(stream, "stderr_tail", None)
    tail = tail_of().strip() if callable(tail_of) else ""
    return "\nThe end of its stderr:\n  " + tail.replace("\n", "\n  ") if tail else ""
