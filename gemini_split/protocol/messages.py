"""Every message of the gemini-split protocol, as frozen msgspec Structs.

A message class is a Struct tagged with its wire ``type`` (``tag="hello"``);
``TYPE`` reads that tag back and ``SENDER`` says who sends it (``"client"``,
``"server"`` or ``"either"``). The client and server unions
(:data:`CLIENT_MESSAGES`, :data:`SERVER_MESSAGES`, :data:`MESSAGE_TYPES`) are
derived from the class tree at the bottom of this module, so **adding a
message is writing one class** above that line::

    class ListSessions(ClientMessage, tag="list_sessions", kw_only=True):
        limit: int = 50

Every message carries ``id`` and ``timestamp`` (milliseconds since the epoch)
on the wire, but this package has neither a clock nor randomness: a message
is built *unstamped* (both :data:`msgspec.UNSET`) and the sender stamps it
(``gemini_split.stamping``) before encoding; :func:`is_stamped` tells the two
apart and the codec refuses to send an unstamped message. Events a server
sends within a session (:class:`ServerEvent`) also carry ``seq``: assigned
when the event is sent, strictly increasing per session, so a client that
reconnects can ask for everything after the last ``seq`` it saw.

Field names are snake_case on the wire exactly as here; a field equal to its
default is left out of the wire form (``omit_defaults``) and a receiver fills
the default back in. Sequences are tuples. ``docs/protocol.md`` shows a JSON
example of each message; ``tests/test_docs.py`` checks that it does.
"""

# No ``from __future__ import annotations`` here: msgspec reads these
# annotations when the codec builds its decoder, at import. As strings, each
# would be compiled and evaluated, every inherited field again for each
# subclass (about 300): 10-40 ms of every client's and server's start.
from typing import Annotated, Any, ClassVar, Literal

from msgspec import UNSET, Meta, Struct, UnsetType, field

PROTOCOL_VERSION = "1.6"
"""``MAJOR.MINOR``. Peers with another major version cannot talk; a higher
minor version only adds optional fields and message types (1.1: fields equal
to their default are left out of the wire form; 1.2: several clients on one
session — ``request_started`` opens every request, ``clients_changed``,
observers, late-joiner replay; server-side tools and their approvals; 1.3:
compressing a session's history — ``compress``, ``compressed``,
``SessionContext.compression_threshold``; Agent Skills —
``SessionContext.skills``; 1.4, 1.5 and 1.6: the additions marked "(1.4)",
"(1.5)" and "(1.6)" in docs/protocol.md, each behind its own ``*_SINCE``
constant below)."""

#: The minor version from which a request is announced by ``request_started``.
ANNOUNCED_REQUESTS_SINCE = (1, 2)
#: The minor version from which a server compresses histories (``compress``).
COMPRESSION_SINCE = (1, 3)
#: The minor version from which a session can be rewound (``rewind``,
#: ``rewound``, ``history.points``).
REWIND_SINCE = (1, 4)
#: (1.4) The minor version from which a server runs sub-agents
#: (``SessionContext.agents``, ``agent_started`` / ``agent_finished``,
#: ``agent_id`` on the deltas and tool requests a sub-agent causes). An
#: older client is sent the main agent's events only, plus what it must
#: answer: a sub-agent's ``tool_execution_request`` and approval questions.
SUBAGENTS_SINCE = (1, 4)
#: The minor version from which a server restores its own tools'
#: checkpoints (``restore``, ``checkpoints``).
RESTORE_SINCE = (1, 4)
#: (1.4) The minor version from which a server asks a client's hooks about
#: the tools it runs itself (``hook_request`` / ``hook_response``).
TOOL_HOOKS_SINCE = (1, 4)
#: (1.4) The capability a client lists in ``hello`` when it runs the user's
#: BeforeTool/AfterTool hooks for the tools a server runs.
TOOL_HOOKS_CAPABILITY = "tool_hooks"
#: (1.4) The events a ``hook_request`` asks about.
TOOL_HOOK_EVENTS = ("BeforeTool", "AfterTool")
#: (1.4) The minor version from which ``SessionInfo`` says the project
#: directory a session was started in (``project``) and whether it is
#: answering a prompt now (``running``): sessions per project.
SESSION_SCOPE_SINCE = (1, 4)
#: (1.4) The minor version from which a server asks ``ask_user`` questions
#: (``tool_awaiting_approval.questions``, ``tool_decision.answers``).
ASK_USER_SINCE = (1, 4)
#: (1.4) The minor version from which a server uses the client's own system
#: prompt (``SessionContext.system_prompt``) and answers ``get_system_prompt``.
SYSTEM_PROMPT_SINCE = (1, 4)
#: (1.4) The capability a client lists in ``hello`` when a person can answer
#: ``ask_user`` questions on it.
ASK_USER_CAPABILITY = "ask_user"
#: (1.4) The minor version from which a server pairs browsers with its
#: users (``pair``, ``paired_link``, ``paired_browsers``; ``serve --web``).
PAIRING_SINCE = (1, 4)
#: (1.5) The minor version from which ``AgentDefinition.kind`` may be
#: ``remote`` (an Agent2Agent agent, with its ``url``): the server asks the
#: client that runs the session's tools to make the call (a
#: ``tool_execution_request`` of the agent's name, with its ``agent_id``).
#: An older server is not sent remote definitions.
REMOTE_AGENTS_SINCE = (1, 5)
#: (1.5) The minor version from which a server refuses a delegation the
#: client's policy denies (``AgentDefinition.denied``). An older server is
#: not sent a denied agent at all.
AGENT_POLICY_SINCE = (1, 5)
#: (1.5) The minor version from which ``SessionInfo`` says who is attached
#: to a session now (``clients``, ``attached``).
SESSION_CLIENTS_SINCE = (1, 5)
#: (1.5) The minor version from which a server offers a sub-agent the tools
#: of its definition's own MCP servers (``AgentDefinition.mcp_tools``; the
#: servers run on the client). An older server is not sent them.
AGENT_MCP_SINCE = (1, 5)
#: (1.6) The minor version from which a session's approval mode switches
#: while it runs (plan mode's ``enter_plan_mode`` / ``exit_plan_mode``, a
#: client's Shift+Tab): ``tool_discovery.approval_mode`` tells the server,
#: ``approval_mode_changed`` tells every client. An older server keeps a
#: request's tools and mode until the next request; an older client is not
#: told.
MODE_SWITCH_SINCE = (1, 6)
#: (1.6) The minor version from which a prompt says what its user typed
#: when that is not its text (``GenerateContentRequest.typed``: a custom
#: command as typed): the session's title and ``request_started.prompt``
#: show it. An older server is sent the prompt without it.
TYPED_PROMPT_SINCE = (1, 6)
#: (1.6) The most characters ``GenerateContentRequest.typed`` carries.
TYPED_PROMPT_LIMIT = 4096
#: (1.6) The minor version from which a server-side edit's approval carries
#: what an editor needs to show it as a diff (``tool_awaiting_approval.edit``:
#: the file's workspace-relative path and the whole proposed text), and an
#: approval may carry the text the user changed it to
#: (``tool_decision.edit``), which is then exactly what the server writes
#: (``tool_decided.modified`` says so). An older client is sent the
#: question without it; a client never sends ``edit`` to an older server
#: (it never asked with one).
EDIT_REVIEW_SINCE = (1, 6)


