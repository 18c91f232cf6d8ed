"""Every message of the gemini-split protocol, as frozen dataclasses.

Each message class has a ``TYPE`` (its ``type`` on the wire) and a ``SENDER``
(``"client"`` or ``"server"``). Every message carries ``id`` and
``timestamp`` (milliseconds since the epoch). Events a server sends within a
session (:class:`ServerEvent`) also carry ``seq``: assigned when the event is
sent, strictly increasing per session, so a client that reconnects can ask for
everything after the last ``seq`` it saw.

Field names are snake_case on the wire exactly as here. ``docs/protocol.md``
shows a JSON example of each message; ``tests/protocol`` checks that it does.
"""

from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

PROTOCOL_VERSION = "1.0"
"""``MAJOR.MINOR``. Peers with another major version cannot talk; a higher
minor version only adds optional fields and message types."""

_ids = itertools.count(1)
_id_prefix = os.urandom(4).hex()


def new_id() -> str:
    """A message id unique within this process and very likely beyond it."""
    return f"{_id_prefix}-{next(_ids)}"


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True, kw_only=True)
class Message:
    """Fields every message has."""

    TYPE: ClassVar[str] = ""
    SENDER: ClassVar[str] = ""

    id: str = field(default_factory=new_id)
    timestamp: int = field(default_factory=now_ms)


@dataclass(frozen=True, kw_only=True)
class ClientMessage(Message):
    SENDER: ClassVar[str] = "client"


@dataclass(frozen=True, kw_only=True)
class ServerMessage(Message):
    SENDER: ClassVar[str] = "server"


@dataclass(frozen=True, kw_only=True)
class ServerEvent(ServerMessage):
    """An event of a session. ``seq`` is set by the session's event log when
    the event is sent; ``request_id`` names the ``generate_content_request``
    it belongs to, when it belongs to one."""

    seq: int | None = None
    request_id: str | None = None


# --- shared payload types ---------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ToolSpec:
    """A tool the client offers: ``parameters`` is a JSON schema (object)."""

    name: str
    description: str
    parameters: dict = field(default_factory=lambda: {"type": "object", "properties": {}})


@dataclass(frozen=True, kw_only=True)
class Usage:
    """Token counts, summed over every model call of a request."""

    prompt_tokens: int = 0
    output_tokens: int = 0
    thinking_tokens: int = 0
    cached_tokens: int = 0
    total_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            thinking_tokens=self.thinking_tokens + other.thinking_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
        )


@dataclass(frozen=True, kw_only=True)
class ToolFailure:
    """Why a tool call failed, in words a model can act on.

    ``code`` is short and stable (``not_found``, ``outside_workspace``,
    ``refused``, ``timeout``…); ``message`` says what happened; ``hint`` says
    what to try instead.
    """

    code: str
    message: str
    hint: str | None = None


# --- handshake --------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Hello(ClientMessage):
    """First message of a connection. ``token`` authenticates on transports
    that have no headers of their own. To resume a session, name it with its
    ``session_id`` and ``resume_token`` and say the last ``seq`` seen."""

    TYPE: ClassVar[str] = "hello"

    protocol_version: str = PROTOCOL_VERSION
    client: str = ""
    capabilities: list[str] = field(default_factory=list)
    token: str | None = None
    session_id: str | None = None
    resume_token: str | None = None
    last_seq: int | None = None


@dataclass(frozen=True, kw_only=True)
class Connected(ServerMessage):
    """The server's answer to ``hello``: the session is open."""

    TYPE: ClassVar[str] = "connected"

    protocol_version: str = PROTOCOL_VERSION
    server: str = ""
    session_id: str
    resume_token: str | None = None
    resumed: bool = False
    model: str = ""
    capabilities: list[str] = field(default_factory=list)


# --- client to server -------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ToolDiscovery(ClientMessage):
    """The tools this client runs. Replaces any earlier announcement."""

    TYPE: ClassVar[str] = "tool_discovery"

    tools: list[ToolSpec] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class GenerateContentRequest(ClientMessage):
    """A user prompt. Its ``id`` is the ``request_id`` of every event it causes.
    ``model`` overrides the session's model for this and later requests."""

    TYPE: ClassVar[str] = "generate_content_request"

    prompt: str
    model: str | None = None


@dataclass(frozen=True, kw_only=True)
class ToolExecutionResponse(ClientMessage):
    """The outcome of a ``tool_execution_request`` (whose ``id`` is
    ``request_id`` here): exactly one of ``result`` and ``error``."""

    TYPE: ClassVar[str] = "tool_execution_response"

    request_id: str
    result: Any = None
    error: ToolFailure | None = None


@dataclass(frozen=True, kw_only=True)
class ToolDecision(ClientMessage):
    """The user's answer to ``tool_awaiting_approval``. ``always`` approves
    this tool for the rest of the session."""

    TYPE: ClassVar[str] = "tool_decision"

    call_id: str
    approved: bool
    always: bool = False


@dataclass(frozen=True, kw_only=True)
class Cancel(ClientMessage):
    """Stop the running request (or the one named) at once."""

    TYPE: ClassVar[str] = "cancel"

    request_id: str | None = None


