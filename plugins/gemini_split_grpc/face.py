"""One ``Chat`` stream as a native session: the translation at the edge.

:func:`run_chat` runs in the server's Trio loop, one per stream. It reads the
stream's ``ClientRequest`` messages, opens one native session through the
native client it is given (:class:`NativeRequest`: the server's command
passes ``open_client``'s, so the protocol — handshake, sending, receiving,
cancelling — is that client's, the ACP face's too), and turns what the
session sends into ``ServerResponse`` messages: it keeps only the protobuf
translation. It never touches gRPC threads itself: it is handed
``receive_request`` / ``send_response`` and returns the status the RPC ends
with (:class:`End`).

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
   A sub-agent the main model delegates to (issue 32) is framed by
   ``AgentStarted`` / ``AgentFinished``; its text and thoughts are
   ``AgentText`` / ``AgentThought`` (never ``TextResponse`` /
   ``ThoughtResponse``, which are the main agent's: the answer), its tool
   calls ``ToolStarted`` / ``ToolEnded`` with its ``agent_id`` (1, 2 …).
   The main agent's tool calls say 0, the proto3 default, so they are the
   same bytes as before these fields existed, and a client generated from
   the seed's proto skips the members it does not know: its answer is the
   main agent's text, as before sub-agents.
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
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

import grpc
import trio
from google.protobuf import json_format

from gemini_split.protocol import (
    ContextFile,
    ErrorCode,
    GenerateContentRequest,
    LocalProtocolError,
    ProtocolError,
    ServerEvent,
    SessionContext,
)
from gemini_split.protocol.turn import (
    AgentBegan,
    AgentEnded,
    AgentOutput,
    HistoryCompressed,
    Notice,
    TextAdded,
    ThoughtAdded,
    ToolCallEnded,
    ToolCallStarted,
    Turn,
    TurnEnded,
)
from gemini_split.protocol.codec import encode
from gemini_split.stamping import stamp
from gemini_split.transport import AuthenticationFailed, ConnectFailed, Principal

from . import gemini_pb2 as pb

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
#: Characters of a sub-agent's task and summary in ``AgentStarted`` /
#: ``AgentFinished``, and names in its tool lists at most.
AGENT_TEXT_CHARS = 500
AGENT_TOOL_NAMES = 128
#: Seconds the face waits for the session to take its ``cancel`` when the
#: RPC ends mid-turn.
CANCEL_GRACE = 2.0
#: The tool failure the native client answers a tool call with in a
#: session that has no tools (``ToolExecutor``'s): the face tells the gRPC
#: client too.
NO_TOOLS = "no_tools"


@dataclass(frozen=True)
class NativeRequest:
    """What the face asks of the native client (:data:`OpenClient`): a
    connection to ``address`` (the listener's private in-process one) with
    ``token`` (which names the gRPC principal there), a new session or
    ``session_id`` resumed (its history not replayed), the stream's tool
    choice, and ``on_event`` called with every event of the session."""

    address: str
    token: str | None
    #: The gRPC peer, to name this client to the server.
    peer: str
    session_id: str | None
    max_message_size: int
    on_event: Callable[[ServerEvent], Awaitable[None]]
    #: The session's tools run on the server (``serve --server-tools``),
    #: auto-approved or refusing what needs approval; otherwise it has none.
    server_tools: bool = False
    auto_approve: bool = False
    core_tools: tuple[str, ...] = ()
    exclude_tools: tuple[str, ...] = ()


class NativeClient(Protocol):
    """What the face uses of the client :data:`OpenClient` yields
    (``gemini_split.client.connect.open_client``'s ``ProtocolClient``)."""

    @property
    def connected(self) -> Any: ...  # the server's ``connected``: ``.session_id``

    async def run_turn(self, prompt: str, *, model: str | None = None,
                       context: SessionContext | None = None) -> Any: ...  # ``.error``: the turn's ``Error``

    async def cancel(self) -> None: ...


#: A connected, handshaken native client for a :class:`NativeRequest`, as
#: an async context manager (closed on exit). Raises
#: :class:`~gemini_split.transport.ConnectFailed` when the server refuses
#: (with the server's ``code`` attribute, e.g. ``unknown_session``, and its
#: message as the exception's text). The server's command passes it in
#: ``ServeOptions.extra["open_client"]``: this plugin sits below the client
#: layer and never imports it.
OpenClient = Callable[[NativeRequest], AbstractAsyncContextManager[NativeClient]]


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
    #: The sub-agents (``AgentDefinition``) a stream's session may delegate
    #: to (``serve`` passes the serving user's with ``--server-tools``),
    #: less those the stream's ``exclude_tools`` names or its
    #: ``core_tools`` (when given) does not.
    agents: tuple[Any, ...] = ()


@dataclass(frozen=True)
class Native:
    """How a stream reaches the server: ``open_client`` connects to
    ``address``; ``token_for(principal)`` is a one-use token that makes the
    connection that principal's there (None when the listener has no auth)."""

    open_client: OpenClient
    address: str
    token_for: Callable[[Principal | None], str | None]


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


def error_response(status: grpc.StatusCode, code: str, message: str) -> pb.ServerResponse:
    """``ErrorResponse``: the status number, and the stable code first."""
    return pb.ServerResponse(error=pb.ErrorResponse(message=f"{code}: {message}", code=status.value[0]))


async def run_chat(*, principal: Principal | None, peer: str, native: Native, policy: FacePolicy,
                   receive_request: ReceiveRequest, send_response: SendResponse) -> End:
    """Serve one ``Chat`` stream to its end (see the module docstring),
    its session reached through ``native``. Returns how the RPC ends;
    raises only ``trio.Cancelled``."""
    chat = _Chat(principal, peer, native, policy, receive_request, send_response)
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
    def __init__(self, principal: Principal | None, peer: str, native: Native, policy: FacePolicy,
                 receive_request: ReceiveRequest, send_response: SendResponse):
        self.principal = principal
        self.peer = peer
        self.native = native
        self.policy = policy
        self.receive_request = receive_request
        self.send_response = send_response
        #: The stream's turns, folded: _relay renders the changes.
        self.turn = Turn()
        self.session_id = ""
        self.context: SessionContext | None = None
        self.model: str | None = None
        #: A fatal error the session sent (the stream ends with it once the
        #: turn is over): events arrive in the client's reader task, which
        #: must not be made to raise.
        self.fatal: _Refused | None = None

    async def run(self) -> End:
        first = await self.receive_request()
        if first is None:
            return End()
        start = self._check_start(first)
        request = NativeRequest(
            address=self.native.address, token=self.native.token_for(self.principal), peer=self.peer,
            session_id=start.session_id, max_message_size=self.policy.max_message_size, on_event=self._relay,
            server_tools=self.policy.server_tools, auto_approve=start.auto_approve,
            core_tools=start.core_tools, exclude_tools=start.exclude_tools,
        )
        try:
            async with self.native.open_client(request) as client:
                self.client = client
                self.session_id = client.connected.session_id
                log.info("gRPC stream from %s: session %s", self.peer, self.session_id)
                return await self._converse(start)
        except AuthenticationFailed as exc:  # the one-use token: our bug, not the caller's
            raise _Refused(grpc.StatusCode.INTERNAL, ErrorCode.INTERNAL.value, str(exc)) from None
        except ConnectFailed as exc:
            code = getattr(exc, "code", None)
            if code is None:
                raise _Refused(grpc.StatusCode.UNAVAILABLE, ErrorCode.CONNECTION_LOST.value,
                               f"the session ended: {exc}") from None
            raise _Refused(_HELLO_STATUS.get(code, grpc.StatusCode.INTERNAL), code, str(exc)) from None

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
        self.model = start.model
        files = (ContextFile(path="advanced_config.userMemory", content=start.user_memory, scope="global"),) \
            if start.user_memory else ()
        excluded, only = set(start.exclude_tools), set(start.core_tools)
        agents = tuple(a for a in self.policy.agents if a.name not in excluded and (not only or a.name in only))
        self.context = SessionContext(files=files, interactive=False, agents=agents)
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

    async def _session_info(self) -> None:
        await self.send_response(pb.ServerResponse(session_info=pb.SessionInfo(session_id=self.session_id)))

    async def _turn(self, prompt: str) -> None:
        """One prompt, to its ``finished`` or ``error``, then SessionInfo.
        When the RPC ends meanwhile, the turn is cancelled and the session
        given :data:`CANCEL_GRACE` seconds to take it (closing at once
        could end the connection before the session read the ``cancel``)."""
        if self.fatal is not None:
            raise self.fatal
        self._check_prompt_size(prompt)
        client = self.client
        outcome: Any = None
        refused: LocalProtocolError | None = None
        done = trio.Event()
        # The turn itself is not cancelled with the RPC: it ends when the
        # session has taken the cancel (or after the grace).
        turn_scope = trio.CancelScope(shield=True)

        async def run_turn() -> None:
            nonlocal outcome, refused
            try:
                with turn_scope:
                    outcome = await client.run_turn(prompt, model=self.model, context=self.context)
            except LocalProtocolError as exc:  # over the limit (JSON escapes can make it larger than the protobuf)
                refused = exc
            finally:
                done.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_turn)
            try:
                await done.wait()
            except BaseException:
                with trio.CancelScope(shield=True) as scope:
                    scope.deadline = trio.current_time() + CANCEL_GRACE
                    await client.cancel()
                    await done.wait()
                turn_scope.cancel()
                raise
        if refused is not None:
            raise _Refused(grpc.StatusCode.RESOURCE_EXHAUSTED, ErrorCode.MESSAGE_TOO_LARGE.value,
                           f"the prompt is too large: {refused}")
        # Later turns keep the session's context; send it once.
        self.context = None
        if self.fatal is not None:
            raise self.fatal
        error = getattr(outcome, "error", None)
        if error is not None and error.fatal:  # the connection went: no event said so
            raise _Refused(grpc.StatusCode.UNAVAILABLE, error.code, f"the session ended: {error.message}")
        await self._session_info()

    def _check_prompt_size(self, prompt: str) -> None:
        """Refuse a prompt whose native request would be over the limit
        (JSON escapes can make it larger than the protobuf one): the
        session's end of the connection would drop the connection for it."""
        request = stamp(GenerateContentRequest(prompt=prompt, model=self.model, context=self.context))
        try:
            size = len(encode(request))
        except ProtocolError:
            return  # the client refuses it, in its words
        limit = self.policy.max_message_size
        if size > limit:
            raise _Refused(grpc.StatusCode.RESOURCE_EXHAUSTED, ErrorCode.MESSAGE_TOO_LARGE.value,
                           f"the prompt is too large: {request.TYPE} of {size} characters is over the limit of {limit}")

    async def _relay(self, event: ServerEvent) -> None:
        """Send what ``event`` means to the gRPC client."""
        if self.fatal is not None:
            return
        for change in self.turn.apply(event):
            if isinstance(change, TextAdded):
                await self.send_response(pb.ServerResponse(text_response=pb.TextResponse(content=change.text)))
            elif isinstance(change, AgentBegan | AgentOutput | AgentEnded):
                await self.send_response(_agent_response(change))
            elif isinstance(change, ThoughtAdded):
                await self.send_response(pb.ServerResponse(thought_response=pb.ThoughtResponse(thought=change.text)))
            elif isinstance(change, HistoryCompressed):
                # gemini.v1 has no message for it: a thought, as the ACP face says it.
                await self.send_response(pb.ServerResponse(thought_response=pb.ThoughtResponse(
                    thought=change.describe())))
            elif isinstance(change, ToolCallStarted):
                if not self.policy.server_tools:
                    continue  # no tools: the client refused the call (below)
                started = pb.ToolStartedResponse(name=change.name, agent_id=change.agent_id, call_id=change.call_id)
                started.args.update(_json_safe(change.args))
                await self.send_response(pb.ServerResponse(tool_started=started))
            elif isinstance(change, ToolCallEnded):
                if not self.policy.server_tools:
                    if change.error is not None and change.error.code == NO_TOOLS:
                        await self._no_tools(change.name)
                    continue
                summary = (summarize(change.result) if change.error is None
                           else f"error: {change.error.code}: {change.error.message}")
                await self.send_response(pb.ServerResponse(tool_ended=pb.ToolEndedResponse(
                    name=change.name, result_summary=summary, agent_id=change.agent_id, call_id=change.call_id)))
            elif isinstance(change, Notice | TurnEnded):
                code, message, fatal = ((change.code, change.message, change.fatal) if isinstance(change, Notice)
                                        else (change.error_code, change.error_message, change.fatal))
                if code is not None:
                    if fatal:
                        self.fatal = _Refused(grpc.StatusCode.UNAVAILABLE, code, message or "")
                        return
                    await self.send_response(error_response(_status_of(code), code, message or ""))

    async def _no_tools(self, tool: str) -> None:
        """A gRPC session without server tools has none: the native client
        told the model (``no_tools``); the gRPC client is told too."""
        message = (f"the model asked for the tool {_quote(tool)}, but this server runs no tools for "
                   "gRPC sessions (its operator can enable them with serve --server-tools)")
        await self.send_response(error_response(grpc.StatusCode.UNIMPLEMENTED, NO_TOOLS, message))

def _agent_response(change: AgentBegan | AgentOutput | AgentEnded) -> pb.ServerResponse:
    """A sub-agent's start, text or thought, or end as gRPC: its task and
    summary cut to :data:`AGENT_TEXT_CHARS`, its tool lists to
    :data:`AGENT_TOOL_NAMES` (its text goes as it came, as the main
    agent's does: the session's outbox merges a flood of deltas). Its text
    and thoughts are ``agent_text`` / ``agent_thought``, members a client
    generated from the seed's proto skips: in ``text_response`` they would
    join that client's answer."""
    if isinstance(change, AgentOutput):
        if change.thought:
            return pb.ServerResponse(agent_thought=pb.AgentThoughtResponse(agent_id=change.agent_id,
                                                                           thought=change.text))
        return pb.ServerResponse(agent_text=pb.AgentTextResponse(agent_id=change.agent_id, content=change.text))
    state = change.state
    if isinstance(change, AgentBegan):
        return pb.ServerResponse(agent_started=pb.AgentStartedResponse(
            agent_id=change.agent_id, name=state.name, parent_call_id=state.parent_call_id, model=state.model,
            task=_cut(state.task), tools=state.tools[:AGENT_TOOL_NAMES],
            refused_tools=state.refused_tools[:AGENT_TOOL_NAMES]))
    usage = state.usage
    tokens = pb.TokenUsage(
        prompt_tokens=usage.prompt_tokens, output_tokens=usage.output_tokens,
        thinking_tokens=usage.thinking_tokens, cached_tokens=usage.cached_tokens,
        total_tokens=usage.total_tokens, tool_tokens=usage.tool_tokens) if usage is not None else None
    return pb.ServerResponse(agent_finished=pb.AgentFinishedResponse(
        agent_id=change.agent_id, name=state.name, parent_call_id=state.parent_call_id,
        outcome=state.outcome or "", turns=state.turns, tool_calls=state.tool_calls,
        summary=_cut(state.summary), usage=tokens))


def _cut(text: str) -> str:
    return text if len(text) <= AGENT_TEXT_CHARS else text[:AGENT_TEXT_CHARS - 1] + "…"


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


#: The status of a refused ``hello`` (by the server's error code).
_HELLO_STATUS = {
    ErrorCode.UNKNOWN_SESSION.value: grpc.StatusCode.NOT_FOUND,
    ErrorCode.UNAUTHORIZED.value: grpc.StatusCode.UNAUTHENTICATED,
    ErrorCode.SHUTTING_DOWN.value: grpc.StatusCode.UNAVAILABLE,
    ErrorCode.APPROVAL_MODE_REFUSED.value: grpc.StatusCode.PERMISSION_DENIED,
    ErrorCode.SERVER_TOOLS_DISABLED.value: grpc.StatusCode.FAILED_PRECONDITION,
    ErrorCode.INVALID_FIELD.value: grpc.StatusCode.INVALID_ARGUMENT,
}

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