def version_tuple(version: str) -> tuple[int, int]:
    """``"1.2"`` → ``(1, 2)``; anything unreadable counts as ``(0, 0)``."""
    try:
        major, minor = str(version).split(".", 1)
        return int(major), int(minor.split(".")[0])
    except ValueError:
        return (0, 0)


def _protocol_version() -> str:
    # A factory rather than a plain default so that omit_defaults never drops
    # the version from hello/connected: a peer must always see ours.
    return PROTOCOL_VERSION


class _WireType:
    """``cls.TYPE`` / ``message.TYPE``: the class's msgspec tag ("" if none)."""

    def __get__(self, obj: object, cls: type) -> str:
        return cls.__struct_config__.tag or ""  # type: ignore[attr-defined]


class Message(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Fields every message has. ``id``/``timestamp`` stay ``UNSET`` until
    the sender stamps the message."""

    TYPE: ClassVar[str] = _WireType()  # type: ignore[assignment]
    SENDER: ClassVar[str] = ""

    id: str | UnsetType = UNSET
    timestamp: int | UnsetType = UNSET


class ClientMessage(Message, kw_only=True):
    SENDER: ClassVar[str] = "client"


class ServerMessage(Message, kw_only=True):
    SENDER: ClassVar[str] = "server"


class ServerEvent(ServerMessage, kw_only=True):
    """An event of a session. ``seq`` is set by the session's event log when
    the event is sent; ``request_id`` names the ``generate_content_request``
    it belongs to, when it belongs to one."""

    seq: int | None = None
    request_id: str | None = None
    #: 1.2: sent again from the session's log to a client that attached or
    #: resumed (render it without animation; a replayed tool call is never
    #: run). Not part of the stored event: the sender marks it.
    replayed: bool = False


def is_stamped(message: Message) -> bool:
    """Whether the sender gave ``message`` its ``id`` and ``timestamp``."""
    return message.id is not UNSET and message.timestamp is not UNSET


# --- shared payload types ---------------------------------------------------


def _empty_object_schema() -> dict[str, Any]:
    return {"type": "object", "properties": {}}


class ToolSpec(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A tool the client offers: ``parameters`` is a JSON schema (object)."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=_empty_object_schema)


class ApiStats(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The model API calls made for one request: every attempt (retries
    included), the failed ones by error type (the API's status, e.g.
    ``UNAVAILABLE``), and the time spent in them."""

    requests: int = 0
    errors: int = 0
    latency_ms: int = 0
    errors_by_type: dict[str, int] = field(default_factory=dict)


class Usage(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Token counts, summed over every model call of a request."""

    prompt_tokens: int = 0
    output_tokens: int = 0
    thinking_tokens: int = 0
    cached_tokens: int = 0
    total_tokens: int = 0
    #: Tokens of tool-use prompts (the API's ``toolUsePromptTokenCount``).
    tool_tokens: int = 0

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            thinking_tokens=self.thinking_tokens + other.thinking_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            tool_tokens=self.tool_tokens + other.tool_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
        )


class ToolFailure(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Why a tool call failed, in words a model can act on.

    ``code`` is short and stable (``not_found``, ``outside_workspace``,
    ``refused``, ``timeout``…); ``message`` says what happened; ``hint`` says
    what to try instead.
    """

    code: str
    message: str
    hint: str | None = None


#: (1.4) ``ask_user``: questions in one call, options in one question, at most.
ASK_USER_QUESTIONS_MAX = 4
ASK_USER_OPTIONS_MAX = 4


class AskUserOption(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """(1.4) One choice of an ``ask_user`` question: its label (the answer
    when chosen) and what it means."""

    label: str
    description: str = ""


class AskUserQuestion(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """(1.4) One question of gemini-cli's ``ask_user`` tool: ``type`` is
    ``choice`` (pick among ``options``, several when ``multi_select``, or
    type another answer), ``text`` (a typed answer) or ``yesno``;
    ``header`` is a short label, ``placeholder`` a hint for a typed answer."""

    question: str
    header: str = ""
    type: Literal["choice", "text", "yesno"] = "choice"
    options: Annotated[tuple[AskUserOption, ...], Meta(max_length=ASK_USER_OPTIONS_MAX)] = ()
    multi_select: bool = False
    placeholder: str = ""


class EditProposal(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """(1.6) What a ``write_file`` / ``replace`` the server runs would
    make of one file, for an editor's diff: ``path`` relative to the
    session's workspace (``/``-separated, never absolute, never ``..``: the
    path as the approval shows it), ``content`` the whole text after the
    edit, ``size`` its length in UTF-8 bytes. ``content`` is absent when
    ``size`` is over ``limit``, the most the server sends for review (a
    quarter of its ``--max-message-size``): the edit is then approved as
    any other, from its ``description``."""

    path: str
    content: str | None = None
    size: int = 0
    limit: int = 0


class EditedFile(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """(1.6) The text a user accepted for an edit after changing it in
    their editor: ``path`` is the question's ``edit.path``, ``content``
    the whole file as it is to be written (at most the question's
    ``edit.limit`` UTF-8 bytes)."""

    path: str
    content: str


#: ``driver`` may prompt, cancel and answer tool calls; ``observer``
#: (``attach --watch``) only receives: its prompts, cancels and tool answers
#: get ``error`` ``forbidden``.
Role = Literal["driver", "observer"]


class ClientInfo(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One client attached to a session, as the others see it: a label
    (never a token) and its role."""

    label: str
    role: Role = "driver"


#: (1.5) Clients a ``SessionInfo`` names at most (``clients`` counts them all).
SESSION_ATTACHED_MAX = 8


class SessionInfo(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One of the caller's sessions, as ``sessions`` lists it. ``created``
    and ``updated`` are milliseconds since the epoch; ``turns`` counts
    completed requests; ``title`` is the first prompt, shortened."""

    id: str
    title: str = ""
    created: int = 0
    updated: int = 0
    turns: int = 0
    model: str = ""
    #: (1.4) The project directory the session was started in, as its
    #: client saw it (the first of its ``SessionContext.workspace_dirs``);
    #: empty when not known. ``--list-sessions`` and ``--resume N`` count
    #: only the sessions of the project they run in.
    project: str = ""
    #: (1.4) Whether it is answering a prompt on this server now (a session
    #: answering its first has no completed turn yet, and is still the
    #: ``latest`` conversation).
    running: bool = False
    #: (1.5) How many clients are attached to it now, on whichever replica
    #: runs it (the caller's own connection included when this is its
    #: session); never sent to a 1.4 peer (``SESSION_CLIENTS_SINCE``).
    clients: int = 0
    #: (1.5) The first :data:`SESSION_ATTACHED_MAX` of them, in the order
    #: they attached (as ``connected.attached`` names them).
    attached: Annotated[tuple[ClientInfo, ...], Meta(max_length=SESSION_ATTACHED_MAX)] = ()


# --- the local daemon's caller (1.2) -------------------------------------------


class Caller(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What a session on the per-user local daemon needs from the user who
    called it (``hello.caller``, 1.2): their Gemini API key, the API
    endpoint (``GOOGLE_GEMINI_BASE_URL``; None: Google's) and the model
    (None: the daemon's default). Accepted only on a transport that proved
    the peer is the server's own user (a Unix socket's ``SO_PEERCRED``);
    anywhere else a hello carrying it is refused. Its ``repr`` hides the key,
    so no log line can carry it."""

    api_key: str | None = None
    base_url: str | None = None
    model: str | None = None
    #: Vertex AI: the caller's ``GOOGLE_GENAI_USE_VERTEXAI``,
    #: ``GOOGLE_CLOUD_PROJECT``/``_LOCATION``, ``GOOGLE_VERTEX_BASE_URL``,
    #: ``GOOGLE_APPLICATION_CREDENTIALS``, ``CLOUDSDK_CONFIG`` and ``HOME``
    #: (no secret: the daemon, the same user, reads the credentials itself).
    google_cloud: dict[str, str] | None = None

    def __repr__(self) -> str:
        key = "<hidden>" if self.api_key else None
        return (f"Caller(api_key={key}, base_url={self.base_url!r}, model={self.model!r}, "
                f"google_cloud={self.google_cloud!r})")


# --- 1.2: several clients on one session (attach, watch, late joiners) -------

#: Characters of a client label at most.
LABEL_LIMIT = 64
#: Replay bounds: turns, and milliseconds since the epoch (year 2200).
REPLAY_LIMIT_MAX = 100_000
REPLAY_TIME_MAX = 7_258_118_400_000


class Replay(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What a client attaching to a session wants replayed before the live
    events: the last ``limit`` whole turns (from a ``request_started`` to
    its ``finished``/``error``), the events ``since`` / ``before`` a time
    (Unix ms), or both. Out-of-range values are ``invalid_field``."""

    limit: Annotated[int, Meta(ge=0, le=REPLAY_LIMIT_MAX)] | None = None
    since: Annotated[int, Meta(ge=0, le=REPLAY_TIME_MAX)] | None = None
    before: Annotated[int, Meta(ge=0, le=REPLAY_TIME_MAX)] | None = None


# --- handshake --------------------------------------------------------------


class Hello(ClientMessage, tag="hello", kw_only=True):
    """First message of a connection. ``token`` authenticates on transports
    that have no headers of their own. To resume a session, name it with its
    ``session_id`` and ``resume_token`` and say the last ``seq`` seen."""

    protocol_version: str = field(default_factory=_protocol_version)
    client: str = ""
    capabilities: tuple[str, ...] = ()
    token: str | None = None
    session_id: str | None = None
    resume_token: str | None = None
    last_seq: int | None = None
    #: 1.2, the local daemon only (see :class:`Caller`).
    caller: Caller | None = None
    #: (1.2) Open a *new* session under this id instead of a generated one
    #: (gemini-cli's ``--session-id``): letters, digits, ``-`` and ``_``, at
    #: most 128. Refused with ``session_exists`` when the caller already has
    #: a session by that id; never combined with ``session_id``.
    new_session_id: str | None = None
    # 1.2 (attach): see the "several clients on one session" block below.
    role: Role = "driver"
    label: Annotated[str, Meta(max_length=LABEL_LIMIT)] = ""
    replay: Replay | None = None
    # --- 1.2, server-side tools (issue 12) ---
    #: Where this session's tools run: ``"client"`` (the client announces
    #: and runs them) or ``"server"`` (the server runs its own, confined to
    #: the session's workspace; needs ``serve --server-tools``).
    tools: str = "client"
    #: With ``tools="server"``: a project directory from the server's
    #: allowlist (``serve --project NAME=PATH``) instead of a fresh
    #: per-session workspace.
    project: str | None = None
    #: With ``tools="server"``: the approval mode for the server's tools
    #: (:data:`APPROVAL_MODES`); None: ``default`` when this client can
    #: answer approvals (capability ``tool_approvals``), else
    #: ``reject_dangerous``.
    approval_mode: str | None = None
    # --- 1.2, narrowing the server's tools (the gRPC face: seed 001's
    # StartRequest.core_tools / exclude_tools) ---
    #: With ``tools="server"``: only these built-in tools (None: all).
    core_tools: tuple[str, ...] | None = None
    #: With ``tools="server"``: these tools are not offered.
    exclude_tools: tuple[str, ...] = ()
    #: (1.4) With capability ``tool_hooks``: the longest one round of this
    #: client's BeforeTool or AfterTool hooks may take, in seconds (None:
    #: 60, gemini-cli's default hook timeout). A server waits that long, plus
    #: a margin and at most its tool timeout, for a ``hook_response``.
    tool_hooks_timeout: Annotated[float, Meta(gt=0)] | None = None


class Connected(ServerMessage, tag="connected", kw_only=True):
    """The server's answer to ``hello``: the session is open."""

    protocol_version: str = field(default_factory=_protocol_version)
    server: str = ""
    session_id: str
    resume_token: str | None = None
    resumed: bool = False
    model: str = ""
    #: How the server reaches the model ("Vertex AI, project P, location
    #: L, service account x@…", "Gemini API key from $GEMINI_API_KEY"):
    #: never a secret. Empty when the server does not say.
    model_auth: str = ""
    capabilities: tuple[str, ...] = ()
    # 1.2 (attach): who is attached now (this connection included), this
    # connection's label and role; the request running where the live events
    # start (after ``last_seq``), its tool calls still unanswered and its
    # server-side calls still awaiting a decision (asked again, unlogged,
    # after the replay); whether the replay asked for was cut to what the
    # server keeps.
    clients: int = 1
    label: str = ""
    role: Role = "driver"
    attached: tuple[ClientInfo, ...] = ()
    last_seq: int = 0
    active_request_id: str | None = None
    pending_tool_calls: tuple[str, ...] = ()
    pending_approvals: tuple[str, ...] = ()
    replay_truncated: bool = False


# --- client to server -------------------------------------------------------


class ToolDiscovery(ClientMessage, tag="tool_discovery", kw_only=True):
    """The tools this client runs. Replaces any earlier announcement.

    ``server_tools`` (1.2): tools the *server* runs itself that this
    client wants offered to the model, by name — only names the server lists
    in ``connected.capabilities`` (e.g. ``google_web_search``); others are
    ignored."""

    tools: tuple[ToolSpec, ...] = ()
    server_tools: tuple[str, ...] = ()
    #: (1.6) The client's approval mode, sent when it changed since its last
    #: announcement (these tools are offered in it): a running request's
    #: next model turn gets these tools and a system instruction for the
    #: mode; a session whose tools the server runs switches them to it
    #: (within ``serve --max-approval-mode``). Every client is told with
    #: ``approval_mode_changed``.
    approval_mode: str | None = None


class Attachment(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A file sent with a prompt as inline data (an image an ``@path``
    names): its MIME type and its bytes in base64."""

    mime_type: str
    data: str


class ContextFile(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A project context file (``GEMINI.md``, ``AGENTS.md`` …) as the client
    read it. ``scope``: ``global`` (the user's), ``project`` (from the
    project root down to the workspace) or ``subdirectory``."""

    path: str
    content: str
    scope: str = "project"


class SkillInfo(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """An Agent Skill the client discovered and enabled (issue 29 §2):
    ``name`` and ``description`` are offered to the model; ``body`` (the
    ``SKILL.md`` instructions) and ``resources`` (its files, one path a
    line, on the client's disk) are what ``activate_skill`` returns.
    ``location`` is the client's path of the ``SKILL.md``."""

    name: str
    description: str
    location: str = ""
    body: str = ""
    resources: str = ""


#: (1.4) How a sub-agent run ended (``agent_finished.outcome``):
#: ``completed`` (it reported), ``max_turns`` / ``timeout`` (its limits),
#: ``cancelled`` (with its request), ``interrupted`` (the server stopped
#: while it ran; never run again), ``error`` (its model call failed).
AGENT_OUTCOMES: tuple[str, ...] = ("completed", "max_turns", "timeout", "cancelled", "interrupted", "error")
#: (1.4) A sub-agent's name: gemini-cli's slug (the name of its tool).
AGENT_NAME_PATTERN = r"^[a-z0-9_-]{1,64}$"


class AgentDefinition(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """(1.4) A sub-agent the main model may delegate to (gemini-cli's
    ``.gemini/agents/*.md``, or a built-in), as the client resolved it
    (``agents.overrides`` applied; only enabled ones are sent). The model
    sees it as a tool named ``name`` described by ``description``.

    ``tools``: names it may use, ``*`` / ``prefix*`` wildcards allowed
    (None: every tool of the session); the server clamps them to the
    session's own tools, never another sub-agent. ``model`` None: the
    session's. ``system_prompt``: the body of the file. ``input_schema``:
    its tool's parameters (None: gemini-cli's ``{"query": string}``);
    ``query``: the first message, ``${name}`` replaced by each input (None:
    the inputs as given). ``output_name`` / ``output_schema``: the argument
    of its ``complete_task`` tool (None: a ``result`` string). ``source``:
    where it came from (a path, or ``builtin``), for messages.

    (1.5) ``kind`` ``remote``: an Agent2Agent agent the client calls (its
    credentials never leave the client: none are here); ``url`` is where
    it answers (shown in approvals and ``/agents list``), ``description``
    its card's. The server runs no model loop for it: it asks the client
    that runs the session's tools to call it (a ``tool_execution_request``
    of tool ``name`` with ``{"query": …}`` and the sub-agent's
    ``agent_id``), and the answer is its report.

    ``denied`` (1.5): the client's policy denies delegating to it (a rule
    naming the agent as its ``toolName``): a call of it is refused with
    this text.

    ``mcp_tools`` (1.5): the tools of the definition's own ``mcpServers``
    (gemini-cli's inline MCP servers, run by the client that runs the
    session's tools; only names, descriptions and schemas travel). They are
    offered to this sub-agent only — never the main model, never another
    sub-agent — whatever its ``tools`` say, as in gemini-cli."""

    name: Annotated[str, Meta(pattern=AGENT_NAME_PATTERN)]
    description: Annotated[str, Meta(max_length=8192)]
    kind: Literal["local", "remote"] = "local"
    tools: tuple[str, ...] | None = None
    model: str | None = None
    temperature: Annotated[float, Meta(ge=0, le=2)] | None = None
    max_turns: Annotated[int, Meta(ge=1, le=1000)] | None = None
    timeout_mins: Annotated[float, Meta(gt=0, le=1440)] | None = None
    system_prompt: str = ""
    input_schema: dict[str, Any] | None = None
    query: str | None = None
    output_name: str = "result"
    output_schema: dict[str, Any] | None = None
    source: str = ""
    #: (1.5) A remote agent's endpoint (``kind`` ``remote`` only).
    url: Annotated[str, Meta(max_length=2048)] = ""
    #: (1.5) Why the client's policy denies delegating to it (None: it does not).
    denied: Annotated[str, Meta(max_length=4096)] | None = None
    #: (1.5) The tools of its own MCP servers, offered to it alone.
    mcp_tools: Annotated[tuple[ToolSpec, ...], Meta(max_length=512)] = ()


#: (1.4) The longest system prompt a client may send (characters):
#: gemini-cli's own is about 25,000.
SYSTEM_PROMPT_LIMIT = 256 * 1024


class SessionContext(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What the client knows about where the session works, for the server's
    system instruction and the first turn. ``files`` in the order they
    apply; ``file_names`` the context file names looked for;
    ``environment`` the text that opens the first user turn (date, OS,
    workspace listing); ``interactive``: whether a person approves and reads
    along (None: not said)."""

    files: tuple[ContextFile, ...] = ()
    file_names: tuple[str, ...] = ()
    environment: str | None = None
    approval_mode: str | None = None
    workspace_dirs: tuple[str, ...] = ()
    interactive: bool | None = None
    #: (1.3) gemini-cli's ``model.compressionThreshold``: the server
    #: compresses the history before a model call once the last prompt took
    #: more than this fraction of the model's context window (None: 0.5).
    compression_threshold: Annotated[float, Meta(gt=0, le=1)] | None = None
    #: (1.3) Agent Skills: offered to the model, with ``activate_skill``.
    skills: tuple[SkillInfo, ...] = ()
    #: (1.4) The sub-agents the model may delegate to (at most 64).
    agents: Annotated[tuple[AgentDefinition, ...], Meta(max_length=64)] = ()
    #: (1.4) gemini-cli's ``GEMINI_SYSTEM_MD``: the user's own system prompt,
    #: replacing the built-in one (its ``${AgentSkills}``, ``${SubAgents}``,
    #: ``${AvailableTools}`` and ``${<tool>_ToolName}`` filled in by the
    #: server, the context files still appended). None: the built-in one.
    system_prompt: Annotated[str, Meta(max_length=SYSTEM_PROMPT_LIMIT)] | None = None


class GenerateContentRequest(ClientMessage, tag="generate_content_request", kw_only=True):
    """A user prompt. Its ``id`` is the ``request_id`` of every event it causes.
    ``model`` overrides the session's model for this and later requests.
    ``attachments`` (1.1, optional) go to the model as inline data after the
    prompt's text; ``context`` (optional), when given, replaces the
    session's :class:`SessionContext` for this and later requests.
    ``typed`` (1.6, optional): what the user typed, when the prompt is its
    expansion (a custom command: ``/git:show s t``); shown as the prompt
    (the session's title, ``request_started.prompt``), never sent to the
    model."""

    prompt: str
    model: str | None = None
    attachments: tuple[Attachment, ...] = ()
    context: SessionContext | None = None
    typed: Annotated[str, Meta(max_length=TYPED_PROMPT_LIMIT)] = ""

    @property
    def shown(self) -> str:
        """The prompt as its ``request_started`` shows it (what was typed)."""
        return self.typed or self.prompt


class ToolExecutionResponse(ClientMessage, tag="tool_execution_response", kw_only=True):
    """The outcome of a ``tool_execution_request`` (whose ``id`` is
    ``request_id`` here): exactly one of ``result`` and ``error``."""

    request_id: str
    result: Any = None
    error: ToolFailure | None = None


#: (1.5) The most text one ``tool_progress`` carries (characters).
TOOL_PROGRESS_LIMIT = 64 * 1024


class ToolProgress(ClientMessage, tag="tool_progress", kw_only=True):
    """(1.5) Text a remote (Agent2Agent) sub-agent's call has produced so
    far, from the client making it, while its ``tool_execution_request``
    (``request_id``) waits for the answer: the server sends it on as the
    sub-agent's ``text_delta``. Sent only to a 1.5 server, only for a call
    of a remote agent; ignored for any other call."""

    request_id: str
    content: Annotated[str, Meta(max_length=TOOL_PROGRESS_LIMIT)]


class ToolDecision(ClientMessage, tag="tool_decision", kw_only=True):
    """The user's answer to ``tool_awaiting_approval``.

    ``decision`` (1.2) is ``approve``, ``deny`` or ``approve_always`` (this
    tool, or these root commands, for the rest of the session); without it
    ``approved`` / ``always`` say the same (the 1.1 spelling; ``decision``
    wins when both are given). ``parameters_hash`` is the one the question
    carried: an approval binds exactly those arguments (a deny needs none).
    ``message`` goes to the model with a refusal."""

    call_id: str
    approved: bool = False
    always: bool = False
    decision: str | None = None
    parameters_hash: str | None = None
    message: str | None = None
    #: (1.4) The answers to a question's ``questions``, by question index
    #: (``"0"``…), with ``decision: approve``; a ``deny`` dismisses them.
    answers: dict[str, str] | None = None
    #: (1.6) With ``decision: approve`` of a question that carried
    #: ``edit.content``: the text the user changed the proposal to, which
    #: the server writes instead (its ``path`` must be the question's).
    edit: EditedFile | None = None

    @property
    def verdict(self) -> str:
        """``approve``, ``deny`` or ``approve_always``: ``decision`` if
        given, else what ``approved`` / ``always`` say."""
        if self.decision is not None:
            return self.decision
        if not self.approved:
            return "deny"
        return "approve_always" if self.always else "approve"


class HookResponse(ClientMessage, tag="hook_response", kw_only=True):
    """(1.4) The verdict of this client's hooks on a ``hook_request`` (its
    ``hook_id``): their outputs combined into one object of gemini-cli's
    hook output (``decision``, ``reason``, ``continue``, ``stopReason``,
    ``hookSpecificOutput``: ``tool_input`` for BeforeTool,
    ``additionalContext`` for both); ``{}``: no opinion. Only the client
    asked may answer, once."""

    hook_id: str
    output: dict[str, Any] = {}


class Cancel(ClientMessage, tag="cancel", kw_only=True):
    """Stop the running request (or the one named) at once."""

    request_id: str | None = None


class GetHistory(ClientMessage, tag="get_history", kw_only=True):
    pass


class Compress(ClientMessage, tag="compress", kw_only=True):
    """(1.3) Compress the session's history now (gemini-cli's
    ``/compress``). A request like a prompt — its ``id`` is the
    ``request_id`` of ``request_started``, ``compressed`` and ``finished``,
    or of the ``error`` that says why nothing changed."""


class Rewind(ClientMessage, tag="rewind", kw_only=True):
    """(1.4) Take the session back to before one of its prompts (gemini-cli's
    ``/rewind``). ``session_id`` must name this connection's session;
    ``before_seq`` is the ``seq`` of that prompt's ``request_started`` (the
    rewind points are listed by ``history.points``). The history becomes
    what it was before that prompt — across compressions too — and every
    attached client hears ``rewound``. Refused while a request runs
    (``busy``), for a ``before_seq`` that is not a prompt of the session
    (``invalid_request``), and for any other session (``unknown_session``).
    Nothing is run again.

    ``revert_files`` (a session whose tools run on the server): also put
    back the files the agent's edit tools changed since then.

    ``repropose_call_id`` (``/restore``): instead, keep the history up to and
    including the model turn that proposed that tool call (``before_seq``
    names the prompt whose request made it), drop its answer and everything
    after, and start a request — this message's ``id`` is its
    ``request_id`` — that proposes exactly that call again through the
    usual path (run by the client or the server, approval asked as for any
    call) and goes on as the turn would have."""

    session_id: str
    before_seq: Annotated[int, Meta(ge=1)]
    revert_files: bool = False
    repropose_call_id: str | None = None


class GetState(ClientMessage, tag="get_state", kw_only=True):
    pass


class GetSystemPrompt(ClientMessage, tag="get_system_prompt", kw_only=True):
    """(1.4) Ask for the system instruction the session's next model call
    would get, with ``context`` (None: the session's last), answered by
    ``system_prompt`` (gemini-cli's ``GEMINI_WRITE_SYSTEM_MD``)."""

    context: SessionContext | None = None


class ListSessions(ClientMessage, tag="list_sessions", kw_only=True):
    """Ask for the caller's sessions (answered by ``sessions``)."""


class DeleteSession(ClientMessage, tag="delete_session", kw_only=True):
    """Delete one of the caller's sessions (answered by ``sessions``, the
    list without it, or ``error`` ``unknown_session``)."""

    session_id: str


class Restore(ClientMessage, tag="restore", kw_only=True):
    """(1.4) The checkpoints the server took of this session's workspace
    (a ``--tools server`` session with checkpointing on), answered by
    ``checkpoints``. Without ``checkpoint_id``: the list. With it: what
    restoring it would change (``apply`` false), or the files restored
    (``apply`` true). The conversation is not touched: the client then
    sends ``rewind`` with the checkpoint's request and call to have the
    call proposed again. Refused with ``error``: ``unknown_session`` (not
    this connection's session), ``forbidden`` (an observer),
    ``busy`` (a request runs: its tools may be writing), ``invalid_request``
    (the client's tools run the session, checkpointing is off, or no such
    checkpoint), ``checkpoint_failed`` (the shadow repository is not
    usable; nothing was written)."""

    session_id: str
    checkpoint_id: str | None = None
    apply: bool = False


class Pair(ClientMessage, tag="pair", kw_only=True):
    """(1.4) Browser pairing for the caller's user (``serve --web``).
    ``action`` ``"link"``: a one-time sign-in code, answered by
    ``paired_link``; ``"list"``: the user's paired browsers, answered by
    ``paired_browsers``; ``"revoke"``: forget ``browser_id`` (``"all"``: every
    one) and close its open connections at once, answered by
    ``paired_browsers`` (the ones left). Refused with ``error``:
    ``invalid_request`` (the server serves no web page, or an unknown
    action), ``invalid_field`` (no such browser of the caller's)."""

    action: str = "link"
    browser_id: str | None = None


# --- server to client: events of a session -----------------------------------


class TextDelta(ServerEvent, tag="text_delta", kw_only=True):
    content: str
    #: (1.4) The agent whose text this is: 0 the main agent, 1, 2 … the
    #: request's sub-agents (``agent_started``).
    agent_id: int = 0


class ThinkingDelta(ServerEvent, tag="thinking_delta", kw_only=True):
    content: str
    #: (1.4) As on ``text_delta``.
    agent_id: int = 0


class ToolExecutionRequest(ServerEvent, tag="tool_execution_request", kw_only=True):
    """Run ``tool`` with ``parameters`` on the client and answer with a
    ``tool_execution_response`` whose ``request_id`` is this message's ``id``
    within ``timeout`` seconds."""

    tool: str
    parameters: dict[str, Any] = {}
    timeout: float = 600.0
    #: 1.2: asked again of this one client (no ``seq``: not logged) because
    #: the client whose prompt started the request left or reconnected: any
    #: attached client offering ``tool`` may answer; the first answer wins.
    handover: bool = False
    #: (1.4) The agent that called the tool (0: the main agent); the
    #: client's approval question names it.
    agent_id: int = 0


class ToolAwaitingApproval(ServerEvent, tag="tool_awaiting_approval", kw_only=True):
    """A tool needs the user's yes or no (answer with ``tool_decision``).

    Sent by a server that runs tools itself, to every attached client; a
    client that runs tools locally asks its user without a round trip.
    ``description`` is exactly what would happen (the diff of an edit, the
    command of a shell call). 1.2 adds what a person decides on, field by
    field: ``kind`` (``edit``, ``execute``, ``network``…), ``command`` and
    ``cwd`` for a shell call, ``reason`` (why the policy asks),
    ``always_scope`` (what ``approve_always`` would allow; absent: it cannot
    be offered), ``executes_later`` (the file runs code later: a git hook…),
    ``parameters_hash`` (to send back with an approval) and ``expires_at``
    (milliseconds since the epoch; then the model is told it was not
    approved)."""

    call_id: str
    tool: str
    parameters: dict[str, Any] = {}
    description: str = ""
    kind: str = ""
    command: str | None = None
    cwd: str | None = None
    reason: str | None = None
    always_scope: str | None = None
    executes_later: str | None = None
    parameters_hash: str = ""
    expires_at: int | None = None
    agent_id: int = 0
    #: (1.4) Not a yes or no: the model's ``ask_user`` questions, answered
    #: with ``tool_decision.answers`` (sent only to 1.4 clients that list
    #: the ``ask_user`` capability).
    questions: Annotated[tuple[AskUserQuestion, ...], Meta(max_length=ASK_USER_QUESTIONS_MAX)] = ()
    #: (1.6) An edit's file and whole proposed text, for a diff in the
    #: user's editor (sent to 1.6 clients only).
    edit: EditProposal | None = None


class HookRequest(ServerEvent, tag="hook_request", kw_only=True):
    """(1.4) Run the user's ``event`` hooks (BeforeTool before a tool the
    server runs, after its approval; AfterTool after it ran) with ``input``
    (gemini-cli's hook input for that event: ``tool_name``, ``tool_input``,
    and for AfterTool ``tool_response``; the client adds the common fields)
    and answer with a ``hook_response`` carrying this ``hook_id``. Sent to
    one client only (no ``seq``: never logged or replayed), one that listed
    the capability ``tool_hooks``; the server waits ``timeout`` seconds,
    then goes on as for a hook that timed out."""

    hook_id: str
    event: Literal["BeforeTool", "AfterTool"]
    input: dict[str, Any] = {}
    timeout: float = 60.0


class ToolDecided(ServerEvent, tag="tool_decided", kw_only=True):
    """(1.2) A ``tool_awaiting_approval`` was settled: ``decision`` is
    ``approve``, ``deny``, ``approve_always``, ``expired`` (nobody answered
    in time) or ``cancelled`` (the request ended first); ``by`` names the
    client that decided (its label, never a token)."""

    call_id: str
    decision: str
    by: str = ""
    agent_id: int = 0
    #: (1.6) The approval carried text the user changed in their editor:
    #: that text, not the model's, is what runs (sent to 1.6 clients only).
    modified: bool = False


class ToolStarted(ServerEvent, tag="tool_started", kw_only=True):
    """A tool call begins to run (on the client, or on a server that runs
    tools itself). ``agent_id`` (1.2, on every tool event): 0 for the main
    agent, reserved for sub-agents."""

    call_id: str
    tool: str
    parameters: dict[str, Any] = {}
    agent_id: int = 0


class ToolDelta(ServerEvent, tag="tool_delta", kw_only=True):
    """Output of a running tool as it arrives (``stream``: stdout or stderr)."""

    call_id: str
    content: str
    stream: str = "stdout"
    agent_id: int = 0


class ToolCompleted(ServerEvent, tag="tool_completed", kw_only=True):
    call_id: str
    tool: str
    result: Any = None
    agent_id: int = 0


class ToolError(ServerEvent, tag="tool_error", kw_only=True):
    """A tool failed, was refused, timed out or was cancelled."""

    call_id: str
    tool: str
    error: ToolFailure
    agent_id: int = 0


class Finished(ServerEvent, tag="finished", kw_only=True):
    """The request is over. ``reason``: ``stop`` (the model is done) or
    ``cancelled``. ``turns`` counts model calls made for the request."""

    usage: Usage = Usage()
    turns: int = 0
    reason: str = "stop"
    #: The model API calls behind ``turns``, retries included.
    api: ApiStats | None = None


class Retrying(ServerEvent, tag="retrying", kw_only=True):
    """A transient model error; the call is repeated after ``delay`` seconds."""

    attempt: int
    max_attempts: int
    delay: float
    error: str
    #: (1.4) The agent whose model call is retried.
    agent_id: int = 0


class Compressed(ServerEvent, tag="compressed", kw_only=True):
    """(1.3) The history was compressed: the older turns are a summary now,
    the project context and the last exchanges are kept whole. Token counts
    are the prompt's before and (estimated from the history's size) after;
    ``automatic``: because the last prompt passed the threshold, during the
    request ``request_id`` (else a ``compress`` request)."""

    before_tokens: int
    after_tokens: int
    automatic: bool = False


class RewindPoint(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """(1.4) A prompt the session can be rewound to: its ``request_started``
    ``seq`` (what ``rewind.before_seq`` names), its ``request_id``, the
    prompt's text as the model got it, and ``files``: how many files the
    server's own edit tools changed in that step (sessions whose tools run
    on the server; a client counts its own)."""

    seq: int
    request_id: str
    prompt: str = ""
    files: int = 0


class FileRevert(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """(1.4) One file a rewind put back, or left alone: ``path`` (relative
    to the workspace), ``action`` — ``restored`` (its content from before
    the agent's first edit), ``deleted`` (the agent created it) — or
    ``skipped`` with the ``reason`` (changed since the agent's edit, over
    the size limit, unreadable)."""

    path: str
    action: str
    reason: str = ""


class Rewound(ServerEvent, tag="rewound", kw_only=True):
    """(1.4) The session was rewound (``rewind``): the conversation is now
    what it was before the prompt whose ``request_started`` had
    ``before_seq``; ``prompt`` is that prompt's text (a REPL puts it back
    in its input), ``points`` the prompts left. Sent to every attached 1.4
    client (others get a notice: ``error`` ``session_rewound``); redraw from
    ``get_history``. ``in_reply_to`` is the ``rewind`` (none when it started
    a request: then ``request_id`` is the ``rewind``'s id and the re-proposed
    call, ``repropose_call_id``, follows). ``files``: what a server-side
    ``revert_files`` did; ``by``: the label of the client that rewound."""

    before_seq: int
    in_reply_to: str | None = None
    prompt: str = ""
    points: int = 0
    by: str = ""
    repropose_call_id: str | None = None
    files: tuple[FileRevert, ...] = ()


class AgentStarted(ServerEvent, tag="agent_started", kw_only=True):
    """(1.4) The main model called sub-agent ``name`` (its function call
    ``parent_call_id``, whose own ``tool_started`` / ``tool_completed`` the
    main agent reports as for any tool): it runs now as ``agent_id`` (1, 2
    … per request), on ``model``, with the tools in ``tools``;
    ``refused_tools`` are those its definition named that this session does
    not allow it (unknown, excluded, another sub-agent). Every event it
    causes carries its ``agent_id``."""

    agent_id: int
    name: str
    parent_call_id: str
    model: str = ""
    task: str = ""
    tools: tuple[str, ...] = ()
    refused_tools: tuple[str, ...] = ()


class AgentFinished(ServerEvent, tag="agent_finished", kw_only=True):
    """(1.4) Sub-agent ``agent_id`` ended: ``outcome`` (one of
    :data:`AGENT_OUTCOMES`), the model calls (``turns``) and tool calls it
    made, its tokens, and ``summary``: one line of its report, or why it
    stopped. Exactly one per ``agent_started``."""

    agent_id: int
    name: str
    parent_call_id: str
    outcome: Literal["completed", "max_turns", "timeout", "cancelled", "interrupted", "error"]
    turns: int = 0
    tool_calls: int = 0
    usage: Usage = Usage()
    summary: str = ""


class RunningAgent(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """(1.4) A sub-agent running now, as ``state.agents`` lists it:
    ``tool`` is the tool it runs now ("" between tools)."""

    agent_id: int
    name: str
    parent_call_id: str
    model: str = ""
    turns: int = 0
    tool_calls: int = 0
    tool: str = ""


class History(ServerEvent, tag="history", kw_only=True):
    """The conversation so far (answer to ``get_history``), as Gemini
    ``Content`` objects: ``{"role": "user"|"model", "parts": [...]}``.
    ``points`` (1.4): the session's prompts, oldest first, that ``rewind``
    can go back to."""

    in_reply_to: str | None = None
    messages: tuple[dict[str, Any], ...] = ()
    points: tuple[RewindPoint, ...] = ()


class State(ServerEvent, tag="state", kw_only=True):
    """Where the session stands (answer to ``get_state``)."""

    in_reply_to: str | None = None
    session_id: str = ""
    model: str = ""
    busy: bool = False
    active_request_id: str | None = None
    pending_tool_calls: tuple[str, ...] = ()
    history_length: int = 0
    last_seq: int = 0
    #: (1.2) Server-side tool calls waiting for a ``tool_decision``, as
    #: their ``tool_awaiting_approval`` said them.
    pending_approvals: tuple[ToolAwaitingApproval, ...] = ()
    #: (1.2) Where this session's tools run: ``client`` or ``server``.
    tools: str = "client"
    #: (1.4) The running request's sub-agents still at work.
    agents: tuple[RunningAgent, ...] = ()


class SystemPrompt(ServerEvent, tag="system_prompt", kw_only=True):
    """(1.4) The answer to ``get_system_prompt``: the whole system
    instruction (the client's own system prompt when it sent one, context
    files included); ``custom``: it is the client's, not the built-in one."""

    in_reply_to: str | None = None
    text: str = ""
    custom: bool = False


class Sessions(ServerEvent, tag="sessions", kw_only=True):
    """The caller's sessions, most recently updated first (answer to
    ``list_sessions`` and ``delete_session``). Never anyone else's."""

    in_reply_to: str | None = None
    sessions: tuple[SessionInfo, ...] = ()


class PairedLink(ServerEvent, tag="paired_link", kw_only=True):
    """(1.4) The answer to ``pair`` ``link``: ``code`` signs one browser in
    as the caller's user when posted to ``POST /api/pair`` on the server's
    web origin (the page at ``/pair#CODE`` does it), once, before
    ``expires`` (ms since the epoch). ``code_id`` names it without giving
    it away. ``url``: the link as the server sees its own address (empty
    when it cannot tell, e.g. listening on 0.0.0.0): a client builds it from
    the address it reached instead (``path`` + ``#`` + ``code``)."""

    in_reply_to: str | None = None
    code: str
    code_id: str
    expires: int
    path: str = "/pair"
    url: str = ""


class PairedBrowser(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """(1.4) One browser signed in by pairing: ``created`` and ``last_used``
    in ms since the epoch, the ``user_agent`` it signed in with (bounded)."""

    id: str
    created: int
    last_used: int = 0
    user_agent: str = ""


class PairedBrowsers(ServerEvent, tag="paired_browsers", kw_only=True):
    """(1.4) The caller's paired browsers (answer to ``pair`` ``list`` and
    ``revoke``), oldest first. Never anyone else's."""

    in_reply_to: str | None = None
    browsers: tuple[PairedBrowser, ...] = ()


class CheckpointInfo(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """(1.4) One checkpoint: its ``id`` (gemini-cli's
    ``<timestamp>-<file>-<tool>``), when (``created``, ISO 8601 UTC), and the
    tool call it was taken before (``tool``, ``call_id``, ``file`` it
    edits, the ``request_id`` of its prompt)."""

    id: str
    tool: str
    call_id: str
    created: str = ""
    file: str = ""
    request_id: str | None = None


class CheckpointChange(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """(1.4) What a restore does to one file (``path`` relative to the
    workspace): ``restore`` (written back), ``recreate`` (deleted since),
    ``delete`` (created since); ``by_hand``: changed since the checkpoint
    by something other than the agent's edit tools."""

    path: str
    action: str
    by_hand: bool = False


class Checkpoints(ServerEvent, tag="checkpoints", kw_only=True):
    """(1.4) The answer to ``restore``: the session's ``checkpoints``
    (oldest first), and for a ``restore`` naming one, the ``changes``
    restoring it makes (``restored``: they were made)."""

    in_reply_to: str | None = None
    checkpoints: tuple[CheckpointInfo, ...] = ()
    changes: tuple[CheckpointChange, ...] = ()
    restored: bool = False


class Error(ServerEvent, tag="error", kw_only=True):
    """Something went wrong. ``code`` is stable (see ``ErrorCode``); if
    ``fatal``, the connection or session is no longer usable.
    ``in_reply_to`` names the message that caused it, when one did."""

    # Either side answers a message it cannot handle with an error.
    SENDER: ClassVar[str] = "either"

    code: str
    message: str
    fatal: bool = False
    in_reply_to: str | None = None
    #: For a failed request: what it spent before failing.
    usage: Usage | None = None
    api: ApiStats | None = None


# --- 1.2 events: several clients on one session ----------------------------


class RequestStarted(ServerEvent, tag="request_started", kw_only=True):
    """A request began (1.2): the first event of every request, whoever
    sent it, so every attached client knows a request runs and a late
    joiner's replay starts a turn here. ``client`` is the label of the
    client that sent the prompt."""

    prompt: str = ""
    client: str = ""


class ClientsChanged(ServerEvent, tag="clients_changed", kw_only=True):
    """A client joined or left the session (1.2). ``clients`` counts the
    attached clients now (``connected.attached`` lists them at attach; a
    client keeps the list up to date from these: each costs the server one
    small frame per view, whatever the number attached)."""

    change: Literal["joined", "left"]
    client: ClientInfo
    clients: int = 0


class ApprovalModeChanged(ServerEvent, tag="approval_mode_changed", kw_only=True):
    """(1.6) The session's approval mode is now ``mode`` (one of
    :data:`APPROVAL_MODES`), switched by ``by``: a client's label (its
    ``tool_discovery.approval_mode``) or the tool that switched it
    (``enter_plan_mode``, ``exit_plan_mode``, run by the server for a
    session whose tools it runs). A client of such a session takes it as
    its own mode."""

    mode: str
    by: str = ""


class ToolCallAnswered(ServerEvent, tag="tool_call_answered", kw_only=True):
    """A client's tool call got its answer (1.2): the first one, from the
    client labelled ``client``; other clients asked the same call stop."""

    call_id: str
    client: str = ""
#: (1.2) The approval modes a ``hello`` may ask for, for server-side tools,
#: from the most to the least careful: ``plan`` (read-only tools only),
#: ``reject_dangerous`` (never ask: what would need approval is refused),
#: ``default`` (ask before edits, shell and network), ``auto_edit`` (edits
#: run, the rest asks), ``yolo`` (nothing asks). ``auto_approve`` is
#: accepted for ``yolo`` (seed 001's name).
APPROVAL_MODES: tuple[str, ...] = ("plan", "reject_dangerous", "default", "auto_edit", "yolo")
#: (1.2) What a ``tool_decision`` may decide.
DECISIONS: tuple[str, ...] = ("approve", "deny", "approve_always")


# --- the unions, derived from the classes above ------------------------------------
# Define new message classes above this line: everything below is computed.


def _tagged(base: type[Message]) -> tuple[type[Message], ...]:
    """Every message class of this module under ``base``, in definition order."""
    return tuple(
        obj for obj in globals().values()
        if isinstance(obj, type) and issubclass(obj, base) and obj.TYPE
    )


CLIENT_MESSAGES: tuple[type[ClientMessage], ...] = _tagged(ClientMessage)  # type: ignore[assignment]
"""What a client sends (it may also send :class:`Error`)."""
SERVER_MESSAGES: tuple[type[ServerMessage], ...] = _tagged(ServerMessage)  # type: ignore[assignment]
"""What a server sends, :class:`Error` included."""
MESSAGE_TYPES: dict[str, type[Message]] = {cls.TYPE: cls for cls in CLIENT_MESSAGES + SERVER_MESSAGES}
"""Every message class by its wire ``type``."""
