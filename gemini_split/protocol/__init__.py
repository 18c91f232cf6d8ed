"""The gemini-split protocol, sans-IO.

Message types (msgspec Structs), the JSON codec, validation, the per-role
state machine (:class:`Connection`), what an older peer is sent
(``versions.py``) and the session event log. Nothing here
performs I/O, reads a clock or draws random numbers, or imports trio or
google-genai: both sides import this package and nothing else is shared.
Senders stamp ids and timestamps (``gemini_split.stamping``).
"""

from .codec import (
    DEFAULT_MAX_MESSAGE_SIZE,
    AnyMessage,
    check_version,
    decode,
    encode,
    from_json_object,
    to_json_object,
)
from .error_codes import ErrorCode, LocalProtocolError, ProtocolError, RemoteProtocolError, quote
from .messages import (
    APPROVAL_MODES,
    CLIENT_MESSAGES,
    DECISIONS,
    MESSAGE_TYPES,
    Attachment,
    PROTOCOL_VERSION,
    SERVER_MESSAGES,
    ApiStats,
    Cancel,
    ClientInfo,
    ClientMessage,
    ClientsChanged,
    Connected,
    ContextFile,
    SkillInfo,
    Error,
    Finished,
    GenerateContentRequest,
    GetHistory,
    GetState,
    DeleteSession,
    ListSessions,
    SessionInfo,
    Sessions,
    Hello,
    History,
    Message,
    Replay,
    RequestStarted,
    Retrying,
    ServerEvent,
    ServerMessage,
    SessionContext,
    State,
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
    ToolExecutionRequest,
    ToolExecutionResponse,
    ToolFailure,
    ToolSpec,
    ToolStarted,
    Usage,
    is_stamped,
    version_tuple,
)
from .messages import Caller  # 1.2: the local daemon's caller
from .messages import COMPRESSION_SINCE, Compress, Compressed  # 1.3
from .messages import REWIND_SINCE, FileRevert, Rewind, RewindPoint, Rewound  # 1.4
from .messages import (  # 1.4: sub-agents
    AGENT_NAME_PATTERN,
    AGENT_OUTCOMES,
    SUBAGENTS_SINCE,
    AgentDefinition,
    AgentFinished,
    AgentStarted,
    RunningAgent,
)
from .messages import RESTORE_SINCE, CheckpointChange, CheckpointInfo, Checkpoints, Restore  # 1.4
from .messages import TOOL_HOOK_EVENTS, TOOL_HOOKS_CAPABILITY, TOOL_HOOKS_SINCE, HookRequest, HookResponse  # 1.4
from .messages import (  # 1.4
    ASK_USER_CAPABILITY,
    ASK_USER_OPTIONS_MAX,
    ASK_USER_QUESTIONS_MAX,
    ASK_USER_SINCE,
    SYSTEM_PROMPT_LIMIT,
    SYSTEM_PROMPT_SINCE,
    AskUserOption,
    AskUserQuestion,
    GetSystemPrompt,
    SystemPrompt,
)
from .messages import PAIRING_SINCE, Pair, PairedBrowser, PairedBrowsers, PairedLink  # 1.4
from .messages import REMOTE_AGENTS_SINCE, TOOL_PROGRESS_LIMIT, ToolProgress  # 1.5
from .messages import AGENT_POLICY_SINCE  # 1.5
from .messages import SESSION_ATTACHED_MAX, SESSION_CLIENTS_SINCE  # 1.5
from .messages import AGENT_MCP_SINCE  # 1.5
from .messages import MODE_SWITCH_SINCE, ApprovalModeChanged  # 1.6
from .messages import TYPED_PROMPT_LIMIT, TYPED_PROMPT_SINCE  # 1.6
from .messages import EDIT_REVIEW_SINCE, EditedFile, EditProposal  # 1.6
from .connection import Connection, Phase, RequestState, starts_request
from .versions import SINCE, Since, TooOld, usable_capabilities
from .tracker import RequestTracker
from .event_log import EventLog, ReplayUnavailable, coalesce

__all__ = [name for name in dir() if not name.startswith("_")]
