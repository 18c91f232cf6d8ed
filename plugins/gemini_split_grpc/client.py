"""``--server grpc://HOST:PORT`` (and ``grpcs://``): the native protocol's
client end, spoken to a ``gemini.v1.GeminiService`` server.

:class:`GrpcClientStream` is a :class:`MessageStream` that plays the native
*server* to gemini-split's ``ProtocolClient`` and the seed's *client* to the
gRPC server, translating one into the other:

=========================================  ==============================================
native, from the client                    gRPC
=========================================  ==============================================
``hello`` (``session_id`` to resume)       a ``Chat`` call: ``StartRequest{session_id}``;
                                           its ``SessionInfo`` answers with ``connected``
``generate_content_request``               ``prompt`` (a new call with ``StartRequest``
                                           when the model or the approval mode changes:
                                           ``yolo`` → ``AUTO_APPROVE``, else
                                           ``REJECT_DANGEROUS_TOOLS``)
``cancel``                                 the call is cancelled (which cancels the turn on
                                           the server) and a new one resumes the session;
                                           the request ends ``finished`` ``cancelled``
``get_state``                              answered here from what the stream knows
``get_history``, ``list_sessions``…        ``error`` ``invalid_request``: not in the seed
``tool_discovery``                         ignored: over gRPC the server runs the tools
=========================================  ==============================================

and back: ``TextResponse`` → ``text_delta``, ``ThoughtResponse`` →
``thinking_delta`` (the main agent's), ``ToolStarted`` / ``ToolEnded`` →
``tool_started`` / ``tool_completed`` (the summary as the result; matched
by ``call_id`` when the server gives one, else by tool name),
``AgentStarted`` / ``AgentFinished`` → ``agent_started`` /
``agent_finished``, ``AgentText`` / ``AgentThought`` → ``text_delta`` /
``thinking_delta`` (each with the ``agent_id`` the response carries, so
the REPL nests a sub-agent's work under it and keeps its text out of the
answer, as for a native server; a sub-agent response that says
``agent_id`` 0, which is no sub-agent, is dropped rather than taken for
the main agent's), ``SessionInfo`` (the end of a turn) → ``finished`` — or the turn's ``error`` when an ``ErrorResponse`` was
the last thing the turn sent; an ``ErrorResponse`` followed by more of the
turn is a non-fatal ``error``. The RPC ending with a status other than OK is
a fatal ``error`` (``UNAUTHENTICATED`` → ``unauthorized``, ``NOT_FOUND`` →
``unknown_session``…), then the connection is broken.

Threads: grpcio's client blocks. Each call has one reader thread that hands
responses to Trio (``trio.from_thread.run``, so a slow reader holds it back);
requests go to grpcio through a queue it reads on its own thread.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
from typing import Any

import grpc
import trio
from google.protobuf import json_format
from msgspec.structs import replace

from gemini_split import __version__
from gemini_split.protocol import (
    AGENT_OUTCOMES,
    AgentFinished,
    AgentStarted,
    Cancel,
    Connected,
    Error,
    ErrorCode,
    Finished,
    GenerateContentRequest,
    GetState,
    Hello,
    Message,
    RemoteProtocolError,
    State,
    TextDelta,
    ThinkingDelta,
    ToolCompleted,
    ToolDiscovery,
    ToolStarted,
    Usage,
    decode,
    encode,
)
from gemini_split.stamping import stamp
from gemini_split.transport import (
    ConnectFailed,
    ConnectionBroken,
    ConnectionClosed,
    ConnectOptions,
    MessageStream,
    MessageTooLarge,
)

from . import gemini_pb2 as pb
from .address import GrpcAddress

log = logging.getLogger(__name__)

CHAT = "/gemini.v1.GeminiService/Chat"
#: Native messages waiting for ``receive``.
BUFFER = 64

_STATUS_CODES = {
    grpc.StatusCode.UNAUTHENTICATED: ErrorCode.UNAUTHORIZED,
    grpc.StatusCode.NOT_FOUND: ErrorCode.UNKNOWN_SESSION,
    grpc.StatusCode.PERMISSION_DENIED: ErrorCode.MODEL_NOT_ALLOWED,
    grpc.StatusCode.INVALID_ARGUMENT: ErrorCode.INVALID_REQUEST,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ErrorCode.MESSAGE_TOO_LARGE,
    grpc.StatusCode.UNAVAILABLE: ErrorCode.CONNECTION_LOST,
}
_END = object()


class _Call:
    """One ``Chat`` call: its request queue, the grpcio call, its reader."""

    def __init__(self, stream: GrpcClientStream, start: Any):
        self.requests: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.requests.put(pb.ClientRequest(start_request=start))
        self.superseded = False
        #: Set once the SessionInfo answering the StartRequest has arrived.
        self.started = False
        self.call = stream.chat(iter(self.requests.get, _END), metadata=stream.metadata)
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True,
                                        name="grpc-client-reader")
        self._thread.start()

    def _read(self, stream: GrpcClientStream) -> None:
        try:
            for response in self.call:
                trio.from_thread.run(stream.incoming.send, (self, response), trio_token=stream.token)
            ending: Any = (grpc.StatusCode.OK, "")
        except grpc.RpcError as exc:
            ending = (exc.code(), exc.details() or "")
        except (trio.RunFinishedError, trio.BrokenResourceError, trio.ClosedResourceError, trio.Cancelled):
            return
        try:
            trio.from_thread.run(stream.incoming.send, (self, ending), trio_token=stream.token)
        except (trio.RunFinishedError, trio.BrokenResourceError, trio.ClosedResourceError, trio.Cancelled):
            pass

    def prompt(self, text: str) -> None:
        self.requests.put(pb.ClientRequest(prompt=text))

    def cancel(self) -> None:
        self.superseded = True
        self.requests.put(_END)
        self.call.cancel()


class GrpcClientStream(MessageStream):
    def __init__(self, address: GrpcAddress, channel: grpc.Channel, options: ConnectOptions):
        self.peer = address.url
        self.address = address
        self.channel = channel
        self.chat = channel.stream_stream(CHAT, request_serializer=pb.ClientRequest.SerializeToString,
                                          response_deserializer=pb.ServerResponse.FromString)
        self.metadata = [("authorization", f"Bearer {options.token}")] if options.token else None
        self.max_message_size = options.max_message_size
        self.token = trio.lowlevel.current_trio_token()
        self.incoming, self._incoming = trio.open_memory_channel[Any](BUFFER)
        self._call: _Call | None = None
        self._closed = False
        self._broken: str | None = None
        self._session_id = ""
        self._seq = 0
        self._request: GenerateContentRequest | None = None
        #: An ErrorResponse that was, so far, the last thing of the turn.
        self._turn_error: Error | None = None
        self._tool_calls = itertools.count(1)
        #: Calls started and not ended, by (agent_id, tool name).
        self._open_tools: dict[tuple[int, str], list[str]] = {}
        self._model: str | None = None
        self._auto_approve = False
        self._connected = False
        self._resuming = False
        #: The fatal error to say before the connection counts as broken.
        self._final: str | None = None

    # --- native messages from the client ------------------------------------------------

    async def send(self, message: str) -> None:
        if self._closed:
            raise ConnectionClosed("connection closed")
        if self._broken is not None:
            raise ConnectionBroken(self._broken)
        try:
            native = decode(message)
        except RemoteProtocolError as exc:  # our own client's bug
            raise ConnectionBroken(f"cannot translate a message to gRPC: {exc}") from None
        if isinstance(native, Hello):
            self._seq = native.last_seq or 0
            self._session_id = native.session_id or ""
            self._resuming = bool(native.session_id)
            self._call = _Call(self, pb.StartRequest(session_id=self._session_id))
        elif isinstance(native, GenerateContentRequest):
            self._start_turn(native)
        elif isinstance(native, Cancel):
            await self._cancel()
        elif isinstance(native, GetState):
            await self._deliver(State(in_reply_to=native.id, session_id=self._session_id, busy=self._request is not None,
                                      active_request_id=self._request.id if self._request else None,
                                      model=self._model or "", last_seq=self._seq))
        elif isinstance(native, ToolDiscovery | Error):
            pass  # no client tools over gRPC; a client's error is only for the log
        else:
            await self._deliver(Error(code=ErrorCode.INVALID_REQUEST.value, in_reply_to=native.id,
                                      message=f"{native.TYPE} is not available over gRPC (seed 001's service has "
                                              "no such message)"))

    def _start_turn(self, request: GenerateContentRequest) -> None:
        assert self._call is not None
        self._request, self._turn_error = request, None
        auto = request.context is not None and request.context.approval_mode == "yolo"
        model = request.model or self._model
        if model != self._model or (request.context is not None and auto != self._auto_approve):
            # The seed sets these at the start of a stream: start a new one
            # on the same session, with the prompt.
            self._model, self._auto_approve = model, auto
            self._call.cancel()
            self._call = _Call(self, pb.StartRequest(
                session_id=self._session_id, prompt=request.prompt, model=model or "",
                approval_mode=pb.AUTO_APPROVE if auto else pb.REJECT_DANGEROUS_TOOLS))
            return
        self._call.prompt(request.prompt)

    async def _cancel(self) -> None:
        """Cancelling the call cancels the turn on the server; a new call
        resumes the session for the next prompt."""
        request = self._request
        if request is None or self._call is None:
            return
        self._call.cancel()
        self._call = _Call(self, pb.StartRequest(
            session_id=self._session_id, model=self._model or "",
            approval_mode=pb.AUTO_APPROVE if self._auto_approve else pb.REJECT_DANGEROUS_TOOLS))
        self._request = None
        await self._deliver(Finished(request_id=request.id, reason="cancelled"))

    # --- native messages to the client ----------------------------------------------------

    async def receive(self) -> str:
        while True:
            if self._closed:
                raise ConnectionClosed("connection closed")
            if self._final is not None:
                final, self._final = self._final, None
                return final
            try:
                call, item = await self._incoming.receive()
            except (trio.EndOfChannel, trio.ClosedResourceError):
                raise ConnectionBroken(self._broken or "connection closed") from None
            if call is None:  # made here
                return item
            if call.superseded:
                continue
            if isinstance(item, tuple):
                self._ended(*item)
                continue
            for native in self._translate(call, item):
                text = encode(native)
                if len(text) > self.max_message_size:
                    raise MessageTooLarge(f"message of {len(text)} bytes is over the limit of "
                                          f"{self.max_message_size} bytes")
                return text

    async def _deliver(self, message: Message) -> None:
        await self.incoming.send((None, encode(self._event(message))))

    def _event(self, message: Message) -> Message:
        if hasattr(message, "seq"):
            self._seq += 1
            message = replace(message, seq=self._seq)
        return stamp(message)

    def _translate(self, call: _Call, response: Any) -> list[Message]:
        kind = response.WhichOneof("response")
        request_id = self._request.id if self._request else None
        if kind == "session_info":
            self._session_id = response.session_info.session_id
            if not call.started:  # the answer to the call's StartRequest
                call.started = True
                if self._connected:
                    return []
                self._connected = True
                # Protocol 1.1's flow: gemini.v1 has no request_started, so a
                # request runs from the client's generate_content_request.
                return [stamp(Connected(protocol_version="1.1",
                                        server=f"gemini.v1 at {self.peer} (gemini-split/{__version__})",
                                        session_id=self._session_id, resumed=self._resuming,
                                        model=self._model or "", capabilities=("cancel",)))]
            if self._request is None:
                return []
            request, self._request = self._request, None
            if self._turn_error is not None:
                error, self._turn_error = self._turn_error, None
                return [self._event(Error(request_id=request.id, in_reply_to=request.id, code=error.code,
                                          message=error.message))]
            return [self._event(Finished(request_id=request.id))]
        events: list[Message] = []
        if self._turn_error is not None:  # the turn went on after it: only a warning
            events.append(self._event(self._turn_error))
            self._turn_error = None
        if kind == "text_response":
            events.append(self._event(TextDelta(request_id=request_id, content=response.text_response.content)))
        elif kind == "thought_response":
            events.append(self._event(ThinkingDelta(request_id=request_id,
                                                    content=response.thought_response.thought)))
        elif kind == "agent_text" and response.agent_text.agent_id > 0:
            text = response.agent_text
            events.append(self._event(TextDelta(request_id=request_id, content=text.content,
                                                agent_id=text.agent_id)))
        elif kind == "agent_thought" and response.agent_thought.agent_id > 0:
            thought = response.agent_thought
            events.append(self._event(ThinkingDelta(request_id=request_id, content=thought.thought,
                                                    agent_id=thought.agent_id)))
        elif kind == "tool_started":
            started = response.tool_started
            # A server that names its calls: its id; the seed's: one made up.
            call_id = started.call_id or f"grpc-{next(self._tool_calls)}"
            self._open_tools.setdefault((started.agent_id, started.name), []).append(call_id)
            events.append(self._event(ToolStarted(request_id=request_id, call_id=call_id, tool=started.name,
                                                  parameters=json_format.MessageToDict(started.args),
                                                  agent_id=max(0, started.agent_id))))
        elif kind == "tool_ended":
            ended = response.tool_ended
            waiting = self._open_tools.get((ended.agent_id, ended.name), [])
            if ended.call_id:
                call_id = ended.call_id
                if call_id in waiting:
                    waiting.remove(call_id)
            else:
                call_id = waiting.pop(0) if waiting else f"grpc-{next(self._tool_calls)}"
            events.append(self._event(ToolCompleted(request_id=request_id, call_id=call_id, tool=ended.name,
                                                    result=ended.result_summary, agent_id=max(0, ended.agent_id))))
        elif kind == "agent_started" and response.agent_started.agent_id > 0:
            a = response.agent_started
            events.append(self._event(AgentStarted(
                request_id=request_id, agent_id=a.agent_id, name=a.name, parent_call_id=a.parent_call_id,
                model=a.model, task=a.task, tools=tuple(a.tools), refused_tools=tuple(a.refused_tools))))
        elif kind == "agent_finished" and response.agent_finished.agent_id > 0:
            a = response.agent_finished
            u = a.usage
            events.append(self._event(AgentFinished(
                request_id=request_id, agent_id=a.agent_id, name=a.name, parent_call_id=a.parent_call_id,
                outcome=a.outcome if a.outcome in AGENT_OUTCOMES else "error", turns=max(0, a.turns),
                tool_calls=max(0, a.tool_calls), summary=a.summary,
                usage=Usage(prompt_tokens=u.prompt_tokens, output_tokens=u.output_tokens,
                            thinking_tokens=u.thinking_tokens, cached_tokens=u.cached_tokens,
                            total_tokens=u.total_tokens, tool_tokens=u.tool_tokens))))
        elif kind == "error":
            code, _, text = response.error.message.partition(": ")
            if not text or " " in code:
                code, text = ErrorCode.INTERNAL.value, response.error.message
            error = Error(code=code, message=text)
            if self._request is not None:
                self._turn_error = error  # the turn's end, unless more of it follows
            else:
                events.append(self._event(error))
        return events

    def _ended(self, code: grpc.StatusCode, details: str) -> None:
        """The call ended: the connection is over (a fatal error first,
        unless it ended OK)."""
        if code == grpc.StatusCode.OK:
            self._broken = "the server ended the stream"
        else:
            native = _STATUS_CODES.get(code, ErrorCode.INTERNAL).value
            prefix, _, text = details.partition(": ")
            if text and " " not in prefix:
                native, details = prefix, text
            self._broken = f"{details} (gRPC {code.name})"
            self._final = encode(stamp(Error(code=native, message=details, fatal=True)))
        self.incoming.close()

    async def aclose(self, reason: str = "closed") -> None:
        if self._closed:
            return
        self._closed = True
        if self._call is not None:
            self._call.cancel()
        self.incoming.close()
        self._incoming.close()
        self.channel.close()


async def open_grpc_stream(address: str, options: ConnectOptions) -> GrpcClientStream:
    """A channel to ``address``, checked to be reachable within
    ``options.connect_timeout``; raises :class:`ConnectFailed` saying what
    to check."""
    where = GrpcAddress.parse(address)
    channel_options = [("grpc.max_receive_message_length", options.max_message_size),
                       ("grpc.max_send_message_length", options.max_message_size),
                       ("grpc.keepalive_time_ms", 20000), ("grpc.keepalive_timeout_ms", 20000)]
    if where.secure:
        root = None
        if options.ca_file:
            try:
                with open(options.ca_file, "rb") as f:
                    root = f.read()
            except OSError as exc:
                raise ConnectFailed(f"cannot read the CA file {options.ca_file}: {exc.strerror or exc}") from None
        channel = grpc.secure_channel(where.netloc, grpc.ssl_channel_credentials(root_certificates=root),
                                      options=channel_options)
    else:
        channel = grpc.insecure_channel(where.netloc, options=channel_options)
    state = await _first_outcome(channel, options.connect_timeout)
    if state is not grpc.ChannelConnectivity.READY:
        channel.close()
        hint = " (is it serving grpcs:// with a certificate your CA file trusts? pass --ca FILE)" if where.secure else ""
        why = (f"within {options.connect_timeout:g} s" if state is None
               else "(the connection was refused or failed)")
        raise ConnectFailed(f"could not reach the gRPC server at {where.url} {why}{hint}") from None
    return GrpcClientStream(where, channel, options)


async def _first_outcome(channel: grpc.Channel, timeout: float) -> grpc.ChannelConnectivity | None:
    """The channel's first attempt to connect: READY, TRANSIENT_FAILURE
    (refused, unreachable, TLS failed: said at once, as ws:// does, rather
    than after grpcio's retries fill the whole timeout), or None when
    neither came within ``timeout`` seconds."""
    seen: list[grpc.ChannelConnectivity] = []
    settled = threading.Event()
    final = (grpc.ChannelConnectivity.READY, grpc.ChannelConnectivity.TRANSIENT_FAILURE,
             grpc.ChannelConnectivity.SHUTDOWN)

    def watch(state: grpc.ChannelConnectivity) -> None:  # on a grpcio thread
        if state in final and not settled.is_set():
            seen.append(state)
            settled.set()

    channel.subscribe(watch, try_to_connect=True)
    try:
        await trio.to_thread.run_sync(settled.wait, timeout, abandon_on_cancel=True)
    finally:
        channel.unsubscribe(watch)
    return seen[0] if seen else None
