"""What a peer older than us may be sent: one table, applied by the
:class:`~.connection.Connection` (as h11 keeps HTTP versions in its
connection, not in its callers).

A newer minor version only adds message types and fields (see
:data:`~.messages.PROTOCOL_VERSION`). Each row of :data:`SINCE` names one
of them (a message type, or a field of one), the version that added it, and
what happens when the peer speaks an older one:

* ``skip``: the message is not sent (the peer knows nothing of it);
* ``convert``: what the peer can read is sent instead (a field left out, a
  notice in words);
* ``refuse``: sending it is a bug of ours (the caller asks
  :meth:`~.connection.Connection.too_old_for` first and tells its user):
  :class:`LocalProtocolError` ``unknown_type``.

Rows apply in order, each to what the rows before it left. The
:class:`Connection` applies them in :meth:`~.connection.Connection.send`
once the handshake told it the version both ends speak; what a server sends
without passing :meth:`~.connection.Connection.send` — a replay from the
session's log, the Redis relay's events, which are encoded text — goes
through :func:`adapted_text`, the same rows.

Sub-agents (1.4): an older client is sent the main agent's events, and of a
sub-agent's only what it must answer — its ``tool_execution_request`` (the
client runs the session's tools) and its approval questions
(``tool_awaiting_approval`` / ``tool_decided``, which carry ``agent_id``
since 1.2): an approval is never invisible to the one who must answer it.
The main agent's own call of the sub-agent's tool (``tool_started`` …
``tool_completed`` with ``agent_id`` 0) shows such a client the delegation
as an ordinary tool call.

A capability a client lists in ``hello`` counts only from the version that
has it (:data:`CAPABILITIES_SINCE`, :func:`usable_capabilities`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, NamedTuple

from msgspec.structs import replace

from .codec import decode, encode
from .error_codes import ErrorCode, LocalProtocolError
from .messages import (
    AGENT_MCP_SINCE,
    AGENT_POLICY_SINCE,
    MODE_SWITCH_SINCE,
    ANNOUNCED_REQUESTS_SINCE,
    ASK_USER_CAPABILITY,
    ASK_USER_SINCE,
    COMPRESSION_SINCE,
    EDIT_REVIEW_SINCE,
    PAIRING_SINCE,
    REMOTE_AGENTS_SINCE,
    RESTORE_SINCE,
    REWIND_SINCE,
    SESSION_CLIENTS_SINCE,
    SESSION_SCOPE_SINCE,
    SUBAGENTS_SINCE,
    SYSTEM_PROMPT_SINCE,
    TOOL_HOOKS_CAPABILITY,
    TOOL_HOOKS_SINCE,
    TYPED_PROMPT_SINCE,
    AgentFinished,
    ApprovalModeChanged,
    AgentStarted,
    ClientsChanged,
    Compress,
    Compressed,
    Error,
    GenerateContentRequest,
    GetSystemPrompt,
    Hello,
    HookResponse,
    Message,
    Pair,
    RequestStarted,
    Restore,
    Retrying,
    Rewind,
    Rewound,
    Sessions,
    TextDelta,
    ThinkingDelta,
    ToolAwaitingApproval,
    ToolCallAnswered,
    ToolCompleted,
    ToolDecided,
    ToolDecision,
    ToolDelta,
    ToolDiscovery,
    ToolError,
    ToolProgress,
    ToolStarted,
    version_tuple,
)

Version = tuple[int, int]


class Since(NamedTuple):
    """One row (a NamedTuple: no dataclass on the thin -p path): ``what`` of ``message`` (``""``: the message type itself,
    else the field, dotted from the message) exists from ``version`` on; a
    peer older than that gets ``action``, for the messages ``about``
    selects (None: every one of the type)."""

    version: Version
    message: type[Message]
    what: str
    action: Literal["skip", "convert", "refuse"]
    about: Callable[[Any], bool] | None = None
    #: ``convert``: what the peer is sent instead.
    convert: Callable[[Any], Message] | None = None


def _rewound_notice(event: Rewound) -> Error:
    """What a client older than 1.4 gets instead of ``rewound`` (it cannot
    read it): the non-fatal ``error`` ``session_rewound``, saying that what
    it shows is stale (its ``id``, ``timestamp`` and ``seq`` are the
    event's: no clock here)."""
    return Error(id=event.id, timestamp=event.timestamp, code=ErrorCode.SESSION_REWOUND.value, seq=event.seq,
                 message=(f"{event.by or 'another client'} rewound this session to before one of its prompts "
                          f"({event.points} left): what is shown above that point is no longer part of the "
                          "conversation; resume the session to see it as it is now (this client speaks an older "
                          "protocol than 1.4)"))


def _sessions(**cleared: Any) -> Callable[[Sessions], Sessions]:
    def convert(message: Sessions) -> Sessions:
        return replace(message, sessions=tuple(replace(s, **cleared) for s in message.sessions))
    return convert


def _agents(keep: Callable[[Any], bool]) -> Callable[[GenerateContentRequest], GenerateContentRequest]:
    def convert(message: GenerateContentRequest) -> GenerateContentRequest:
        context = message.context
        return replace(message, context=replace(context, agents=tuple(a for a in context.agents if keep(a))))
    return convert


def _has_agents(message: GenerateContentRequest) -> bool:
    return message.context is not None and bool(message.context.agents)


def _any_agent(test: Callable[[Any], bool]) -> Callable[[GenerateContentRequest], bool]:
    return lambda message: _has_agents(message) and any(test(a) for a in message.context.agents)


def _without_own_mcp_tools(message: GenerateContentRequest) -> GenerateContentRequest:
    context = message.context
    return replace(message, context=replace(context, agents=tuple(
        replace(a, mcp_tools=()) if a.mcp_tools else a for a in context.agents)))


def _without_system_prompt(message: GenerateContentRequest) -> GenerateContentRequest:
    return replace(message, context=replace(message.context, system_prompt=None))


#: A sub-agent's own events (``agent_id`` not 0): an older client is not
#: sent them (its tool requests and approvals are: see the module).
_SUB_AGENT_EVENTS = (TextDelta, ThinkingDelta, ToolStarted, ToolDelta, ToolCompleted, ToolError, Retrying)


#: Every message type or field a peer older than its version is not sent
#: as it is, in the order the rows apply.
SINCE: tuple[Since, ...] = (
    # server -> client
    *(Since(ANNOUNCED_REQUESTS_SINCE, cls, "", "skip")
      for cls in (RequestStarted, ClientsChanged, ToolCallAnswered, ToolDecided)),
    Since(COMPRESSION_SINCE, Compressed, "", "skip"),
    Since(REWIND_SINCE, Rewound, "", "convert", convert=_rewound_notice),
    Since(SUBAGENTS_SINCE, AgentStarted, "", "skip"),
    Since(SUBAGENTS_SINCE, AgentFinished, "", "skip"),
    *(Since(SUBAGENTS_SINCE, cls, "agent_id", "skip", about=lambda e: e.agent_id != 0)
      for cls in _SUB_AGENT_EVENTS),
    # It would take ask_user's questions for a yes-or-no approval.
    Since(ASK_USER_SINCE, ToolAwaitingApproval, "questions", "skip", about=lambda e: bool(e.questions)),
    Since(SESSION_SCOPE_SINCE, Sessions, "sessions.project", "convert",
          about=lambda m: any(s.project or s.running for s in m.sessions),
          convert=_sessions(project="", running=False)),
    Since(MODE_SWITCH_SINCE, ApprovalModeChanged, "", "skip"),
    # An older client approves the edit from its description, as before.
    Since(EDIT_REVIEW_SINCE, ToolAwaitingApproval, "edit", "convert", about=lambda e: e.edit is not None,
          convert=lambda e: replace(e, edit=None)),
    Since(EDIT_REVIEW_SINCE, ToolDecided, "modified", "convert", about=lambda e: e.modified,
          convert=lambda e: replace(e, modified=False)),
    Since(SESSION_CLIENTS_SINCE, Sessions, "sessions.clients", "convert",
          about=lambda m: any(s.clients or s.attached for s in m.sessions),
          convert=_sessions(clients=0, attached=())),
    # client -> server
    # An older server keeps a request's tools and mode until the next request.
    Since(MODE_SWITCH_SINCE, ToolDiscovery, "approval_mode", "convert", about=lambda m: m.approval_mode is not None,
          convert=lambda m: replace(m, approval_mode=None)),
    # An older server would write the model's text, not the user's.
    Since(EDIT_REVIEW_SINCE, ToolDecision, "edit", "refuse", about=lambda m: m.edit is not None),
    Since(COMPRESSION_SINCE, Compress, "", "refuse"),
    Since(REWIND_SINCE, Rewind, "", "refuse"),
    Since(RESTORE_SINCE, Restore, "", "refuse"),
    Since(SYSTEM_PROMPT_SINCE, GetSystemPrompt, "", "refuse"),
    Since(PAIRING_SINCE, Pair, "", "refuse"),
    Since(TOOL_HOOKS_SINCE, HookResponse, "", "refuse"),
    Since(REMOTE_AGENTS_SINCE, ToolProgress, "", "refuse"),
    Since(SUBAGENTS_SINCE, GenerateContentRequest, "context.agents", "convert", about=_has_agents,
          convert=_agents(lambda a: False)),
    Since(REMOTE_AGENTS_SINCE, GenerateContentRequest, "context.agents.kind", "convert",
          about=_any_agent(lambda a: a.kind == "remote"), convert=_agents(lambda a: a.kind != "remote")),
    # An older server would run an agent the client's policy denies.
    Since(AGENT_POLICY_SINCE, GenerateContentRequest, "context.agents.denied", "convert",
          about=_any_agent(lambda a: a.denied is not None), convert=_agents(lambda a: a.denied is None)),
    Since(AGENT_MCP_SINCE, GenerateContentRequest, "context.agents.mcp_tools", "convert",
          about=_any_agent(lambda a: bool(a.mcp_tools)), convert=_without_own_mcp_tools),
    # An older server ignores it (a client refuses to start with one: GEMINI_SYSTEM_MD).
    Since(SYSTEM_PROMPT_SINCE, GenerateContentRequest, "context.system_prompt", "convert",
          about=lambda m: m.context is not None and m.context.system_prompt is not None,
          convert=_without_system_prompt),
    # An older server titles the session by the prompt's text, as before.
    Since(TYPED_PROMPT_SINCE, GenerateContentRequest, "typed", "convert", about=lambda m: bool(m.typed),
          convert=lambda m: replace(m, typed="")),
)

#: The capabilities a client lists in ``hello`` that count only from a version.
CAPABILITIES_SINCE: dict[str, Version] = {TOOL_HOOKS_CAPABILITY: TOOL_HOOKS_SINCE, ASK_USER_CAPABILITY: ASK_USER_SINCE}

_NEWEST: Version = max(row.version for row in SINCE)
#: The newest row about what a server sends: a client of that version is
#: sent every text as it is (the replay and relay decode nothing for it).
_NEWEST_FROM_SERVER: Version = max(row.version for row in SINCE if row.message.SENDER == "server")
_BY_TYPE: dict[type, tuple[Since, ...]] = {
    cls: tuple(row for row in SINCE if row.message is cls) for cls in dict.fromkeys(row.message for row in SINCE)}
_BY_TAG = {cls.TYPE: rows for cls, rows in _BY_TYPE.items()}
_TAG_START = '{"type":"'


class TooOld(NamedTuple):
    """A peer's protocol lacks something: it speaks ``peer``, ``since`` has
    it (both ``"MAJOR.MINOR"``)."""

    peer: str
    since: str


def too_old_for(version: Version, message: type[Message], what: str = "") -> TooOld | None:
    """None when a peer of ``version`` knows ``message`` (``what``: one of
    its fields, as :data:`SINCE` names it), else the version it speaks
    and the one that has it. Raises :class:`KeyError` for what no row names."""
    for row in _BY_TYPE.get(message, ()):
        if row.what == what:
            return TooOld(_dotted(version), _dotted(row.version)) if version < row.version else None
    raise KeyError(f"no version row for {message.TYPE} {what!r}".rstrip())


def adapted(message: Message, version: Version) -> Message | None:
    """``message`` as a peer of ``version`` may be sent it: itself, what the
    rows convert it to, or None (not sent). Raises
    :class:`LocalProtocolError` (``unknown_type``) for a ``refuse`` row."""
    if version >= _NEWEST:
        return message
    for row in _BY_TYPE.get(type(message), ()):
        if version >= row.version or (row.about is not None and not row.about(message)):
            continue
        if row.action == "skip":
            return None
        if row.action == "refuse":
            raise LocalProtocolError(ErrorCode.UNKNOWN_TYPE, (
                f"{message.TYPE} {row.what + ' ' if row.what else ''}is not part of protocol {_dotted(version)}, "
                f"which the peer speaks ({_dotted(row.version)} has it)"), field=row.what or "type")
        assert row.convert is not None
        message = row.convert(message)
        if type(message) is not row.message:
            return message  # a notice in another type: no row of ours is about it
    return message


def adapted_text(text: str, version: Version) -> str | None:
    """:func:`adapted` for a message as we encoded it (msgspec writes the
    ``type`` tag first; marked ``replayed`` or not): the same text when it
    goes unchanged, its conversion encoded, or None. Decodes only the types
    :data:`SINCE` names, and only for an older peer."""
    if version >= _NEWEST_FROM_SERVER or not text.startswith(_TAG_START):
        return text
    if text[len(_TAG_START):text.find('"', len(_TAG_START))] not in _BY_TAG:
        return text
    message = decode(text, max_size=len(text))
    sent = adapted(message, version)
    if sent is None:
        return None
    return text if sent is message else encode(sent)


def usable_capabilities(hello: Hello) -> frozenset[str]:
    """The capabilities ``hello`` lists that its protocol version has (a 1.3
    client listing ``tool_hooks`` is never asked to run hooks)."""
    version = version_tuple(hello.protocol_version)
    return frozenset(c for c in hello.capabilities if version >= CAPABILITIES_SINCE.get(c, (0, 0)))


def _dotted(version: Version) -> str:
    return ".".join(map(str, version))
