"""The state of one agent chain while it runs, and the shapes the chain
plugs together: a tool path (:data:`CallTool`), a step around it
(:data:`Step`), an observer before each model turn (:data:`BeforeTurn`)
and after it (:data:`AfterTurn`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from gemini_split.protocol import ApiStats, ServerEvent, ToolFailure, ToolSpec, Usage

from ...model.base import FunctionCallChunk, ModelError
from ..priority import Pace

Emit = Callable[[ServerEvent], Awaitable[None]]
#: ``await call_tool(name, args)`` → ``(result, failure)``: exactly one is set.
CallTool = Callable[[str, dict[str, Any]], Awaitable[tuple[Any, ToolFailure | None]]]
#: A step around a tool call: given the path on (the next step), the path
#: through it — it answers the calls it owns and hands the others on.
Step = Callable[[CallTool], CallTool]
#: Told the run before each model turn (automatic compression).
BeforeTurn = Callable[["AgentRun"], Awaitable[None]]
#: Told each model turn's calls; returns the calls to run (None: the chain
#: ends here, e.g. a sub-agent's ``complete_task``).
AfterTurn = Callable[[list[FunctionCallChunk]], "list[FunctionCallChunk] | None"]


#: Google's status names for the HTTP statuses the Gemini API answers with.
_STATUS_NAMES = {
    400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED",
}


def api_error_type(exc: ModelError) -> str:
    """How a failed model call is counted in ``errorsByType``: the API's
    status name, or ``NETWORK_ERROR`` when no HTTP answer came."""
    if exc.status is None:
        return "NETWORK_ERROR"
    return _STATUS_NAMES.get(exc.status, f"HTTP_{exc.status}")


@dataclass
class ApiTally:
    """The model API calls of one request (gemini-cli's ``api`` stats)."""

    requests: int = 0
    errors: int = 0
    latency_ms: int = 0
    errors_by_type: dict[str, int] = field(default_factory=dict)

    def as_message(self) -> ApiStats:
        return ApiStats(requests=self.requests, errors=self.errors, latency_ms=self.latency_ms,
                        errors_by_type=dict(self.errors_by_type))

    def record(self, seconds: float, *, error_type: str | None = None) -> None:
        self.requests += 1
        self.latency_ms += int(seconds * 1000)
        if error_type is not None:
            self.errors += 1
            self.errors_by_type[error_type] = self.errors_by_type.get(error_type, 0) + 1


@dataclass
class TurnBudget:
    """The model turns the operator allows one whole request (``serve
    --max-turns``), shared by its main agent and every sub-agent: a turn of
    any of them spends one. What a client brings (a sub-agent definition's
    own ``max_turns``) may lower an agent's limit, never this one."""

    limit: int
    spent: int = 0


@dataclass
class AgentRun:
    """The state of one agent's chain: the main agent's for a request, or
    a sub-agent's (its own history, ``agent_id``)."""

    request_id: str
    model_name: str
    history: list[dict[str, Any]]
    #: The session's tools (what the system instruction describes).
    tools: list[ToolSpec]
    #: Declared to the model after ``tools``: what the request's steps
    #: answer (server tools, ``activate_skill``, sub-agents).
    extra_tools: list[ToolSpec] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    turns: int = 0
    api: ApiTally = field(default_factory=lambda: ApiTally())
    #: The client's ``SessionContext`` (context files, approval mode,
    #: workspace, first-turn environment, skills, sub-agents), or None.
    context: Any = None
    #: Its place among the server's requests (``server/session/priority.py``):
    #: after each delta it lets requests that have not answered go first.
    pace: Pace | None = None
    #: The last model call's prompt size (tokens) as the API counted it.
    last_prompt_tokens: int = 0
    #: Which agent this chain runs: 0 the main agent, 1, 2 … a sub-agent,
    #: whose events carry it.
    agent_id: int = 0
    system_instruction: str | None = None
    temperature: float | None = None
    #: The session's id, for telemetry (``session.id``).
    session_id: str | None = None
    #: The request's turns, shared with its sub-agents' runs (None: this
    #: chain's ``max_turns`` alone).
    budget: TurnBudget | None = None