@dataclass(frozen=True, kw_only=True)
class GetHistory(ClientMessage):
    TYPE: ClassVar[str] = "get_history"


@dataclass(frozen=True, kw_only=True)
class GetState(ClientMessage):
    TYPE: ClassVar[str] = "get_state"


# --- server to client: events of a session -----------------------------------


@dataclass(frozen=True, kw_only=True)
class TextDelta(ServerEvent):
    TYPE: ClassVar[str] = "text_delta"

    content: str


@dataclass(frozen=True, kw_only=True)
class ThinkingDelta(ServerEvent):
    TYPE: ClassVar[str] = "thinking_delta"

    content: str


@dataclass(frozen=True, kw_only=True)
class ToolExecutionRequest(ServerEvent):
    """Run ``tool`` with ``parameters`` on the client and answer with a
    ``tool_execution_response`` whose ``request_id`` is this message's ``id``
    within ``timeout`` seconds."""

    TYPE: ClassVar[str] = "tool_execution_request"

    tool: str
    parameters: dict = field(default_factory=dict)
    timeout: float = 600.0


@dataclass(frozen=True, kw_only=True)
class ToolAwaitingApproval(ServerEvent):
    """A tool needs the user's yes or no (answer with ``tool_decision``).

    Sent by a server that runs tools itself; a client that runs tools locally
    asks its user without a round trip."""

    TYPE: ClassVar[str] = "tool_awaiting_approval"

    call_id: str
    tool: str
    parameters: dict = field(default_factory=dict)
    description: str = ""


@dataclass(frozen=True, kw_only=True)
class ToolStarted(ServerEvent):
    TYPE: ClassVar[str] = "tool_started"

    call_id: str
    tool: str
    parameters: dict = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class ToolDelta(ServerEvent):
    """Output of a running tool as it arrives (``stream``: stdout or stderr)."""

    TYPE: ClassVar[str] = "tool_delta"

    call_id: str
    content: str
    stream: str = "stdout"


@dataclass(frozen=True, kw_only=True)
class ToolCompleted(ServerEvent):
    TYPE: ClassVar[str] = "tool_completed"

    call_id: str
    tool: str
    result: Any = None


@dataclass(frozen=True, kw_only=True)
class ToolError(ServerEvent):
    """A tool failed, was refused, timed out or was cancelled."""

    TYPE: ClassVar[str] = "tool_error"

    call_id: str
    tool: str
    error: ToolFailure


@dataclass(frozen=True, kw_only=True)
class Finished(ServerEvent):
    """The request is over. ``reason``: ``stop`` (the model is done) or
    ``cancelled``. ``turns`` counts model calls made for the request."""

    TYPE: ClassVar[str] = "finished"

    usage: Usage = field(default_factory=Usage)
    turns: int = 0
    reason: str = "stop"


@dataclass(frozen=True, kw_only=True)
class Retrying(ServerEvent):
    """A transient model error; the call is repeated after ``delay`` seconds."""

    TYPE: ClassVar[str] = "retrying"

    attempt: int
    max_attempts: int
    delay: float
    error: str


@dataclass(frozen=True, kw_only=True)
class History(ServerEvent):
    """The conversation so far (answer to ``get_history``), as Gemini
    ``Content`` objects: ``{"role": "user"|"model", "parts": [...]}``."""

    TYPE: ClassVar[str] = "history"

    in_reply_to: str | None = None
    messages: list[dict] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class State(ServerEvent):
    """Where the session stands (answer to ``get_state``)."""

    TYPE: ClassVar[str] = "state"

    in_reply_to: str | None = None
    session_id: str = ""
    model: str = ""
    busy: bool = False
    active_request_id: str | None = None
    pending_tool_calls: list[str] = field(default_factory=list)
    history_length: int = 0
    last_seq: int = 0


@dataclass(frozen=True, kw_only=True)
class Error(ServerEvent):
    """Something went wrong. ``code`` is stable (see ``ErrorCode``); if
    ``fatal``, the connection or session is no longer usable.
    ``in_reply_to`` names the message that caused it, when one did."""

    TYPE: ClassVar[str] = "error"
    # Either side answers a message it cannot handle with an error.
    SENDER: ClassVar[str] = "either"

    code: str
    message: str
    fatal: bool = False
    in_reply_to: str | None = None


CLIENT_MESSAGES: tuple[type[ClientMessage], ...] = (
    Hello,
    ToolDiscovery,
    GenerateContentRequest,
    ToolExecutionResponse,
    ToolDecision,
    Cancel,
    GetHistory,
    GetState,
)
SERVER_MESSAGES: tuple[type[ServerMessage], ...] = (
    Connected,
    TextDelta,
    ThinkingDelta,
    ToolExecutionRequest,
    ToolAwaitingApproval,
    ToolStarted,
    ToolDelta,
    ToolCompleted,
    ToolError,
    Finished,
    Retrying,
    History,
    State,
    Error,
)
MESSAGE_TYPES: dict[str, type[Message]] = {
    cls.TYPE: cls for cls in CLIENT_MESSAGES + SERVER_MESSAGES
}
