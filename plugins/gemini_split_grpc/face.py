"""One ``Chat`` stream as a native session: the translation at the edge.

:func:`run_chat` runs in the server's Trio loop, one per stream. It reads the
stream's ``ClientRequest`` messages, opens one native connection to the
server's handler (:mod:`.pair`), and turns what the session sends into
``ServerResponse`` messages. It never touches gRPC threads itself: it is
handed ``receive_request`` / ``send_response`` and returns the status the
RPC ends with (:class:`End`).

The stream, as a client sees it:

1. ``StartRequest`` first (else ``FAILED_PRECONDITION``). It is checked
   before any session exists: ``approval_mode`` (unspecified →
   ``REJECT_DANGEROUS_TOOLS``), ``model`` (a model name the operator allows:
   ``INVALID_ARGUMENT`` / ``PERMISSION_DENIED``), ``advanced_config`` (only
   keys the operator allowed: an unknown key is ``INVALID_ARGUMENT``, a
   known one not allowed ``PERMISSION_DENIED``), tool names. Then the
   session is created, or ``session_id`` resumed if it is the caller's
   (else ``NOT_FOUND``, whether it never existed or is someone else's).
2. ``SessionInfo`` answers it; a ``prompt`` in the ``StartRequest`` is the
   first turn.
3. Each turn streams ``TextResponse`` / ``ThoughtResponse`` /
   ``ToolStarted`` / ``ToolEnded`` in order, and ends with ``SessionInfo``
   again (the seed has no end-of-turn message; this is ours). A turn that
   fails sends ``ErrorResponse`` and then ``SessionInfo``: the stream goes on.
4. The client half-closing ends the RPC with ``OK`` once the running turn
   is over. The RPC ending otherwise (cancel, deadline, lost connection)
   cancels the running turn; the session stays, resumable by id.

A request the stream cannot go on from — an unknown or empty ``oneof``, a
prompt before ``StartRequest``, a second ``StartRequest``, a message over the
size limit, a refused ``StartRequest`` — is answered with ``ErrorResponse``
and ends the RPC with its status. ``ErrorResponse.code`` is the gRPC status
number; ``message`` starts with a stable code (``model_not_allowed: …``).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
import trio
from google.protobuf import json_format

from gemini_split import __version__
from gemini_split.protocol import (
    Cancel,
    Replay,
    Connected,
    Connection,
    ContextFile,
    Error,
    ErrorCode,
    GenerateContentRequest,
    Hello,
    LocalProtocolError,
    Message,
    RemoteProtocolError,
    ServerEvent,
    SessionContext,
    ToolExecutionResponse,
    ToolFailure,
)
from gemini_split.protocol.turn import (
    HistoryCompressed,
    Notice,
    TextAdded,
    ThoughtAdded,
    ToolCallEnded,
    ToolCallRequested,
    ToolCallStarted,
    Turn,
    TurnEnded,
)
from gemini_split.stamping import stamp
from gemini_split.transport import ConnectionBroken, ConnectionClosed, ConnectionHandler, MessageTooLarge, Principal, run_handler

from . import gemini_pb2 as pb
from .pair import open_pair

log = logging.getLogger(__name__)

#: ``advanced_config`` keys this face understands (gemini-cli's
#: ``ConfigParameters`` names), and what each must be. The operator allows
#: some of them with ``serve --grpc-allow-config``; nothing by default.
#: ``userMemory``: text the model gets as the user's memory / context file
#: (as gemini-cli's ``userMemory``, what GEMINI.md files hold).
CONFIG_KEYS: dict[str, type] = {"userMemory": str}
#: Characters of ``userMemory`` at most.
MAX_USER_MEMORY = 64 * 1024
#: A tool name in ``core_tools`` / ``exclude_tools``.
_TOOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
MAX_TOOL_NAMES = 128
#: What ``ToolEndedResponse.result_summary`` keeps of a result.
SUMMARY_LINES = 5
SUMMARY_CHARS = 500
#: Seconds the face waits for the session to take its ``cancel`` when the
#: RPC ends mid-turn.
CANCEL_GRACE = 2.0


@dataclass(frozen=True)
class FacePolicy:
    """What the operator allows a ``StartRequest`` to ask for."""

    max_message_size: int
    #: The server's model-name check (``serve`` passes
    #: ``server.model_names.check_model_name`` bound to its
    #: ``--allowed-models``): returns the name or raises ValueError with a
    #: ``code`` (``invalid_field``, ``model_not_allowed``). None: the
    #: session checks it at the first prompt.
    check_model: Callable[[str], str] | None = None
    allowed_config: frozenset[str] = frozenset()
    #: Whether the server runs tools itself (``serve --server-tools``):
    #: then a stream's session has them, in its own workspace, with the
    #: stream's approval mode; otherwise it has none.
    server_tools: bool = False


@dataclass(frozen=True)
class End:
    """How the RPC ends: a gRPC status and its details."""

    code: grpc.StatusCode = grpc.StatusCode.OK
    details: str = ""


class _Refused(Exception):
    """Answer with ErrorResponse, then end the RPC with this status."""

    def __init__(self, status: grpc.StatusCode, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


ReceiveRequest = Callable[[], Awaitable["pb.ClientRequest | None"]]
SendResponse = Callable[["pb.ServerResponse"], Awaitable[None]]
Spawn = Callable[..., None]


def error_response(status: grpc.StatusCode, code: str, message: str) -> pb.ServerResponse:
    """``ErrorResponse``: the status number, and the stable code first."""
    return pb.ServerResponse(error=pb.ErrorResponse(message=f"{code}: {message}", code=status.value[0]))


async def run_chat(*, principal: Principal | None, peer: str, handler: ConnectionHandler, policy: FacePolicy,
                   receive_request: ReceiveRequest, send_response: SendResponse, spawn: Spawn) -> End:
    """Serve one ``Chat`` stream to its end (see the module docstring).
    ``spawn`` starts the native connection's handler in a nursery that
    outlives this call (the listener's). Returns how the RPC ends; raises
    only ``trio.Cancelled``."""
    chat = _Chat(principal, peer, handler, policy, receive_request, send_response, spawn)
    try:
        return await chat.run()
    except _Refused as exc:
        log.info("gRPC stream from %s refused: %s: %s", peer, exc.code, exc.message)
        await send_response(error_response(exc.status, exc.code, exc.message))
        return End(exc.status, f"{exc.code}: {exc.message}")


@dataclass
class _Start:
    session_id: str | None
    prompt: str
    model: str | None
    auto_approve: bool
    core_tools: tuple[str, ...]
    exclude_tools: tuple[str, ...]
    user_memory: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class _Chat:
    def __init__(self, principal: Principal | None, peer: str, handler: ConnectionHandler, policy: FacePolicy,
                 receive_request: ReceiveRequest, send_response: SendResponse, spawn: Spawn):
        self.spawn = spawn
        self.principal = principal
        self.peer = peer
        self.handler = handler
        self.policy = policy
        self.receive_request = receive_request
        self.send_response = send_response
        self.conn = Connection("client", max_message_size=policy.max_message_size)
        #: The stream's turns, folded: _relay renders the changes.
        self.turn = Turn()
        self.session_id = ""
        self.context: SessionContext | None = None
        self.model: str | None = None

    async def run(self) -> End:
        first = await self.receive_request()
        if first is None:
            return End()
        start = self._check_start(first)
        client_end, server_end = open_pair(peer=self.peer, principal=self.principal,
                                           max_message_size=self.policy.max_message_size)
        self.stream = client_end
        # Not in this stream's cancel scope: when the RPC ends, the session
        # must still read the cancel the face sends it (then the close).
        self.spawn(run_handler, self.handler, server_end)
        try:
            return await self._converse(start)
        finally:
            await client_end.aclose("the gRPC stream ended")

    # --- the StartRequest ---------------------------------------------------------

    def _check_start(self, request: pb.ClientRequest) -> _Start:
        kind = _kind(request)
        if kind == "prompt":
            raise _Refused(grpc.StatusCode.FAILED_PRECONDITION, "start_required",
                           "the first message of a Chat stream must be a StartRequest")
        start = request.start_request
        self._check_size(request)
        mode = start.approval_mode
        if mode not in (pb.APPROVAL_MODE_UNSPECIFIED, pb.REJECT_DANGEROUS_TOOLS, pb.AUTO_APPROVE):
            raise _Refused(grpc.StatusCode.INVALID_ARGUMENT, "invalid_field",
                           f"approval_mode {mode} is not an ApprovalMode (REJECT_DANGEROUS_TOOLS or AUTO_APPROVE)")
        model = start.model or None
        if model is not None and self.policy.check_model is not None:
            try:
                model = self.policy.check_model(model)
            except ValueError as exc:
                code = str(getattr(exc, "code", ErrorCode.INVALID_FIELD.value))
                status = (grpc.StatusCode.PERMISSION_DENIED if code == ErrorCode.MODEL_NOT_ALLOWED.value
                          else grpc.StatusCode.INVALID_ARGUMENT)
                raise _Refused(status, code, str(exc)) from None
        for name in (*start.core_tools, *start.exclude_tools):
            if not _TOOL_NAME.fullmatch(name):
                raise _Refused(grpc.StatusCode.INVALID_ARGUMENT, "invalid_field",
                               f"{_quote(name)} is not a tool name")
        if len(start.core_tools) + len(start.exclude_tools) > MAX_TOOL_NAMES:
            raise _Refused(grpc.StatusCode.INVALID_ARGUMENT, "invalid_field",
                           f"at most {MAX_TOOL_NAMES} tool names in core_tools and exclude_tools together")
        result = _Start(
            session_id=start.session_id or None, prompt=start.prompt, model=model,
            auto_approve=mode == pb.AUTO_APPROVE,
            core_tools=tuple(start.core_tools), exclude_tools=tuple(start.exclude_tools),
        )
        if start.HasField("advanced_config"):
            self._check_config(json_format.MessageToDict(start.advanced_config), result)
        return result

    def _check_config(self, config: dict[str, Any], start: _Start) -> None:
        for key, value in config.items():
            expected = CONFIG_KEYS.get(key)
            if expected is None:
                known = ", ".join(sorted(CONFIG_KEYS))
                raise _Refused(grpc.StatusCode.INVALID_ARGUMENT, "invalid_field",
                               f"advanced_config key {_quote(key)} is not one this server knows (known: {known})")
            if key not in self.policy.allowed_config:
                raise _Refused(grpc.StatusCode.PERMISSION_DENIED, "config_not_allowed",
                               f"advanced_config key {key!r} is not allowed on this server "
                               "(the operator allows keys with serve --grpc-allow-config)")
            if not isinstance(value, expected):
                raise _Refused(grpc.StatusCode.INVALID_ARGUMENT, "invalid_field",
                               f"advanced_config {key!r} must be a {expected.__name__}")
        memory = config.get("userMemory")
        if memory is not None:
            if len(memory) > MAX_USER_MEMORY:
                raise _Refused(grpc.StatusCode.INVALID_ARGUMENT, "invalid_field",
                               f"advanced_config 'userMemory' is over {MAX_USER_MEMORY} characters")
            start.user_memory = memory

    def _check_size(self, request: pb.ClientRequest) -> None:
        size = request.ByteSize()
        if size > self.policy.max_message_size:
            raise _Refused(grpc.StatusCode.RESOURCE_EXHAUSTED, ErrorCode.MESSAGE_TOO_LARGE.value,
                           f"message of {size} bytes is over the limit of {self.policy.max_message_size} bytes")

    # --- the conversation -----------------------------------------------------------

    async def _converse(self, start: _Start) -> End:
        await self._handshake(start)
        self.model = start.model
        files = (ContextFile(path="advanced_config.userMemory", content=start.user_memory, scope="global"),) \
            if start.user_memory else ()
        self.context = SessionContext(files=files, interactive=False)
        await self._session_info()
        if start.prompt:
            await self._turn(start.prompt)
        while True:
            request = await self.receive_request()
            if request is None:
                return End()
            kind = _kind(request)
            if kind == "start_request":
                raise _Refused(grpc.StatusCode.FAILED_PRECONDITION, "already_started",
                               f"this stream already has session {self.session_id}; send prompts, or open "
                               "another stream for another session")
            self._check_size(request)
            await self._turn(request.prompt)

    async def _handshake(self, start: _Start) -> None:
        tools: dict[str, Any] = {}
        if self.policy.server_tools:
            tools = {"tools": "server", "approval_mode": "yolo" if start.auto_approve else "reject_dangerous",
                     "core_tools": start.core_tools or None, "exclude_tools": start.exclude_tools}
        # A resumed stream continues the conversation: no replay of the last turn (1.2).
        await self._send(Hello(client=f"gemini-split-grpc/{__version__} ({self.peer})", session_id=start.session_id,
                               replay=Replay(limit=0) if start.session_id else None, **tools))
        reply = await self._receive()
        if isinstance(reply, Error):
            status = {
                ErrorCode.UNKNOWN_SESSION.value: grpc.StatusCode.NOT_FOUND,
                ErrorCode.UNAUTHORIZED.value: grpc.StatusCode.UNAUTHENTICATED,
                ErrorCode.SHUTTING_DOWN.value: grpc.StatusCode.UNAVAILABLE,
                ErrorCode.APPROVAL_MODE_REFUSED.value: grpc.StatusCode.PERMISSION_DENIED,
                ErrorCode.SERVER_TOOLS_DISABLED.value: grpc.StatusCode.FAILED_PRECONDITION,
                ErrorCode.INVALID_FIELD.value: grpc.StatusCode.INVALID_ARGUMENT,
            }.get(reply.code, grpc.StatusCode.INTERNAL)
            raise _Refused(status, reply.code, reply.message)
        if not isinstance(reply, Connected):
            raise _Refused(grpc.StatusCode.INTERNAL, ErrorCode.INTERNAL.value,
                           f"the server answered hello with {reply.TYPE}")
        self.session_id = reply.session_id
        log.info("gRPC stream from %s: session %s", self.peer, self.session_id)

    async def _session_info(self) -> None:
        await self.send_response(pb.ServerResponse(session_info=pb.SessionInfo(session_id=self.session_id)))

    async def _turn(self, prompt: str) -> None:
        """One prompt, to its ``finished`` or ``error``, then SessionInfo."""
        request = stamp(GenerateContentRequest(prompt=prompt, model=self.model, context=self.context))
        try:
            # Refuses a message over the limit (JSON escapes can make it
            # larger than the protobuf one); nothing is sent then.
            text = self.conn.send(request)
        except LocalProtocolError as exc:
            raise _Refused(grpc.StatusCode.RESOURCE_EXHAUSTED, ErrorCode.MESSAGE_TOO_LARGE.value,
                           f"the prompt is too large: {exc}") from None
        # Later turns keep the session's context; send it once.
        self.context = None
        try:
            await self.stream.send(text)
            while True:
                event = await self._receive()
                if await self._relay(event, request.id):
                    break
        except BaseException:
            with trio.CancelScope(shield=True) as scope:
                scope.deadline = trio.current_time() + CANCEL_GRACE
                await self._cancel(request.id)
            raise
        await self._session_info()

    async def _cancel(self, request_id: str) -> None:
        """Cancel the running request and wait for it to end (its
        ``finished`` or ``error``): closing at once could end the
        connection before the session read the ``cancel``."""
        try:
            if self.conn.request is None:
                return
            await self._send(Cancel(request_id=request_id))
            while self.conn.request is not None:
                await self._receive()
        except (ConnectionClosed, ConnectionBroken, LocalProtocolError, _Refused):
            pass

    async def _relay(self, event: Message, request_id: str) -> bool:
        """Send what ``event`` means to the gRPC client; True at the end of
        the turn."""
        if not isinstance(event, ServerEvent):
            return False
        ended = False
        for change in self.turn.apply(event):
            if isinstance(change, TextAdded):
                await self.send_response(pb.ServerResponse(text_response=pb.TextResponse(content=change.text)))
            elif isinstance(change, ThoughtAdded):
                await self.send_response(pb.ServerResponse(thought_response=pb.ThoughtResponse(thought=change.text)))
            elif isinstance(change, HistoryCompressed):
                # gemini.v1 has no message for it: a thought, as the ACP face says it.
                await self.send_response(pb.ServerResponse(thought_response=pb.ThoughtResponse(
                    thought=change.describe())))
            elif isinstance(change, ToolCallStarted):
                started = pb.ToolStartedResponse(name=change.name)
                started.args.update(_json_safe(change.args))
                await self.send_response(pb.ServerResponse(tool_started=started))
            elif isinstance(change, ToolCallEnded):
                summary = (summarize(change.result) if change.error is None
                           else f"error: {change.error.code}: {change.error.message}")
                await self.send_response(pb.ServerResponse(tool_ended=pb.ToolEndedResponse(
                    name=change.name, result_summary=summary)))
            elif isinstance(change, ToolCallRequested):
                await self._no_client_tools(change.call_id, change.name)
            elif isinstance(change, Notice | TurnEnded):
                code, message, fatal = ((change.code, change.message, change.fatal) if isinstance(change, Notice)
                                        else (change.error_code, change.error_message, change.fatal))
                if code is not None:
                    if fatal:
                        raise _Refused(grpc.StatusCode.UNAVAILABLE, code, message or "")
                    await self.send_response(error_response(_status_of(code), code, message or ""))
                ended = isinstance(change, TurnEnded) and change.request_id == request_id
        return ended

    async def _no_client_tools(self, call_id: str, tool: str) -> None:
        """A gRPC client runs no tools: the model is told, and so is the
        client."""
        message = (f"the model asked for the tool {_quote(tool)}, but this server runs no tools for "
                   "gRPC sessions (its operator can enable them with serve --server-tools)")
        await self._send(ToolExecutionResponse(request_id=call_id, error=ToolFailure(
            code="no_tools", message="no tools are available in this session",
            hint="answer from what you know, without tools")))
        await self.send_response(error_response(grpc.StatusCode.UNIMPLEMENTED, "no_tools", message))

    # --- the native end ---------------------------------------------------------------

    async def _send(self, message: Message) -> None:
        await self.stream.send(self.conn.send(stamp(message)))

    async def _receive(self) -> Message:
        while True:
            try:
                text = await self.stream.receive()
            except ConnectionBroken as exc:
                raise _Refused(grpc.StatusCode.UNAVAILABLE, ErrorCode.CONNECTION_LOST.value,
                               f"the session ended: {exc.reason}") from None
            except MessageTooLarge as exc:
                raise _Refused(grpc.StatusCode.INTERNAL, ErrorCode.MESSAGE_TOO_LARGE.value, str(exc)) from None
            try:
                return self.conn.receive(text)
            except RemoteProtocolError as exc:  # the server's bug: say so, do not crash
                log.error("gRPC face: the session sent a message out of turn: %s", exc)
                continue


def summarize(result: Any) -> str:
    """A tool result in a few lines: its exit status (or the signal that
    killed it) if it has one, then the first :data:`SUMMARY_LINES` lines of
    its output (at most :data:`SUMMARY_CHARS` characters), and how much was
    left out."""
    head = ""
    body: Any = result
    if isinstance(result, dict):
        status = next((result[k] for k in ("exit_code", "exitCode", "returncode") if k in result), None)
        if status is not None:
            head = f"exit status {status}"
        elif isinstance(result.get("signal"), str):
            head = f"killed by {result['signal']}"
        texts = [result[k] for k in ("output", "stdout", "content", "llmContent", "result", "message", "stderr")
                 if isinstance(result.get(k), str)]
        if texts:
            body = next((t for t in texts if t.strip()), "")
    text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False, default=str)
    lines = text.splitlines()
    shown = "\n".join(lines[:SUMMARY_LINES])
    cut = len(shown) > SUMMARY_CHARS
    shown = shown[:SUMMARY_CHARS]
    left = len(lines) - SUMMARY_LINES
    if left > 0:
        shown += f"\n… ({left} more line{'s' if left != 1 else ''})"
    elif cut:
        shown += "…"
    summary = f"{head}\n{shown}".strip() if head else shown
    return summary or "(no output)"


def _json_safe(value: dict[str, Any]) -> dict[str, Any]:
    """``value`` as a Struct can hold it (numbers become floats; anything
    that is not JSON becomes its string)."""
    return json.loads(json.dumps(value, default=str))


class Undecodable:
    """What :func:`parse_request` returns for bytes that are not a
    ``ClientRequest``: ``reason`` says why (protobuf's words)."""

    def __init__(self, reason: str):
        self.reason = reason


def parse_request(data: bytes) -> pb.ClientRequest | Undecodable:
    """The listener's request deserializer: a ``ClientRequest``, or
    :class:`Undecodable`, which the face refuses like any bad request
    (``INVALID_ARGUMENT`` / ``invalid_message``). Never raises: when a
    deserializer fails, grpcio logs a traceback per message and answers the
    RPC itself, and the handler's own end then sends a second status that
    the call never completes, so the server's stop waits forever."""
    try:
        return pb.ClientRequest.FromString(data)
    except Exception as exc:  # DecodeError, or whatever else the parser raises: the peer's doing
        return Undecodable(f"{type(exc).__name__}: {exc}")


def _kind(request: pb.ClientRequest | Undecodable) -> str:
    if isinstance(request, Undecodable):
        raise _Refused(grpc.StatusCode.INVALID_ARGUMENT, "invalid_message",
                       f"the message is not a gemini.v1.ClientRequest protobuf ({request.reason[:200]})")
    kind = request.WhichOneof("request")
    if kind is None:
        raise _Refused(grpc.StatusCode.INVALID_ARGUMENT, "unknown_request",
                       "a ClientRequest must set start_request or prompt (an empty message, or a field "
                       "this server does not know)")
    return kind


_STATUS_OF = {
    ErrorCode.INVALID_FIELD.value: grpc.StatusCode.INVALID_ARGUMENT,
    ErrorCode.INVALID_REQUEST.value: grpc.StatusCode.INVALID_ARGUMENT,
    ErrorCode.MODEL_NOT_ALLOWED.value: grpc.StatusCode.PERMISSION_DENIED,
    ErrorCode.MODEL_AUTH.value: grpc.StatusCode.UNAVAILABLE,
    ErrorCode.MODEL_UNAVAILABLE.value: grpc.StatusCode.UNAVAILABLE,
    ErrorCode.RATE_LIMITED.value: grpc.StatusCode.RESOURCE_EXHAUSTED,
    ErrorCode.TURN_LIMIT.value: grpc.StatusCode.RESOURCE_EXHAUSTED,
    ErrorCode.INTERRUPTED.value: grpc.StatusCode.ABORTED,
    ErrorCode.CANCELLED.value: grpc.StatusCode.CANCELLED,
    ErrorCode.BUSY.value: grpc.StatusCode.FAILED_PRECONDITION,
    ErrorCode.MESSAGE_TOO_LARGE.value: grpc.StatusCode.RESOURCE_EXHAUSTED,
}


def _status_of(code: str) -> grpc.StatusCode:
    return _STATUS_OF.get(code, grpc.StatusCode.INTERNAL)


def _quote(value: str, limit: int = 64) -> str:
    return repr(value[:limit]) + ("…" if len(value) > limit else "")
