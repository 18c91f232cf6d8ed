"""The protocol's state machine: one sans-IO :class:`Connection` per end.

Every rule of a conversation lives in :data:`_RULES`, one table keyed by who
sends what. Both ends run the same table over the same stream of messages:
an end checks what it *receives* (a breach is the peer's:
:class:`RemoteProtocolError`) and what it *sends* (a breach is ours:
:class:`LocalProtocolError`). So a client and a server that both use a
:class:`Connection` agree on the state at every message, as h11's
``ConnectionState`` makes a client and a server agree.

The states:

* the **phase** of the connection (:class:`Phase`): ``awaiting_hello`` →
  (client sends ``hello``, version checked) ``awaiting_connected`` →
  (server sends ``connected``, version checked) ``open`` → ``closed`` (a
  fatal ``error``, or any ``error`` before ``open``);
* once open, the **request**: idle, or running one request
  (:class:`RequestState`: its ``request_id``, the tool calls the server
  asked the client to run and that are not answered yet, the server-side
  tool calls awaiting the user's decision). A ``generate_content_request``
  while idle starts one; exactly one ``finished`` or ``error`` with its
  ``request_id`` ends it; every event about it carries its ``request_id``;
* the **owed replies**: each ``get_state`` / ``get_history`` is answered by
  exactly one ``state`` / ``history`` (or ``error``) whose ``in_reply_to``
  is its id; a request the server refused (``busy``) is owed one ``error``;
* ``seq``: the session events an end sees carry strictly increasing
  ``seq`` numbers; :attr:`Connection.last_seq` is the last one (what a
  resuming client says in ``hello``).

What is *not* here: ids, timestamps and ``seq`` numbers are stamped by the
caller (no clock, no randomness in this package); whether a prompt is
acceptable, which model may be used, what a tool does — the session decides,
and ends a request it refuses with an ``error``.

Several clients on one session (1.2): a request is *announced* to every
attached client by ``request_started``, its first event. A client's own
``generate_content_request`` is *submitted* until then (a second one is
``busy``; the same id and prompt sent again, by a client that reconnected,
is that request, running or whose end crossed it on the wire); if another
client's request is announced first, the submitted one is owed its refusal
(``error`` ``busy``). Between two 1.1 peers a request runs from its
``generate_content_request`` as before. An ``observer``
(``hello.role``) may not prompt, cancel or answer tool calls (``forbidden``).
Events marked ``replayed`` (a late joiner's catch-up) are checked only for
``seq`` order: where the live part starts, the request state is the one
``connected`` states (``active_request_id``, ``pending_tool_calls``).
A tool call asked again of one client (``handover``, no ``seq``) may repeat
a pending id.

Growing it: resume restores the request state of a session on a fresh
connection (:meth:`Connection.restore`); server-side approvals add rows to
:data:`_RULES` and fields to :class:`RequestState`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import Enum
from typing import Any

import msgspec

from .codec import DEFAULT_MAX_MESSAGE_SIZE, check_version, decode, encode
from .error_codes import ErrorCode, LocalProtocolError, ProtocolError, RemoteProtocolError, quote
from .messages import (
    ANNOUNCED_REQUESTS_SINCE,
    DECISIONS,
    TOOL_HOOKS_CAPABILITY,
    TOOL_HOOKS_SINCE,
    HookRequest,
    HookResponse,
    Cancel,
    ApprovalModeChanged,
    ClientsChanged,
    RequestStarted,
    ToolCallAnswered,
    version_tuple,
    Connected,
    Checkpoints,
    Pair,
    PairedBrowsers,
    PairedLink,
    DeleteSession,
    ListSessions,
    Restore,
    Sessions,
    Error,
    Finished,
    Compress,
    AgentFinished,
    AgentStarted,
    Compressed,
    Rewind,
    Rewound,
    GenerateContentRequest,
    GetHistory,
    GetState,
    GetSystemPrompt,
    SystemPrompt,
    Hello,
    History,
    Message,
    Retrying,
    State,
    TextDelta,
    ThinkingDelta,
    ToolAwaitingApproval,
    ToolCompleted,
    ToolDecided,
    ToolDecision,
    ToolDelta,
    ToolDiscovery,
    ToolError,
    ToolExecutionRequest,
    ToolExecutionResponse,
    ToolProgress,
    ToolStarted,
    is_stamped,
)
from .tracker import DECIDED_KEPT, RequestState, RequestTracker  # noqa: F401 (DECIDED_KEPT: said here before)
from .versions import TooOld, adapted, adapted_text, too_old_for

CLIENT = "client"
SERVER = "server"


class Phase(Enum):
    AWAITING_HELLO = "awaiting_hello"
    AWAITING_CONNECTED = "awaiting_connected"
    OPEN = "open"
    CLOSED = "closed"


class _Breach(Exception):
    """A rule was broken; the :class:`Connection` says by whom."""

    def __init__(self, code: ErrorCode, text: str, *, field: str | None = "type", names_message: bool = True):
        super().__init__(text)
        self.code = code
        self.field = field
        #: False when the message's id cannot name the reply (it names
        #: another message still owed one).
        self.names_message = names_message


class _Conversation(msgspec.Struct):
    """The state both ends agree on; what the rules read and change."""

    phase: Phase = Phase.AWAITING_HELLO
    #: The running request and the approvals settled lately (changed by
    #: the rules once a message passed their checks).
    tracker: RequestTracker = msgspec.field(default_factory=RequestTracker)
    #: ids of get_state/get_history, and of refused requests, owed a reply.
    owed_replies: set[str] = msgspec.field(default_factory=set)
    last_seq: int = 0
    #: 1.2 on both ends: requests are announced by ``request_started``.
    announced: bool = False
    #: The client's own request, sent but not announced yet (1.2).
    submitted: str | None = None
    #: The prompt, as shown, of the request submitted or running (None when
    #: unknown), and the id and prompt of the one that ended last: a prompt
    #: sent again with its id *and* its text is that request.
    prompt: str | None = None
    last_ended: tuple[str, str | None] | None = None
    #: The client attached read-only (``hello.role == "observer"``).
    observer: bool = False
    hello_version: tuple[int, int] = (0, 0)
    #: The version both ends speak (the lower of hello's and connected's).
    version: tuple[int, int] = (0, 0)
    #: (1.4) The hello listed ``tool_hooks`` …
    hooks_offered: bool = False
    #: … and both ends speak 1.4: the server may send ``hook_request``.
    tool_hooks: bool = False
    #: (1.4) ``hook_request`` ids not answered yet → their request_id.
    pending_hooks: dict[str, str] = msgspec.field(default_factory=dict)

    @property
    def request(self) -> RequestState | None:
        return self.tracker.request


# --- the rules ---------------------------------------------------------------
#
# Each rule checks one message against the conversation and raises _Breach
# when it may not be sent now; only when every check passed does it change
# the state. The phase (first column of the table) is checked before it.


def _hello(c: _Conversation, m: Hello) -> None:
    _check_version(m.protocol_version)
    if m.new_session_id is not None:
        if not is_chosen_session_id(m.new_session_id):
            raise _Breach(ErrorCode.INVALID_FIELD,
                          f"new_session_id {quote(m.new_session_id)} must be 1-128 letters, digits, '-' or '_'",
                          field="new_session_id")
        if m.session_id is not None:
            raise _Breach(ErrorCode.INVALID_FIELD,
                          "new_session_id opens a new session; it cannot be combined with session_id (a resume)",
                          field="new_session_id")
    c.hello_version = version_tuple(m.protocol_version)
    c.observer = m.role == "observer"
    c.hooks_offered = TOOL_HOOKS_CAPABILITY in m.capabilities and m.role != "observer"
    c.phase = Phase.AWAITING_CONNECTED


_CHOSEN_SESSION_ID = r"[A-Za-z0-9_-]{1,128}"  # compiled on first use (not at import)


def is_chosen_session_id(value: str) -> bool:
    """Whether ``value`` may name a new session (``hello.new_session_id``,
    gemini-cli's ``--session-id`` rule plus a length limit)."""
    return re.fullmatch(_CHOSEN_SESSION_ID, value) is not None


def _connected(c: _Conversation, m: Connected) -> None:
    _check_version(m.protocol_version)
    c.version = min(c.hello_version, version_tuple(m.protocol_version))
    c.announced = c.version >= ANNOUNCED_REQUESTS_SINCE
    c.tool_hooks = c.hooks_offered and c.version >= TOOL_HOOKS_SINCE
    if m.active_request_id is not None:
        c.tracker.restore(RequestState(m.active_request_id, set(m.pending_tool_calls), set(m.pending_approvals)))
    c.phase = Phase.OPEN


def _driver_only(c: _Conversation, m: Message) -> None:
    if c.observer:
        raise _Breach(ErrorCode.FORBIDDEN, f"this client attached as an observer (read-only): "
                      f"it may not send {_kind(m)}", field=None)


def _check_version(version: Any) -> None:
    try:
        check_version(version)
    except RemoteProtocolError as exc:
        raise _Breach(exc.code, str(exc), field="protocol_version") from None


def _nothing(c: _Conversation, m: Message) -> None:
    pass


def _start_request(c: _Conversation, m: GenerateContentRequest | Compress | Rewind) -> None:
    _driver_only(c, m)
    running = c.request.request_id if c.request is not None else c.submitted
    shown = _shown(m)
    if m.id == running and c.prompt in (None, shown) or running is None and c.last_ended == (m.id, shown):
        # Sent again by a client that reconnected: that very request, which
        # goes on, or whose end crossed this on the wire (no reply owed).
        return
    if running is not None:
        raise _Breach(
            ErrorCode.BUSY,
            f"request {quote(running)} is still running; cancel it or wait",
            field=None,
        )
    c.prompt = shown
    if c.announced:
        c.submitted = m.id
    else:
        c.tracker.begin(m.id)


def _shown(m: GenerateContentRequest | Compress | Rewind) -> str | None:
    """A request's prompt as its ``request_started`` shows it."""
    if isinstance(m, GenerateContentRequest):
        return m.shown
    return "/compress" if isinstance(m, Compress) else None


def _rewind(c: _Conversation, m: Rewind) -> None:
    """(1.4) A rewind that re-proposes a call is a request (as ``compress``
    is); a plain one is owed its ``rewound`` (or an ``error``), and neither
    may be sent while a request runs."""
    if m.repropose_call_id is not None:
        _start_request(c, m)
        return
    _driver_only(c, m)
    running = c.request.request_id if c.request is not None else c.submitted
    if running is not None:
        raise _Breach(ErrorCode.BUSY, f"request {quote(running)} is still running; a session cannot be rewound "
                      "while a request runs: cancel it or wait", field=None)
    _expect_reply(c, m)


def _rewound(c: _Conversation, m: Rewound) -> None:
    """(1.4) Inside the request a re-proposing rewind started, or between
    requests (answering a ``rewind`` of this client's, or another's)."""
    if m.request_id is not None:
        _in_request(c, m)
        return
    if c.request is not None:
        raise _Breach(ErrorCode.UNEXPECTED_MESSAGE,
                      f"rewound while request {quote(c.request.request_id)} runs", field="request_id")
    _event(c, m)
    if m.in_reply_to is not None:
        c.owed_replies.discard(m.in_reply_to)


def _announce_request(c: _Conversation, m: RequestStarted) -> None:
    if c.request is not None and c.request.request_id != m.request_id:
        raise _Breach(ErrorCode.UNEXPECTED_MESSAGE,
                      f"request_started for {quote(m.request_id)} while {quote(c.request.request_id)} runs",
                      field="request_id")
    _event(c, m)
    if c.submitted is not None and c.submitted != m.request_id:
        # Another client's request won: ours is owed its refusal.
        c.owed_replies.add(c.submitted)
    c.submitted = None
    c.prompt = m.prompt
    if c.request is None:
        c.tracker.begin(m.request_id)


def _cancel(c: _Conversation, m: Cancel) -> None:
    _driver_only(c, m)  # of nothing running, or of another request: ignored


def _call_answered(c: _Conversation, m: ToolCallAnswered) -> None:
    _running(c, m)
    _event(c, m)
    c.tracker.call_answered(m.call_id)


def _waiting_call(c: _Conversation, m: ToolExecutionResponse | ToolProgress) -> None:
    """From the driver, about a tool call still waiting for its answer."""
    _driver_only(c, m)
    if c.request is None or m.request_id not in c.request.pending_calls:
        raise _Breach(
            ErrorCode.UNEXPECTED_MESSAGE,
            f"no tool call {quote(m.request_id)} is waiting for an answer",
            field="request_id",
        )


def _answer_call(c: _Conversation, m: ToolExecutionResponse) -> None:
    _waiting_call(c, m)
    c.tracker.call_answered(m.request_id)


def _progress(c: _Conversation, m: ToolProgress) -> None:
    """(1.5) ``tool_progress``: only about a call still waiting for its answer."""
    _waiting_call(c, m)


def _decide(c: _Conversation, m: ToolDecision) -> None:
    _driver_only(c, m)
    if m.decision is not None and m.decision not in DECISIONS:
        raise _Breach(ErrorCode.INVALID_FIELD,
                      f"tool_decision.decision must be one of {', '.join(DECISIONS)}, not {quote(m.decision)}",
                      field="decision")
    if c.request is None or m.call_id not in c.request.awaiting_decision:
        how = c.tracker.decided.get(m.call_id)
        if how == "expired":
            raise _Breach(ErrorCode.APPROVAL_EXPIRED,
                          f"tool call {quote(m.call_id)} is no longer awaiting approval: it expired "
                          "and the model was told it was not approved", field="call_id")
        if how is not None:
            raise _Breach(ErrorCode.ALREADY_DECIDED,
                          f"tool call {quote(m.call_id)} is no longer awaiting approval: it was decided "
                          "already (the first decision counts, once)", field="call_id")
        raise _Breach(
            ErrorCode.UNKNOWN_CALL,
            f"no tool call {quote(m.call_id)} is awaiting approval in this session",
            field="call_id",
        )
    # Still awaiting until the server's tool_decided: a decision it refuses
    # (arguments_changed) leaves the call waiting for a right one.


def _decided(c: _Conversation, m: ToolDecided) -> None:
    """Another client's decision, an expiry, or the end of the request
    settled an approval: no decision is taken for it any more."""
    _running(c, m)
    _event(c, m)
    c.tracker.settled(m.call_id, "expired" if m.decision == "expired" else "decided")


def _expect_reply(c: _Conversation, m: GetState | GetHistory | Rewind) -> None:
    if m.id in c.owed_replies:
        raise _Breach(ErrorCode.INVALID_FIELD, f"message id {quote(m.id)} is already awaiting a reply",
                      field="id", names_message=False)
    c.owed_replies.add(m.id)


def _reply(c: _Conversation, m: State | History | Sessions | Checkpoints | SystemPrompt | PairedLink
           | PairedBrowsers) -> None:
    if m.in_reply_to is None and not isinstance(m, Sessions | Checkpoints | SystemPrompt | PairedLink
                                                | PairedBrowsers):
        # Unasked: the snapshot a server sends after replay_unavailable.
        _event(c, m)
        return
    if m.in_reply_to not in c.owed_replies:
        raise _Breach(
            ErrorCode.UNEXPECTED_MESSAGE,
            f"{_kind(m)} answers {quote(m.in_reply_to)}, which asked nothing or was answered already",
            field="in_reply_to",
        )
    _event(c, m)
    c.owed_replies.discard(m.in_reply_to)


def _running(c: _Conversation, m: Any) -> RequestState:
    request = c.request
    if request is None or m.request_id != request.request_id:
        now = f"request {quote(request.request_id)} is running" if request else "no request is running"
        raise _Breach(
            ErrorCode.UNEXPECTED_MESSAGE,
            f"{_kind(m)} for request {quote(m.request_id)}, but {now}",
            field="request_id",
        )
    return request


def _event(c: _Conversation, m: Any) -> None:
    """Every session event: ``seq``, when stamped, strictly increases."""
    seq = m.seq
    if seq is not None:
        if seq <= c.last_seq:
            raise _Breach(
                ErrorCode.INVALID_FIELD,
                f"{_kind(m)} has seq {seq}, not after the last seq {c.last_seq}",
                field="seq",
            )
        c.last_seq = seq


def _in_request(c: _Conversation, m: Any) -> None:
    _running(c, m)
    _event(c, m)


def _request_call(c: _Conversation, m: ToolExecutionRequest) -> None:
    request = _running(c, m)
    if m.id in request.pending_calls:
        if m.seq is None and m.handover:
            return  # asked again of this client: still the same call
        raise _Breach(ErrorCode.INVALID_FIELD, f"tool call {quote(m.id)} was already requested", field="id")
    _event(c, m)
    c.tracker.call_requested(m.id)


def _await_decision(c: _Conversation, m: ToolAwaitingApproval) -> None:
    request = _running(c, m)
    if m.call_id in request.awaiting_decision:
        if m.seq is None:
            return  # asked again of this client after its replay: still the same question
        raise _Breach(ErrorCode.INVALID_FIELD, f"tool call {quote(m.call_id)} already awaits a decision", field="call_id")
    _event(c, m)
    c.tracker.awaiting(m.call_id)


def _hook_request(c: _Conversation, m: HookRequest) -> None:
    """(1.4) Only to a client that offered ``tool_hooks`` and speaks 1.4,
    about the running request, each hook id once."""
    if not c.tool_hooks:
        raise _Breach(ErrorCode.UNEXPECTED_MESSAGE,
                      "hook_request goes only to a client that listed the capability tool_hooks and speaks "
                      "protocol 1.4")
    request = _running(c, m)
    if m.hook_id in c.pending_hooks:
        raise _Breach(ErrorCode.INVALID_FIELD, f"hook {quote(m.hook_id)} was already requested", field="hook_id")
    _event(c, m)
    for hook_id, request_id in list(c.pending_hooks.items()):
        if request_id != request.request_id:  # an earlier request's: it can no longer be answered
            del c.pending_hooks[hook_id]
    c.pending_hooks[m.hook_id] = request.request_id


def _hook_response(c: _Conversation, m: HookResponse) -> None:
    """(1.4) Answers a ``hook_request`` this connection got, of the running
    request, once."""
    _driver_only(c, m)
    request_id = c.pending_hooks.get(m.hook_id)
    if request_id is None or c.request is None or c.request.request_id != request_id:
        raise _Breach(ErrorCode.UNEXPECTED_MESSAGE,
                      f"no hook_request {quote(m.hook_id)} to this client is waiting for an answer",
                      field="hook_id")
    del c.pending_hooks[m.hook_id]


def _end_request(c: _Conversation, m: Finished) -> None:
    _running(c, m)
    _event(c, m)
    _ended(c)


def _ended(c: _Conversation) -> None:
    """The running request ended."""
    if c.request is not None:
        c.last_ended = (c.request.request_id, c.prompt)
    c.prompt = None
    c.tracker.end()
    c.pending_hooks.clear()


def _server_error(c: _Conversation, m: Error) -> None:
    """An error may end the running request (its ``request_id``), answer a
    refused request or an owed reply, or stand alone (``request_id`` unset);
    a fatal one, or any before the connection is open, ends the connection."""
    rid = m.request_id
    if (rid is not None and rid not in c.owed_replies and rid != c.submitted
            and (c.request is None or c.request.request_id != rid)):
        _running(c, m)  # raises: names what is running
    _event(c, m)
    if rid is not None and rid == c.submitted:
        c.submitted = c.prompt = None  # refused before it was announced
    if rid is not None:
        if c.request is not None and c.request.request_id == rid:
            _ended(c)
        c.owed_replies.discard(rid)
    if m.in_reply_to is not None:
        c.owed_replies.discard(m.in_reply_to)
    if m.fatal or c.phase is not Phase.OPEN:
        c.phase = Phase.CLOSED


def _client_error(c: _Conversation, m: Error) -> None:
    if m.fatal:
        c.phase = Phase.CLOSED


_Rule = Callable[[_Conversation, Any], None]
_ANY_BUT_CLOSED = frozenset({Phase.AWAITING_HELLO, Phase.AWAITING_CONNECTED, Phase.OPEN})
_OPEN = frozenset({Phase.OPEN})

#: (sender, message class) -> (phases it may be sent in, rule).
#: A message not in this table may never be sent by that role.
_RULES: dict[tuple[str, type], tuple[frozenset[Phase], _Rule]] = {
    # handshake
    (CLIENT, Hello): (frozenset({Phase.AWAITING_HELLO}), _hello),
    (SERVER, Connected): (frozenset({Phase.AWAITING_CONNECTED}), _connected),
    (SERVER, Error): (_ANY_BUT_CLOSED, _server_error),
    (CLIENT, Error): (_OPEN, _client_error),
    # client -> server
    (CLIENT, ToolDiscovery): (_OPEN, _nothing),
    (CLIENT, GenerateContentRequest): (_OPEN, _start_request),
    (CLIENT, Compress): (_OPEN, _start_request),
    (CLIENT, ToolExecutionResponse): (_OPEN, _answer_call),
    (CLIENT, ToolProgress): (_OPEN, _progress),  # 1.5
    (CLIENT, ToolDecision): (_OPEN, _decide),
    (CLIENT, Cancel): (_OPEN, _cancel),
    (CLIENT, HookResponse): (_OPEN, _hook_response),
    (CLIENT, GetState): (_OPEN, _expect_reply),
    (CLIENT, GetHistory): (_OPEN, _expect_reply),
    (CLIENT, ListSessions): (_OPEN, _expect_reply),
    (CLIENT, DeleteSession): (_OPEN, _expect_reply),
    (CLIENT, Rewind): (_OPEN, _rewind),  # 1.4
    (CLIENT, Restore): (_OPEN, _expect_reply),
    (CLIENT, GetSystemPrompt): (_OPEN, _expect_reply),  # 1.4
    (CLIENT, Pair): (_OPEN, _expect_reply),  # 1.4
    # server -> client: events of the running request
    (SERVER, TextDelta): (_OPEN, _in_request),
    (SERVER, ThinkingDelta): (_OPEN, _in_request),
    (SERVER, Retrying): (_OPEN, _in_request),
    (SERVER, Compressed): (_OPEN, _in_request),
    (SERVER, AgentStarted): (_OPEN, _in_request),
    (SERVER, AgentFinished): (_OPEN, _in_request),
    (SERVER, ToolExecutionRequest): (_OPEN, _request_call),
    (SERVER, ToolAwaitingApproval): (_OPEN, _await_decision),
    (SERVER, ToolDecided): (_OPEN, _decided),
    (SERVER, HookRequest): (_OPEN, _hook_request),
    (SERVER, ToolStarted): (_OPEN, _in_request),
    (SERVER, ToolDelta): (_OPEN, _in_request),
    (SERVER, ToolCompleted): (_OPEN, _in_request),
    (SERVER, ToolError): (_OPEN, _in_request),
    (SERVER, Finished): (_OPEN, _end_request),
    # server -> client: several clients on one session (1.2)
    (SERVER, RequestStarted): (_OPEN, _announce_request),
    (SERVER, ToolCallAnswered): (_OPEN, _call_answered),
    (SERVER, ClientsChanged): (_OPEN, _event),
    (SERVER, Rewound): (_OPEN, _rewound),  # 1.4
    (SERVER, ApprovalModeChanged): (_OPEN, _event),  # 1.6
    # server -> client: replies
    (SERVER, State): (_OPEN, _reply),
    (SERVER, History): (_OPEN, _reply),
    (SERVER, Sessions): (_OPEN, _reply),
    (SERVER, Checkpoints): (_OPEN, _reply),
    (SERVER, SystemPrompt): (_OPEN, _reply),  # 1.4
    (SERVER, PairedLink): (_OPEN, _reply),  # 1.4
    (SERVER, PairedBrowsers): (_OPEN, _reply),  # 1.4
}


# --- the connection ------------------------------------------------------------


class Connection:
    """One end of a gemini-split connection, without I/O.

    ``role`` is ``"client"`` or ``"server"``. Feed it every message that
    crosses the connection, in order: text from the peer through
    :meth:`receive`, messages of ours through :meth:`send` before writing the
    text it returns. It is not thread-safe and holds no lock: the caller
    serialises sends (one writer) and receives (one reader).

    Error handling: :meth:`receive` raises :class:`RemoteProtocolError` for
    text that is not a message the peer may send now; the error carries the
    reply the peer should get (``code``, ``str()``, ``in_reply_to``,
    ``request_id``, ``fatal``) and the state is unchanged (except that a
    refused ``generate_content_request`` is owed its ``error``).
    :meth:`send` raises :class:`LocalProtocolError` for a message we may not
    send now (a bug on our side: a second ``finished``, an answer to a call
    nobody made, an unstamped message, a message type the peer's version
    lacks); nothing is sent and the state is unchanged.

    Versions: once the handshake is done, :meth:`send` gives the peer each
    message as its version may have it (``protocol/versions.py``: one table
    of what came in which version): skipped (``send`` returns None),
    converted, or refused. :meth:`too_old_for` asks the table first.
    """

    def __init__(self, role: str, *, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE):
        if role not in (CLIENT, SERVER):
            raise ValueError(f"role must be 'client' or 'server', not {role!r}")
        self.role = role
        self.peer = SERVER if role == CLIENT else CLIENT
        self.max_message_size = max_message_size
        self._c = _Conversation()
        #: The ``hello`` of this connection, once sent or received.
        self.hello: Hello | None = None
        #: The server's ``connected``, once sent or received.
        self.connected: Connected | None = None

    # --- what the state is ---------------------------------------------------

    @property
    def phase(self) -> Phase:
        return self._c.phase

    @property
    def request(self) -> RequestState | None:
        """The running request, or None when idle. Do not change it."""
        return self._c.request

    @property
    def last_seq(self) -> int:
        """The highest ``seq`` of a session event that crossed (0: none)."""
        return self._c.last_seq

    @property
    def announced(self) -> bool:
        """Whether requests are announced by ``request_started`` (1.2)."""
        return self._c.announced

    @property
    def version(self) -> tuple[int, int]:
        """The protocol version both ends speak, once ``connected`` crossed
        (``(0, 0)`` before): what a newer peer may send the other."""
        return self._c.version

    def too_old_for(self, message: type[Message], what: str = "") -> TooOld | None:
        """None when the peer's version has ``message`` (``what``: a field of
        it, as ``protocol/versions.py`` names it), else the version the peer
        speaks and the one that has it. Before the handshake, every
        versioned thing is too new."""
        return too_old_for(self._c.version, message, what)

    def for_peer(self, message: Message) -> Message | None:
        """``message`` as the peer's version may be sent it (itself, a
        conversion, or None: not sent), unchecked by the state: for what a
        server sends past :meth:`send` (a replay, the relay's replies).
        Raises :class:`LocalProtocolError` for a type the peer lacks."""
        return adapted(message, self._c.version) if self.connected is not None else message

    def text_for_peer(self, text: str) -> str | None:
        """:meth:`for_peer` for an event as we encoded it (a replay from the
        store, the Redis relay): the same text, its conversion, or None."""
        return adapted_text(text, self._c.version) if self.connected is not None else text

    @property
    def observer(self) -> bool:
        """Whether the client attached read-only (``hello.role``)."""
        return self._c.observer

    @property
    def owed_replies(self) -> frozenset[str]:
        """Ids of messages still owed their reply."""
        return frozenset(self._c.owed_replies)

    def restore(self, request: RequestState | None, *, last_seq: int = 0,
                decided: dict[str, str] | None = None) -> None:
        """Continue a session on this connection: its running request (a
        copy is kept), the last ``seq`` already delivered and, optionally,
        the approval call ids settled already (call id → ``decided`` /
        ``expired`` / ``ended``: a replayed decision is told so). For a
        resumed session, right after the handshake and before any other
        message."""
        self._c.tracker.restore(request, decided)
        self._c.submitted = self._c.prompt = None  # a restored request's prompt: unknown here
        self._c.last_seq = last_seq

    # --- the two directions ----------------------------------------------------

    def receive(self, text: str | bytes) -> Message:
        """Decode one message from the peer and check it against the state.

        Raises :class:`RemoteProtocolError` (see the class docstring)."""
        try:
            message = decode(text, max_size=self.max_message_size)
        except RemoteProtocolError as exc:
            _hint(exc, fatal=self._c.phase is not Phase.OPEN)
            raise
        try:
            self._apply(self.peer, message)
        except _Breach as breach:
            exc = RemoteProtocolError(breach.code, str(breach), field=breach.field)
            request_id = message.id if starts_request(message) else None
            if request_id is not None and self._c.phase is Phase.OPEN:
                self._c.owed_replies.add(request_id)  # the refusal we owe
            _hint(exc, fatal=self._c.phase is not Phase.OPEN, request_id=request_id,
                  in_reply_to=message.id if breach.names_message else None)
            raise exc from None
        return message

    def send(self, message: Message, *, text: str | None = None) -> str | None:
        """Check one message of ours against the state and encode it.

        Returns the text to write, or None when the peer's version is not
        sent ``message`` (nothing to write; the state is unchanged). A
        message the peer's version has in another form is converted first
        (see the class docstring). ``text`` is the message's encoding when
        the caller has it already (the event log encodes each event once):
        it is checked for size, not encoded again. Raises
        :class:`LocalProtocolError`."""
        if not is_stamped(message) or not message.id:
            raise LocalProtocolError(
                ErrorCode.MISSING_FIELD, f"{_kind(message)} is not stamped with an id and a timestamp", field="id"
            )
        sent = self.for_peer(message)
        if sent is None:
            return None
        if sent is not message:
            message, text = sent, None
        if text is None:
            try:
                text = encode(message)
            except ProtocolError as exc:
                raise LocalProtocolError(exc.code, str(exc), field=exc.field) from None
        if len(text) > self.max_message_size:
            raise LocalProtocolError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"{_kind(message)} of {len(text)} characters is over the limit of {self.max_message_size}",
            )
        try:
            self._apply(self.role, message)
        except _Breach as breach:
            raise LocalProtocolError(breach.code, f"we may not send this: {breach}", field=breach.field) from None
        return text

    def _apply(self, sender: str, message: Message) -> None:
        entry = _RULES.get((sender, type(message)))
        if entry is None:
            raise _Breach(ErrorCode.UNEXPECTED_MESSAGE, f"{_kind(message)} is never sent by a {sender}")
        phases, rule = entry
        if sender == SERVER and getattr(message, "replayed", False) and self._c.phase is Phase.OPEN:
            # Catch-up from the session's log: only its order is checked.
            _event(self._c, message)
            return
        if self._c.phase not in phases:
            expected = sorted(_kind_of(cls) for (who, cls), (ph, _) in _RULES.items()
                              if who == sender and self._c.phase in ph)
            raise _Breach(
                ErrorCode.UNEXPECTED_MESSAGE,
                f"expected {' or '.join(expected) or 'nothing'} from the {sender} "
                f"in phase {self._c.phase.value}, got {_kind(message)}",
            )
        rule(self._c, message)
        if isinstance(message, Hello):
            self.hello = message
        elif isinstance(message, Connected):
            self.connected = message


def starts_request(message: Message) -> bool:
    """Whether ``message`` asks for a request (its ``id`` is the
    ``request_id`` of what it causes, and of its refusal): a prompt,
    ``compress``, or a ``rewind`` that re-proposes a call (1.4)."""
    return isinstance(message, (GenerateContentRequest, Compress)) or (
        isinstance(message, Rewind) and message.repropose_call_id is not None)


def _hint(exc: RemoteProtocolError, *, fatal: bool, in_reply_to: str | None = None,
          request_id: str | None = None) -> None:
    """Attach to ``exc`` what the ``error`` reply should carry."""
    exc.fatal = fatal
    exc.in_reply_to = in_reply_to
    exc.request_id = request_id


def _kind_of(cls: type) -> str:
    return getattr(cls, "TYPE", None) or cls.__name__


def _kind(message: Any) -> str:
    return _kind_of(type(message))
