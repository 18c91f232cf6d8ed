"""Tools the server runs itself: per-session workspaces, the ``ToolHost``
interface, and the choice a ``hello`` makes (issue 12, seeds 001 and 004).

A session opened with ``hello.tools = "server"`` does not run the client's
tools: the server runs its own, confined to the session's workspace, and
promotes approvals to the attached clients (:mod:`.approvals`). The server
does not have a second copy of any tool: it runs *the* tool registry,
injected by the composition root (``gemini_split.app``) as a
:data:`ToolHostFactory` — this package never imports the client.

:class:`ServerTools` is what ``serve --server-tools`` configures: where
workspaces live (``--workspace-root``: one fresh directory per session,
created 0700, deleted with the session), the project allowlist
(``--project NAME=PATH``), the approval timeout and the highest approval
mode a client may ask for (``--max-approval-mode``). It checks a
``hello`` (:meth:`ServerTools.choose`) and opens a session's host
(:meth:`ServerTools.open_host`).

The one call a face (gRPC, ACP) needs to open a session with server
tools is :meth:`gemini_split.server.service.AgentService.create_session`
with a :class:`ToolChoice`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import re
import secrets
import shutil
import stat
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import msgspec

from gemini_split.errors import GeminiSplitError
from gemini_split.protocol import (
    APPROVAL_MODES,
    ErrorCode,
    Hello,
    ServerEvent,
    ToolAwaitingApproval,
    ToolCompleted,
    ToolDecision,
    ToolDelta,
    ToolError,
    ToolFailure,
    ToolSpec,
    ToolStarted,
)

log = logging.getLogger(__name__)

#: The capability a client lists in ``hello`` when a person can answer
#: approval questions on it.
APPROVALS_CAPABILITY = "tool_approvals"

#: The environment variables a server-side command keeps (shell glob
#: patterns; everything else the server was started with, such as
#: ``GEMINI_AUTH_CONFIG``, a Redis URL with its password or
#: ``GOOGLE_APPLICATION_CREDENTIALS``, is dropped).
SERVER_COMMAND_ENVIRONMENT = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_*", "TZ",
                              "TERM", "GEMINI_CLI")

_MODE_ALIASES = {"auto_approve": "yolo", "reject_dangerous_tools": "reject_dangerous"}
_PROJECT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def parse_approval_mode(text: str) -> str:
    """A mode of :data:`~gemini_split.protocol.APPROVAL_MODES` from what a
    person or a client wrote (case, blanks and ``-``/``_`` do not matter;
    ``auto_approve`` is ``yolo``). Raises :class:`ValueError` naming the
    valid modes."""
    key = str(text).strip().lower().replace("-", "_")
    key = _MODE_ALIASES.get(key, key)
    if key not in APPROVAL_MODES:
        raise ValueError(f"unknown approval mode {text!r}: valid modes are {', '.join(APPROVAL_MODES)}, auto_approve")
    return key


def mode_allows(cap: str, mode: str) -> bool:
    """Whether ``mode`` is no more permissive than ``cap``."""
    return APPROVAL_MODES.index(mode) <= APPROVAL_MODES.index(cap)


# --- the interface the composition root implements -----------------------------

#: ``await ask(question)`` → the decision a client took, or a sentence
#: saying why nobody decided (the question expired; no attached client can
#: answer). The question is unstamped; the session fills in its hash and
#: expiry.
Ask = Callable[[ToolAwaitingApproval], Awaitable["ToolDecision | str"]]
#: ``await emit(event)`` → the event is on its way to every attached client.
Emit = Callable[[ServerEvent], Awaitable[None]]
#: (1.4) ``await hooks(event, input)`` → the combined output (gemini-cli's
#: hook output object) of the user's ``event`` hooks (``BeforeTool`` /
#: ``AfterTool``), run by a client; None when nobody ran them (no client
#: runs hooks, or it did not answer in time). ``input`` is gemini-cli's
#: hook input for the event without the common fields (the client adds
#: those).
Hooks = Callable[[str, dict[str, Any]], Awaitable["dict[str, Any] | None"]]


@dataclass(frozen=True)
class ToolHostSpec:
    """What one session's tools are: its workspace, approval mode (one of
    :data:`~gemini_split.protocol.APPROVAL_MODES`), which built-in tools
    (``core_tools``: only these, None: all; ``exclude_tools``: never these),
    and where shell commands run (``sandbox``: a
    ``gemini_split.sandbox.Sandbox``, None: unconfined)."""

    workspace: Path
    approval_mode: str = "reject_dangerous"
    core_tools: tuple[str, ...] | None = None
    exclude_tools: tuple[str, ...] = ()
    sandbox: Any = None
    #: The policy rules (``gemini_split.policy.Policy``: ``serve --policy``,
    #: ``--admin-policy``, the server user's ``~/.gemini/policies``);
    #: None: the approval mode's own. A deny rule refuses even in yolo.
    policy: Any = None
    #: Beyond public addresses, what ``web_fetch`` may connect to from here
    #: (``serve --web-fetch-allow``: CIDRs, addresses, host names).
    web_fetch_allow: tuple[str, ...] = ()
    #: (1.4) Where the edit tools' changes are journaled for ``rewind``
    #: (outside every workspace; None: not journaled).
    edits_dir: Path | None = None
    #: Where this session's checkpoints live (``general.checkpointing.enabled``
    #: in the server's settings: ``gemini_split.tools.checkpoints``), out
    #: of the workspace and of every command's sight; None: no checkpoints.
    checkpoints: Path | None = None
    #: The session the host serves (its checkpoints record it).
    session_id: str | None = None
    #: The most permissive mode the session may switch to (``serve
    #: --max-approval-mode``).
    max_approval_mode: str = "yolo"
    #: Where plan mode keeps the session's plans (outside every workspace;
    #: None: no plan mode).
    plans_dir: Path | None = None


class ToolHost(Protocol):
    """The tools of one server-tools session.

    ``execute`` runs one call the way a client runs its own: arguments
    checked against the schema, the approval policy (a call that needs a
    person goes to ``ask``; in ``reject_dangerous`` it is refused at once),
    confined to the workspace; it emits ``tool_started``, ``tool_delta``
    (stdout/stderr as it arrives), then ``tool_completed`` or ``tool_error``
    through ``emit``, and returns ``(result, None)`` or ``(None, failure)``.
    With ``hooks``, the user's BeforeTool hooks are asked after the
    approval and before the call runs, and AfterTool hooks after it ran;
    their verdict is applied as a client applies its own (a deny refuses the
    call with the hooks' reason, ``tool_input`` rewrites the arguments,
    ``additionalContext`` is appended to the result).
    It never raises for a tool's failure; Trio cancellation propagates.
    ``agent`` names the sub-agent that calls ("": the main agent; the
    policy's ``subagent`` rules). ``close`` ends what outlives a call
    (background commands).

    ``mode`` is the approval mode it runs calls in now (one of
    :data:`~gemini_split.protocol.APPROVAL_MODES`; a call of
    ``enter_plan_mode`` / ``exit_plan_mode`` may change it, and
    :meth:`switch` does), ``policy_mode`` the same as the system
    instruction names it (``reject_dangerous`` is ``default``), and
    ``specs`` the tools it offers in it."""

    mode: str
    policy_mode: str

    def specs(self) -> list[ToolSpec]: ...

    def switch(self, mode: str) -> None: ...

    async def execute(self, call_id: str, name: str, args: Any, *, emit: Emit, ask: Ask,
                      request_id: str | None, hooks: Hooks | None = None,
                      agent: str = "") -> tuple[Any, ToolFailure | None]: ...

    def close(self) -> None: ...


ToolHostFactory = Callable[[ToolHostSpec], ToolHost]


# --- the server's configuration -----------------------------------------------------


class ServerToolsRefused(GeminiSplitError):
    """A client asked for server tools in a way this server refuses;
    ``code`` is the stable error code of the fatal ``error`` it gets."""

    def __init__(self, code: ErrorCode, message: str):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class ToolChoice:
    """What a session asked for: server tools in ``approval_mode``, in the
    allowlisted ``project`` (None: a fresh per-session workspace), with
    these built-in tools (see :class:`ToolHostSpec`)."""

    approval_mode: str = "reject_dangerous"
    project: str | None = None
    core_tools: tuple[str, ...] | None = None
    exclude_tools: tuple[str, ...] = ()

    def to_record(self) -> dict[str, Any]:
        """What the session store keeps of it (``SessionRecord.approval``),
        so a session restored after a restart or on another replica runs its
        tools where it ran them."""
        return {"tools": "server", "approval_mode": self.approval_mode, "project": self.project,
                "core_tools": None if self.core_tools is None else list(self.core_tools),
                "exclude_tools": list(self.exclude_tools)}

    def switched(self, mode: str) -> ToolChoice:
        """The same choice, in approval ``mode`` now (plan mode's switches)."""
        return dataclasses.replace(self, approval_mode=mode)

    @classmethod
    def from_record(cls, approval: dict[str, Any]) -> ToolChoice | None:
        """The choice a stored session made (None: the client's tools, as
        for sessions stored before this was kept)."""
        if not isinstance(approval, dict) or approval.get("tools") != "server":
            return None
        core = approval.get("core_tools")
        return cls(approval_mode=str(approval.get("approval_mode") or "reject_dangerous"),
                   project=approval.get("project"),
                   core_tools=None if core is None else tuple(map(str, core)),
                   exclude_tools=tuple(map(str, approval.get("exclude_tools") or ())))


@dataclass
class ServerTools:
    """``serve --server-tools``: see the module docstring.

    ``sandbox`` is what server-side shell commands run under (a
    ``gemini_split.sandbox.Sandbox`` resolved at start: ``serve --sandbox
    auto`` refuses to start when bubblewrap does not work; None:
    unconfined)."""

    factory: ToolHostFactory
    workspace_root: Path
    projects: dict[str, Path] = field(default_factory=dict)
    approval_timeout: float = 600.0
    max_approval_mode: str = "yolo"
    sandbox: Any = None
    #: Tools every session leaves out (server-wide ``tools.exclude``).
    exclude_tools: tuple[str, ...] = ()
    #: The policy rules every session's calls are decided by (see
    #: :attr:`ToolHostSpec.policy`).
    policy: Any = None
    #: See :attr:`ToolHostSpec.web_fetch_allow`.
    web_fetch_allow: tuple[str, ...] = ()
    #: What the server keeps for itself and no command may see: its state
    #: directory, auth config, TLS key, credential files, configuration
    #: directories (``gemini_split.app.server_private_paths`` lists them).
    private_paths: tuple[Path, ...] = ()
    #: ``general.checkpointing.enabled`` in the server's own settings: each
    #: session's edits are checkpointed in :meth:`checkpoints_of`.
    checkpointing: bool = False

    def __post_init__(self) -> None:
        self.workspace_root = Path(self.workspace_root).expanduser().absolute()
        self.max_approval_mode = parse_approval_mode(self.max_approval_mode)
        for name, path in self.projects.items():
            if not _PROJECT_NAME.fullmatch(name):
                raise ValueError(f"project name {name!r}: letters, digits, '.', '_' and '-' only")
            if not Path(path).is_dir():
                raise ValueError(f"project {name!r}: {path} is not a directory")

    def prepare(self) -> None:
        """Create the workspace root (0700) if it is missing. Raises
        :class:`OSError`; refuses a root that is a symlink or is writable by
        others."""
        root = self.workspace_root
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(root)
        if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
            raise OSError(f"--workspace-root {root} is not a directory")
        if info.st_mode & 0o022:
            raise OSError(f"--workspace-root {root} is writable by others (mode {info.st_mode & 0o777:o}); "
                          "chmod 700 it")

    def choose(self, hello: Hello) -> ToolChoice | None:
        """The server tools a ``hello`` asks for (None: it wants client
        tools). Raises :class:`ServerToolsRefused`."""
        if hello.tools == "client":
            return None
        if hello.tools != "server":
            raise ServerToolsRefused(ErrorCode.INVALID_FIELD,
                                     f"hello.tools must be 'client' or 'server', not {hello.tools[:40]!r}")
        can_ask = APPROVALS_CAPABILITY in hello.capabilities
        return self.check(ToolChoice(
            approval_mode=hello.approval_mode or ("default" if can_ask else "reject_dangerous"),
            project=hello.project, core_tools=hello.core_tools, exclude_tools=hello.exclude_tools,
        ))

    def check(self, choice: ToolChoice) -> ToolChoice:
        """``choice`` with its mode normalised, if this server allows it.
        Raises :class:`ServerToolsRefused`."""
        try:
            mode = parse_approval_mode(choice.approval_mode)
        except ValueError as exc:
            raise ServerToolsRefused(ErrorCode.APPROVAL_MODE_REFUSED, str(exc)) from None
        if not mode_allows(self.max_approval_mode, mode):
            raise ServerToolsRefused(
                ErrorCode.APPROVAL_MODE_REFUSED,
                f"approval mode {mode} is not allowed on this server (at most {self.max_approval_mode}; "
                "see serve --max-approval-mode)")
        if choice.project is not None and choice.project not in self.projects:
            raise ServerToolsRefused(
                ErrorCode.UNKNOWN_PROJECT,
                f"no project {choice.project[:64]!r} on this server"
                + (f" (it has: {', '.join(sorted(self.projects))})" if self.projects else " (it has none)"))
        return ToolChoice(approval_mode=mode, project=choice.project, core_tools=choice.core_tools,
                          exclude_tools=tuple(choice.exclude_tools))

    def checkpoints_of(self, session_id: str) -> Path:
        """Where a session's checkpoints are (shadow repositories and
        records): ``.checkpoints/<session>`` in the workspace root — no
        session id starts with a dot, and commands see only their own
        workspace of the root. Deleted with the session."""
        return self.workspace_root / ".checkpoints" / self.edits_of(session_id).name

    def plans_of(self, session_id: str) -> Path:
        """Where a session's plans are kept (plan mode): ``.plans/<session>``
        in the workspace root, beside its edit journal, out of every
        command's sight. Deleted with the session."""
        return self.workspace_root / ".plans" / self.edits_of(session_id).name

    def workspace_of(self, session_id: str) -> Path:
        """Where a session's own workspace is (it may not exist)."""
        if not _PROJECT_NAME.fullmatch(session_id):
            raise ValueError(f"not a session id: {session_id!r}")
        return self.workspace_root / session_id

    def open_host(self, session_id: str, choice: ToolChoice) -> ToolHost:
        """The tool host of a session: in its project, or in its own
        workspace (created 0700 now, or found again on resume)."""
        if choice.project is not None:
            workspace = Path(self.projects[choice.project])
        else:
            workspace = self.workspace_of(session_id)
            workspace.mkdir(mode=0o700, exist_ok=True)
            info = os.lstat(workspace)
            if not stat.S_ISDIR(info.st_mode):  # a symlink planted in the root
                raise OSError(f"the workspace {workspace} is not a directory")
        return self.factory(ToolHostSpec(
            workspace=workspace, approval_mode=choice.approval_mode, core_tools=choice.core_tools,
            exclude_tools=tuple(dict.fromkeys(self.exclude_tools + choice.exclude_tools)),
            sandbox=self.confinement(), policy=self.policy, web_fetch_allow=tuple(self.web_fetch_allow),
            edits_dir=self.edits_of(session_id),
            checkpoints=self.checkpoints_of(session_id) if self.checkpointing else None, session_id=session_id,
            max_approval_mode=self.max_approval_mode, plans_dir=self.plans_of(session_id),
        ))

    def edits_of(self, session_id: str) -> Path:
        """Where a session's edits are journaled for ``rewind``: in the
        workspace root's ``.rewind`` (no session's workspace, which are
        named by ids that begin with a letter or digit, and hidden from
        every command with the rest of the root)."""
        name = session_id if _PROJECT_NAME.fullmatch(session_id) else \
            "h" + hashlib.sha256(session_id.encode()).hexdigest()[:40]
        return self.workspace_root / ".rewind" / name

    def confinement(self) -> Any:
        """What a session's shell commands run under: the server's sandbox
        as an allow-list (:attr:`gemini_split.sandbox.Sandbox.allow_list`):
        the system's read-only directories and the session's own workspace
        (or project), read-write — nothing else of the machine, so nothing
        the serving process opens is in sight wherever it lies. Where one of
        its files lies inside what is seen (the operator's tokens under
        ``/etc``), it is masked as well: the workspace root, every
        ``--project`` and :attr:`private_paths`. Only
        :data:`SERVER_COMMAND_ENVIRONMENT` is kept of its environment. This
        is the one place that says what a server-side command can read;
        docs/server-tools.md repeats it. None: no sandbox (tests that
        exercise the tools only)."""
        if self.sandbox is None:
            return None

        hidden = (self.workspace_root, *self.projects.values(), *self.private_paths)
        return msgspec.structs.replace(self.sandbox, hidden=tuple(str(p) for p in hidden),
                                       env_keep=SERVER_COMMAND_ENVIRONMENT, allow_list=True)

    def remove_workspace(self, session_id: str) -> None:
        """Delete a session's own workspace (projects are never deleted),
        its edit journal and its checkpoints. Symlinks inside are removed,
        never followed."""
        shutil.rmtree(self.edits_of(session_id), ignore_errors=True)
        shutil.rmtree(self.plans_of(session_id), ignore_errors=True)
        checkpoints = self.checkpoints_of(session_id)
        if checkpoints.is_dir() and not checkpoints.is_symlink():
            shutil.rmtree(checkpoints, ignore_errors=True)
        try:
            path = self.workspace_of(session_id)
        except ValueError:
            return
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(info.st_mode):
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        log.info("session %s: workspace deleted", session_id)


# --- a request's calls on the server ------------------------------------------------

def call_server_tool(host: ToolHost, *, request_id: str, emit: Emit, ask: Ask,
                     on_call: Callable[[str, str, dict[str, Any]], None] | None = None,
                     agent_id: int = 0, hooks: Hooks | None = None, agent: str = "",
                     on_switch: Callable[[str], None] | None = None,
                     ) -> Callable[[str, dict[str, Any]], Awaitable[tuple[Any, ToolFailure | None]]]:
    """A tool path (``await call(name, args)``) that runs each call on the
    server, through a :class:`ToolHost` (``hello.tools = "server"``): each call gets a fresh call id (``t-…``, told to
    ``on_call(call_id, name, args)`` first), its events go out through
    ``emit``, a call that needs approval asks through ``ask`` and the
    user's tool hooks are asked through ``hooks`` (see
    :data:`Hooks`). A
    sub-agent's calls (``agent_id``, named ``agent``) say so on their
    events and questions, and the policy's ``subagent`` rules see them. A
    call that switched the host's mode (plan mode's tools) is told to
    ``on_switch(tool name)`` once it ended."""
    if agent_id:
        emit = _as_agent(emit, agent_id)
        asked = ask

        async def ask(question: Any) -> Any:
            return await asked(msgspec.structs.replace(question, agent_id=agent_id))

    async def call(name: str, args: dict[str, Any]) -> tuple[Any, ToolFailure | None]:
        call_id = "t-" + secrets.token_hex(8)
        if on_call is not None:
            on_call(call_id, name, args)
        mode = host.mode
        if agent:
            answer = await host.execute(call_id, name, args, emit=emit, ask=ask, hooks=hooks,
                                        request_id=request_id, agent=agent)
        else:
            answer = await host.execute(call_id, name, args, emit=emit, ask=ask, hooks=hooks, request_id=request_id)
        if host.mode != mode and on_switch is not None:
            on_switch(name)
        return answer

    return call


def _as_agent(emit: Emit, agent_id: int) -> Emit:
    """``emit`` that marks tool events as the sub-agent ``agent_id``'s."""
    async def marked(event: ServerEvent) -> None:
        if isinstance(event, (ToolStarted, ToolDelta, ToolCompleted, ToolError)):
            event = msgspec.structs.replace(event, agent_id=agent_id)
        await emit(event)

    return marked
