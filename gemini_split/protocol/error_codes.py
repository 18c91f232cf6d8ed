"""Protocol errors and their stable codes.

A code is part of the wire contract: clients switch on it, scripts see it in
``--output-format json``. Never rename one; add new ones instead.
"""

from __future__ import annotations

from enum import StrEnum

from gemini_split.errors import GeminiSplitError


class ErrorCode(StrEnum):
    # The peer sent something we cannot parse or accept.
    INVALID_JSON = "invalid_json"
    INVALID_MESSAGE = "invalid_message"
    UNKNOWN_TYPE = "unknown_type"
    MISSING_FIELD = "missing_field"
    INVALID_FIELD = "invalid_field"
    UNSUPPORTED_VERSION = "unsupported_version"
    MESSAGE_TOO_LARGE = "message_too_large"
    UNEXPECTED_MESSAGE = "unexpected_message"
    # Session and request level.
    UNAUTHORIZED = "unauthorized"
    BUSY = "busy"
    INVALID_REQUEST = "invalid_request"
    REPLAY_UNAVAILABLE = "replay_unavailable"
    UNKNOWN_SESSION = "unknown_session"
    SESSION_EXISTS = "session_exists"
    INTERRUPTED = "interrupted"
    STORAGE_ERROR = "storage_error"
    #: (non-fatal, a notice) a tool call waits for a client that runs it,
    #: and none attached does (the terminal that runs the session's tools left).
    TOOLS_AWAY = "tools_away"
    TURN_LIMIT = "turn_limit"
    CANCELLED = "cancelled"
    # 1.2: several clients on one session.
    FORBIDDEN = "forbidden"
    SLOW_CONSUMER = "slow_consumer"
    # The model side.
    MODEL_AUTH = "model_auth"
    MODEL_UNAVAILABLE = "model_unavailable"
    MODEL_ERROR = "model_error"
    RATE_LIMITED = "rate_limited"
    MODEL_NOT_ALLOWED = "model_not_allowed"
    # Everything else: a bug or an environment failure on the sender's side.
    INTERNAL = "internal_error"
    CONNECTION_LOST = "connection_lost"
    SHUTTING_DOWN = "shutting_down"
    # Server-side tools and their approvals (1.2, issue 12).
    #: ``hello.tools = "server"`` on a server without ``--server-tools``.
    SERVER_TOOLS_DISABLED = "server_tools_disabled"
    #: ``hello.project`` names no project of the server's allowlist.
    UNKNOWN_PROJECT = "unknown_project"
    #: ``hello.approval_mode`` is above the server's ``--max-approval-mode``.
    APPROVAL_MODE_REFUSED = "approval_mode_refused"
    #: A ``tool_decision`` for a call this session never asked about (an id
    #: of another session's gets the same answer).
    UNKNOWN_CALL = "unknown_call"
    #: A ``tool_decision`` for a call decided already (first decision wins;
    #: a replayed decision lands here too).
    ALREADY_DECIDED = "already_decided"
    #: A ``tool_decision`` after the approval timed out (the model was told
    #: it was not approved).
    APPROVAL_EXPIRED = "approval_expired"
    #: (1.4) ``restore``: the session's shadow repository is not usable;
    #: nothing was written.
    CHECKPOINT_FAILED = "checkpoint_failed"
    #: An approval whose ``parameters_hash`` is not the question's: it
    #: approves other arguments than the ones that would run.
    ARGUMENTS_CHANGED = "arguments_changed"
    #: (1.4) Said to a client older than 1.4 attached to a session another
    #: client rewound (it cannot read ``rewound``): its view is stale.
    SESSION_REWOUND = "session_rewound"
    #: (1.6) A ``tool_decision.edit`` the question did not offer: for
    #: another path than its ``edit.path``, over its ``edit.limit``, with
    #: anything but ``approve``, or for a question without ``edit.content``.
    #: Nothing was written; the call still waits.
    EDIT_REFUSED = "edit_refused"


MAX_ERROR_MESSAGE = 1000
"""Characters of an error message at most: an error reply never grows with
what the peer sent (a 15 MB unknown ``type`` must not come back 15 MB long)."""

QUOTE_LIMIT = 64
"""Characters of a peer's value that an error message quotes at most."""


def quote(value: object, limit: int = QUOTE_LIMIT) -> str:
    """``repr(value)`` cut to about ``limit`` characters, marked when cut.

    Use it for anything the peer chose that an error message names (a type,
    an id): the message stays short whatever the peer sent."""
    if isinstance(value, str) and len(value) > limit:
        return repr(value[:limit]) + f"… ({len(value)} characters)"
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def _bounded(message: str) -> str:
    if len(message) <= MAX_ERROR_MESSAGE:
        return message
    return message[: MAX_ERROR_MESSAGE - 1] + "…"


class ProtocolError(GeminiSplitError):
    """A message broke the protocol.

    ``code`` is an :class:`ErrorCode`; ``field`` names the offending field when
    there is one. ``str(err)`` is a sentence fit for the peer and for a log,
    never longer than :data:`MAX_ERROR_MESSAGE` characters.
    """

    def __init__(self, code: ErrorCode, message: str, *, field: str | None = None):
        super().__init__(_bounded(message))
        self.code = code
        self.field = field

    @property
    def message(self) -> str:
        return str(self)


class RemoteProtocolError(ProtocolError):
    """The peer sent something invalid. Answer it with an ``error`` message.

    A :class:`~gemini_split.protocol.Connection` fills in the rest of that
    reply: ``in_reply_to`` (the offending message's id, when it could be
    read), ``request_id`` (a refused request's id) and ``fatal`` (the
    handshake failed: close after replying)."""

    fatal: bool = False
    in_reply_to: str | None = None
    request_id: str | None = None


class LocalProtocolError(ProtocolError):
    """We tried to send something invalid: a bug on our side."""
