"""Opening a client connection: embedded (loopback, in this process) or remote.

:func:`open_client` is the one place a front end (one-shot, REPL) gets a
connected :class:`ProtocolClient`: it connects through whichever transport
plugin serves the address (the server's, or in embedded mode the private
loopback name the embedded service's holder serves it on), runs the
handshake and the client's reader task, and tears all of it down on exit.
It never starts or stops a server: that is the holder's
(:func:`gemini_split.app.hold_embedded`).
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import trio

from gemini_split._trio_util import single_exceptions
from gemini_split.exit_status import ExitStatus, exit_status_for
from gemini_split.options import DEFAULT_RECONNECT_TIMEOUT
from gemini_split.protocol import GenerateContentRequest, HookResponse, Replay
from gemini_split.transport import (
    AuthenticationFailed,
    ConnectFailed,
    ConnectOptions,
    MessageStream,
    get_transport,
)

from gemini_split.tools.approval import ApprovalMode, ApprovalPolicy, Asker
from gemini_split.tools.executor import ToolExecutor
from gemini_split.tools.plans import PlanPlace
from .protocol_client import (
    ConnectionCallback,
    EventCallback,
    HandshakeFailed,
    ProtocolClient,
    RequestFailed,
    ServerToolChoice,
)
from gemini_split.tools.builtin import ask_user
from gemini_split.userfiles.system_prompt import write_prompt
from gemini_split.tools.registry import ToolRegistry, default_tools
from gemini_split.tools.workspace import Workspace

if TYPE_CHECKING:  # annotations only
    from gemini_split.policy import Policy
    from gemini_split.protocol import Caller, Replay, SessionContext
    from gemini_split.sandbox import Sandbox
    from gemini_split.userfiles.settings import LoadedSettings, MCPServerSettings

    from gemini_split.userfiles.context import ProjectContext, SubdirectoryContext
    from gemini_split.tools.mcp.sources import McpServers
    from gemini_split.userfiles.agents import Discovery as AgentDiscovery
    from gemini_split.userfiles.skills import Discovery


class Endpoint(msgspec.Struct, frozen=True, kw_only=True):
    """Where to connect, and how to keep the connection."""

    #: A transport address (ws://…, stdio:…), or None for embedded mode.
    server: str | None = None
    connect: ConnectOptions = msgspec.field(default_factory=ConnectOptions)
    #: Embedded mode only: where the server side in this process listens
    #: (a private ``loopback:`` name) while its holder serves it
    #: (:func:`gemini_split.app.hold_embedded`). Each ``open_client`` is a
    #: new connection to it; the service's life is its holder's.
    embedded_address: str | None = None
    #: Seconds to keep trying to reconnect after the connection to a server
    #: broke (0: do not). Embedded mode has no connection to lose.
    reconnect_timeout: float = DEFAULT_RECONNECT_TIMEOUT
    #: Our key, endpoint and model for a local daemon, sent only to a
    #: server that the transport proved runs as our own user
    #: (``MessageStream.same_user``); None: send none.
    caller: Caller | None = None
    #: ``--send-api-key``: send ``caller`` (our key alone) to any server,
    #: over a private stream only (``MessageStream.private``).
    send_api_key: bool = False
    #: The local daemon (``--server local``): called (in a thread) when the
    #: first connection is refused — the daemon died after it was found —
    #: to start it again; returns its address. None: no second try.
    restart_server: Callable[[], str] | None = None


class SessionChoice(msgspec.Struct, frozen=True, kw_only=True):
    """Which session to open on the server, as whom, with which model."""

    #: Continue an earlier session (its id, or ``"latest"``) instead of
    #: opening a new one.
    resume: str | None = None
    #: Open a new session under this id (``--session-id``) instead of a generated one.
    new_session_id: str | None = None
    #: ``resume`` attaches to a session others may be using (``gemini-split
    #: attach``): its last turn (or ``replay``) is replayed, not redrawn
    #: from the history.
    attach: bool = False
    #: ``"observer"`` watches read-only (``attach --watch``).
    role: str = "driver"
    #: What an attach replays (None: the server's default, the last turn).
    replay: Replay | None = None
    #: This client's name to the others attached ("" : the server's).
    label: str = ""
    #: The model asked for (flag, environment or settings), None: the
    #: server's default. A remote server is sent it with each request.
    model: str | None = None


class ToolSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Which tools the session has, where they run and what they may do."""

    #: The directory the tools work in.
    workspace: Path
    #: More directories the tools may use (``--include-directories``).
    include_dirs: tuple[Path, ...] = ()
    approval_mode: ApprovalMode = ApprovalMode.DEFAULT
    allowed_tools: tuple[str, ...] = ()
    #: The policy files' rules; None: the approval modes' rules only.
    policy: Policy | None = None
    #: Where shell commands run; None: unconfined.
    sandbox: Sandbox | None = None
    #: Where ``save_memory`` appends facts (the user's global context file);
    #: None: no ``save_memory`` tool.
    memory_file: Path | None = None
    #: Only these built-in tools exist (``tools.core``); None: all of them.
    core_tools: tuple[str, ...] | None = None
    #: Tools never offered to the model (``tools.exclude``).
    exclude_tools: tuple[str, ...] = ()
    #: gemini-cli's ``mcpServers``: MCP servers whose tools join the local
    #: ones (see :mod:`gemini_split.tools.mcp`).
    mcp_servers: Mapping[str, MCPServerSettings] = msgspec.field(default_factory=dict)
    #: ``--allowed-mcp-server-names`` / ``mcp.allowed``: only these servers (None: all).
    mcp_allowed: tuple[str, ...] | None = None
    #: ``mcp.excluded``: never these servers.
    mcp_excluded: tuple[str, ...] = ()
    #: Where the MCP servers' tool declarations are cached (see
    #: :mod:`gemini_split.tools.mcp.cache`); None: every server is started.
    mcp_cache: Path | None = None
    #: Where ``mcp-server-enablement.json`` is (:mod:`gemini_split.userfiles.mcp_enablement`):
    #: the servers it disables are not started. None: every server is enabled.
    mcp_enablement: Path | None = None
    #: Where the edit tools' changes are journaled for ``/rewind`` (one
    #: directory per session: :func:`edits_directory`); None: not journaled.
    edits_dir: Path | None = None
    #: The installed extensions (a ``userfiles.extensions.ExtensionSet``):
    #: their MCP servers and excluded tools are merged into the fields
    #: above; their context files and commands are read from here. None:
    #: none were read.
    extensions: Any = None
    #: ``--approval-mode reject_dangerous``: never ask, refuse what would
    #: need approval (``approval_mode`` is then ``default``), here and on
    #: a server that runs the tools.
    reject_dangerous: bool = False
    #: ``--tools``: where the session's tools run, ``client`` (here) or
    #: ``server`` (on the server, in a workspace of its own or ``project``).
    run_on: str = "client"
    #: ``--project``: with ``run_on="server"``, a project directory from the
    #: server's allowlist instead of a fresh workspace.
    project: str | None = None
    #: ``general.checkpointing.enabled``: where checkpoints of the tools
    #: run here are kept (the user's ``~/.gemini`` or
    #: ``$GEMINI_SPLIT_HOME``: ``history/`` and ``tmp/``, see
    #: :mod:`.checkpoints`). None: no checkpoints.
    checkpoints_home: Path | None = None
    #: Where plan mode keeps the plans of the tools run here
    #: (:mod:`gemini_split.tools.plans`); None: no plan mode
    #: (``general.plan.enabled: false``).
    plans: PlanPlace | None = None


class ContextSettings(msgspec.Struct, frozen=True, kw_only=True):
    """What the session is told about the project (see
    :func:`gemini_split.app.attach_context`)."""

    #: The ``SessionContext`` sent with each request (context files, approval
    #: mode, the first turn's environment); None: send none.
    message: SessionContext | None = None
    #: What was read for it, for ``/memory`` and ``--debug``.
    project: ProjectContext | None = None
    #: Subdirectory context files found as tools reach into the tree, or None.
    tracker: SubdirectoryContext | None = None
    #: The Agent Skills discovered, or None. The enabled ones' directories
    #: join the tools' workspace, so the files ``activate_skill`` lists can
    #: be read with the confined file tools.
    skills: Discovery | None = None
    #: (1.4) The sub-agents found (built-ins, user and project files), or
    #: None; the enabled ones travel in ``message.agents``.
    agents: "AgentDiscovery | None" = None
    #: ``GEMINI_SYSTEM_MD``: the file whose text replaces the built-in
    #: system prompt (in ``message.system_prompt``), None: the built-in one.
    system_prompt_file: Path | None = None
    #: ``GEMINI_WRITE_SYSTEM_MD``: where the system prompt the server would
    #: send is written once connected (None: nowhere).
    write_system_prompt: Path | None = None


class ClientSettings(msgspec.Struct, kw_only=True):
    """Everything needed to open a session, resolved from flags, environment
    and profiles by the CLI, by concern: where to connect (``endpoint``),
    which session (``session``), tools and policy (``tools``), context
    (``context``). The parts are frozen: a change makes a new part
    (``msgspec.structs.replace``), so settings copied for one connection
    never change under another."""

    endpoint: Endpoint = msgspec.field(default_factory=Endpoint)
    session: SessionChoice = msgspec.field(default_factory=SessionChoice)
    tools: ToolSettings
    context: ContextSettings = msgspec.field(default_factory=ContextSettings)
    #: The settings files this was resolved from, for the front ends' own
    #: keys; None when built by hand.
    loaded_settings: LoadedSettings | None = None

    def reaching(self, **changes: Any) -> ClientSettings:
        """A copy whose endpoint has ``changes``."""
        return msgspec.structs.replace(self, endpoint=msgspec.structs.replace(self.endpoint, **changes))

    def choosing(self, **changes: Any) -> ClientSettings:
        """A copy whose session choice has ``changes``."""
        return msgspec.structs.replace(self, session=msgspec.structs.replace(self.session, **changes))

    def with_tools(self, **changes: Any) -> ClientSettings:
        """A copy whose tool settings have ``changes``."""
        return msgspec.structs.replace(self, tools=msgspec.structs.replace(self.tools, **changes))


@asynccontextmanager
async def open_client(
    settings: ClientSettings,
    *,
    on_event: EventCallback | None = None,
    asker: Asker | None = None,
    on_notice: Callable[[str], None] | None = None,
    on_connection: ConnectionCallback | None = None,
) -> AsyncIterator[ProtocolClient]:
    """A connected, handshaken client whose reader runs in the background.

    MCP servers of ``settings`` start in the background: the connection
    does not wait for them; the first prompt does (their tools join the
    client's then), and ``on_notice`` gets one line per server that failed.

    Raises :class:`~gemini_split.transport.ConnectFailed` (or its
    subclasses) when the server cannot be reached or refuses us
    (:class:`HandshakeFailed` with code ``unknown_session`` when there is no
    session to resume). A connection to a server that breaks is reopened and
    the session resumed for up to ``settings.endpoint.reconnect_timeout``
    seconds; ``on_connection`` hears about it."""
    tools, tracker = settings.tools, settings.context.tracker
    registry = _offered_tools(tools)
    executor = ToolExecutor(
        registry,
        Workspace(tools.workspace, tools.include_dirs + _skill_dirs(settings.context.skills)),
        ApprovalPolicy(tools.approval_mode, tools.allowed_tools, tools.policy),
        None if tools.reject_dangerous else asker,  # reject_dangerous: nobody is asked
        after_run=tracker.after_run if tracker is not None else None,
    )
    executor.plans = tools.plans if tools.run_on == "client" else None
    if settings.loaded_settings is not None:
        from gemini_split.userfiles.settings import approval_mode_refusal  # lazy_imports.EDGES (loaded by now)

        loaded = settings.loaded_settings
        executor.policy.refuses = lambda mode: approval_mode_refusal(loaded, mode.value)
    # ask_user needs someone to answer (whatever reject_dangerous says of
    # approvals); with nobody, it is not offered, as in gemini-cli.
    executor.user = asker if getattr(asker, "ask_user", None) is not None else None
    if executor.user is not None and _offers(tools, ask_user.NAME) \
            and registry.get(ask_user.NAME) is None:
        registry.register(ask_user.AskUserTool())
    hooks = _hook_runner(settings, on_notice)
    executor.hooks = hooks
    if tools.run_on == "client":
        executor.delegates = _remote_agents(settings)
    if tools.checkpoints_home is not None and tools.run_on == "client":
        from gemini_split.tools.checkpoints import for_settings  # lazy_imports.EDGES

        # The project's directories, as /restore opens them: never a skill's
        # folder, which the workspace also shows (_skill_dirs).
        executor.checkpoints = for_settings(tools)
    try:
        async with _connected(settings, executor, on_event, on_notice, on_connection) as client:
            if hooks is None:
                yield client
            else:
                from gemini_split.userfiles.hooks import session_hooks  # lazy_imports.EDGES

                async with session_hooks(client, hooks, resumed=settings.session.resume is not None):
                    yield client
    finally:
        # Background commands (run_shell_command is_background) end with the client.
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(executor.registry.close)


def _remote_agents(settings: ClientSettings) -> Callable[[str], Any]:
    """The executor's ``delegates``: the remote (Agent2Agent) sub-agents of
    ``settings.context.agents`` as it is when the server asks (after
    ``/agents reload`` too), their module loaded at the first one."""
    made: list[Any] = []

    def delegate(name: str) -> Any:
        found = settings.context.agents
        agent = found.get(name) if found is not None else None
        if agent is None or agent.remote is None:
            return None
        if not made:
            from gemini_split.tools.a2a import RemoteAgents  # lazy_imports.EDGES

            loaded = settings.loaded_settings
            made.append(RemoteAgents(proxy=loaded.merged.general.proxy if loaded is not None else None))
        return made[0].get(found, name)

    return delegate


def _hook_runner(settings: ClientSettings, on_notice: Callable[[str], None] | None) -> Any:
    """The hooks of ``settings.loaded_settings`` (None when there are none);
    what is wrong with their definitions is said once a process."""
    loaded = settings.loaded_settings
    extensions = settings.tools.extensions
    extension_hooks = list(extensions.hooks()) if extensions is not None else []
    if loaded is None or (not extension_hooks and not any(f.exists and "hooks" in f.raw for f in loaded.files)):
        return None  # no hooks anywhere: their module is not even loaded
    from gemini_split.userfiles.hooks import HookRunner, load_hooks, parse_hooks  # lazy_imports.EDGES

    hook_set = load_hooks(loaded)
    for name, hooks, env in extension_hooks:  # an extension's hooks/hooks.json, after the settings files'
        hook_set.add(*parse_hooks(hooks, f"extension {name}", env=env))
    notice = hook_set.unsupported_notice()
    for line in [*hook_set.warnings, *([notice] if notice else [])]:
        if on_notice is not None and line not in _SAID:
            _SAID.add(line)
            on_notice(line.removeprefix("gemini-split: "))
    if not hook_set.enabled or not hook_set.hooks:
        return None  # (a runner whose hooks are all disabled stays: /hooks enable turns one on)

    def notify(line: str) -> None:
        if on_notice is not None:
            on_notice(line.removeprefix("gemini-split: "))

    return HookRunner(hook_set, settings.tools.workspace, notify=notify)


def _skill_dirs(skills: Discovery | None) -> tuple[Path, ...]:
    """The enabled skills' directories (gemini-cli adds a skill's directory
    to the workspace when it is activated; activation is answered by the
    server here, so they are added from the start)."""
    if skills is None:
        return ()
    return tuple(s.directory for s in skills.enabled() if s.directory.is_dir())


@asynccontextmanager
async def _connected(settings: ClientSettings, executor: ToolExecutor, on_event: EventCallback | None,
                     on_notice: Callable[[str], None] | None,
                     on_connection: ConnectionCallback | None) -> AsyncIterator[ProtocolClient]:
    with single_exceptions():
        endpoint, session, tools = settings.endpoint, settings.session, settings.tools
        async with open_mcp_tools(tools) as mcp, _open_agent_mcp(settings, on_notice) as agent_mcp, \
                trio.open_nursery() as nursery:
            address = endpoint.server or endpoint.embedded_address
            if address is None:
                raise ConnectFailed("embedded mode: no embedded service is being served "
                                    "(hold it with gemini_split.app.hold_embedded)")
            transport = get_transport(address)
            try:
                stream = await transport.open_connection(address, endpoint.connect)
            except ConnectFailed:
                if endpoint.restart_server is None:
                    raise
                # The local daemon went between finding it and connecting:
                # start it again (once) and connect to the new one.
                address = await trio.to_thread.run_sync(endpoint.restart_server)
                transport = get_transport(address)
                stream = await transport.open_connection(address, endpoint.connect)

            async def reopen() -> MessageStream:
                return await transport.open_connection(address, endpoint.connect)

            client = ProtocolClient(
                stream, executor, on_event=on_event, on_connection=on_connection,
                reconnect=reopen if endpoint.server is not None else None,
                reconnect_timeout=endpoint.reconnect_timeout,
                tool_choice=server_tool_choice(tools, can_ask=executor.asker is not None),
            )
            if executor.checkpoints is not None:  # a checkpoint records its prompt's request_started seq
                executor.checkpoints.context = lambda request_id: (
                    client.connected.session_id if client.connected is not None else None,
                    client.request_seqs.get(request_id or ""))
            client.wants_server_tool = lambda name: _offers(tools, name)
            if tools.edits_dir is not None:
                client.forget_session = lambda session_id: _forget_edits(tools.edits_dir, session_id)
            client.caller = endpoint.caller
            client.send_api_key = endpoint.send_api_key
            if mcp is not None:
                client.mcp_servers = mcp
            client.agent_mcp = agent_mcp
            try:
                replay = session.replay
                if session.resume is not None and not session.attach and replay is None:
                    # A resumed conversation is redrawn from its history.

                    replay = Replay(limit=0)
                await client.handshake(token=endpoint.connect.token, session_id=session.resume,
                                       new_session_id=session.new_session_id,
                                       role=session.role, label=session.label, replay=replay)
                _check_system_prompt(settings.context, client)
                runs_ours = _runs_client_tools(client)
                if tools.edits_dir is not None and runs_ours and tools.run_on != "server" \
                        and client.connected is not None:
                    executor.edits_dir = edits_directory(tools.edits_dir, client.connected.session_id)
                    executor.request_seq = lambda request_id: client.request_seqs.get(request_id or "")
                for line in [*_tools_elsewhere(tools, client, runs_ours), *_hooks_not_run(tools, client),
                             *_mcp_not_used(tools)]:
                    if on_notice is not None and line not in _SAID:
                        _SAID.add(line)  # once a process: /clear reconnects to the same server
                        on_notice(line)
                if mcp is not None and runs_ours:
                    client.before_turn = _joining_mcp_tools(client, mcp, tools.exclude_tools, on_notice)
                if agent_mcp is not None and runs_ours:
                    client.before_turn = _joining_agent_mcp(client, agent_mcp, client.before_turn, on_notice)
                await nursery.start(client.run)
                if settings.context.write_system_prompt is not None:
                    await _write_system_prompt(settings.context, client, on_notice)
                yield client
            finally:
                with trio.CancelScope(shield=True):
                    await client.aclose()
                nursery.cancel_scope.cancel()


def edits_directory(base: Path, session_id: str) -> Path:
    """Where the edits of ``session_id`` made by this client's tools are
    journaled for ``/rewind`` (``tools/edit_journal.py``): a directory
    under ``base`` named after the session, made safe as one file name."""
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in session_id)[:200]
    return base / (name if name.strip(".") else "_")


def _forget_edits(base: Path, session_id: str) -> None:
    shutil.rmtree(edits_directory(base, session_id), ignore_errors=True)


#: Notices already given by this process (see :func:`_tools_elsewhere`).
_SAID: set[str] = set()


def _check_system_prompt(context: ContextSettings, client: ProtocolClient) -> None:
    """Refuse to go on with a server that would ignore the user's own system
    prompt (``GEMINI_SYSTEM_MD``: protocol 1.4). Raises :class:`HandshakeFailed`."""
    message = context.message
    old = client.conn.too_old_for(GenerateContentRequest, "context.system_prompt")
    if message is None or message.system_prompt is None or old is None:
        return
    server = (client.connected.server if client.connected is not None else "") or "the server"
    raise HandshakeFailed(
        f"{server} speaks protocol {old.peer} and would ignore your system prompt "
        f"file {context.system_prompt_file} (GEMINI_SYSTEM_MD needs {old.since}): upgrade the server, or unset "
        "GEMINI_SYSTEM_MD to use its built-in system prompt", "unsupported_version")


async def _write_system_prompt(context: ContextSettings, client: ProtocolClient,
                               on_notice: Callable[[str], None] | None) -> None:
    """``GEMINI_WRITE_SYSTEM_MD``: write the system prompt the server would
    send to the file it names; a failure is told, not fatal."""
    path = context.write_system_prompt
    assert path is not None
    try:
        reply = await client.get_system_prompt(context.message)
        await trio.to_thread.run_sync(write_prompt, path, reply.text)
    except (RequestFailed, OSError) as exc:
        if on_notice is not None:
            on_notice(f"GEMINI_WRITE_SYSTEM_MD: the system prompt was not written to {path}: "
                      f"{getattr(exc, 'strerror', None) or exc}")


def _runs_client_tools(client: ProtocolClient) -> bool:
    """Whether the server calls this client's tools (``client_tools`` in
    ``connected.capabilities``): a server of another protocol behind a
    translating transport (seed 001's gRPC service) runs its own."""
    return client.connected is not None and "client_tools" in client.connected.capabilities


def _tools_elsewhere(settings: ToolSettings, client: ProtocolClient, runs_ours: bool) -> list[str]:
    """What to tell the user, once, at the start of a connection to a
    server that runs no tools of ours although we meant to run them: the
    files and commands the model reaches are the server's, and the MCP
    servers configured here are not used."""
    if runs_ours or settings.run_on != "client":
        return []
    server = (client.connected.server if client.connected is not None else "") or "the server"
    lines = [f"tools run on the server ({server}), in the session's workspace there: the model does not see "
             f"this directory ({settings.workspace}) or run anything on this machine"]
    names = [n for n in sorted(settings.mcp_servers) if n not in settings.mcp_excluded
             and (settings.mcp_allowed is None or n in settings.mcp_allowed)]
    if names:
        lines.append(f"the MCP servers in settings.json ({', '.join(names)}) are not used: this server runs "
                     "its own tools and takes none from this client")
    return lines


def _mcp_not_used(settings: ToolSettings) -> list[str]:
    """The line to say when the session's tools run on the server
    (``--tools server``) and MCP servers are configured here — in
    settings.json or by an extension: they are not started, and the model
    does not get their tools (the server takes no tool from this client)."""
    if settings.run_on != "server":
        return []
    names = [n for n in sorted(settings.mcp_servers) if n not in settings.mcp_excluded
             and (settings.mcp_allowed is None or n in settings.mcp_allowed)]
    if not names:
        return []
    return [f"the MCP servers configured here, in settings.json or by an extension ({', '.join(names)}), are not "
            "used: the session's tools run on the server (--tools server), which takes no tool from this client"]


def _hooks_not_run(settings: ToolSettings, client: ProtocolClient) -> list[str]:
    """The line to say when this client has tool hooks, the session's tools
    run on the server, and the server cannot ask this client to run them
    (it speaks a protocol older than 1.4): its tools then run without them."""
    hooks = client.executor.hooks
    old = client.conn.too_old_for(HookResponse)  # the server asks with hook_request from the same version
    if settings.run_on != "server" or hooks is None or not hooks.has_tool_hooks or old is None:
        return []
    return ["BeforeTool and AfterTool hooks do not run for the tools the server runs (--tools server): "
            f"this server speaks protocol {old.peer}, and asks a client to run them from {old.since} on; "
            "see README \"Hooks\""]


def server_tool_choice(settings: ToolSettings, *, can_ask: bool) -> ServerToolChoice | None:
    """What ``hello`` asks for when the session's tools run on the server
    (None: they run here). The approval mode is the client's, except that
    ``default`` with nobody to ask is left to the server, which then
    refuses what would need approval (``reject_dangerous``) instead of
    asking nobody."""
    if settings.run_on != "server":
        return None
    mode: str | None = settings.approval_mode.value
    if settings.reject_dangerous:
        mode = "reject_dangerous"
    elif mode == ApprovalMode.DEFAULT.value and not can_ask:
        mode = None
    return ServerToolChoice(project=settings.project, approval_mode=mode, core_tools=settings.core_tools,
                            exclude_tools=settings.exclude_tools)


def _offered_tools(settings: ToolSettings) -> ToolRegistry:
    """The built-in tools minus what ``tools.core`` leaves out and
    ``tools.exclude`` removes. Which of them the model is offered is the
    approval mode's, decided each time the client announces its tools
    (``ToolExecutor.offered``: not those the policy denies outright)."""
    tools = default_tools(memory_file=settings.memory_file, sandbox=settings.sandbox)
    if settings.core_tools is None and not settings.exclude_tools:
        return tools
    offered = ToolRegistry(tool for tool in tools if _offers(settings, tool.name))
    offered.closers = tools.closers
    return offered


def _offers(settings: ToolSettings, name: str) -> bool:
    """Whether a built-in tool exists here: in ``tools.core`` (when set)
    and not in ``tools.exclude``."""
    if settings.core_tools is not None and name not in settings.core_tools:
        return False
    return name not in settings.exclude_tools


@asynccontextmanager
async def open_mcp_tools(settings: ToolSettings) -> AsyncIterator[McpServers | None]:
    """The configured MCP servers, starting in parallel in the background:
    yields their :class:`~gemini_split.tools.mcp.sources.McpServers` at
    once (None when none is configured, so the SDK is never imported).
    Servers whose tools are in ``settings.mcp_cache`` start only when one
    of their tools is called. With ``--tools server`` none is started: the
    session offers no tool of this client's (see :func:`_mcp_not_used`)."""
    if not settings.mcp_servers or settings.run_on == "server":
        yield None
        return
    from gemini_split.tools.mcp.sources import open_mcp_servers
    from gemini_split.userfiles.mcp_enablement import disabled_states

    disabled = disabled_states(settings.mcp_enablement) if settings.mcp_enablement is not None else {}
    async with open_mcp_servers(
        settings.mcp_servers, cwd=settings.workspace,
        allowed=settings.mcp_allowed, excluded=settings.mcp_excluded, disabled=disabled, wait=False,
        cache_dir=settings.mcp_cache,
    ) as servers:
        servers.enablement_dir = settings.mcp_enablement
        yield servers


def _offered_agents(settings: ClientSettings) -> list[Any]:
    """The sub-agents (``userfiles.agents.Agent``) this session offers the
    model — the definitions in ``SessionContext.agents`` — that have their
    own MCP servers."""
    context = settings.context
    found = getattr(context, "agents", None)
    message = getattr(context, "message", None)
    if found is None or message is None:
        return []
    agents = (found.get(d.name) for d in message.agents if d.kind == "local")
    return [a for a in agents if a is not None and a.mcp_servers]


@asynccontextmanager
async def _open_agent_mcp(settings: ClientSettings,
                          on_notice: Callable[[str], None] | None) -> AsyncIterator[Any]:
    """(1.5) The offered sub-agents' own MCP servers, started as the
    session's (:mod:`.agent_mcp`), or None. With ``--tools server`` none
    is started (as the session's own are not used): that is said once."""
    agents = _offered_agents(settings)
    if not agents:
        yield None
        return
    from gemini_split.tools.agent_mcp import not_used_notice, open_agent_mcp  # lazy_imports.EDGES

    if settings.tools.run_on != "client":
        line = not_used_notice(agents)
        if line is not None and on_notice is not None and line not in _SAID:
            _SAID.add(line)
            on_notice(line)
        yield None
        return
    async with open_agent_mcp(agents, settings.tools) as started:
        yield started


def _joining_agent_mcp(client: ProtocolClient, agent_mcp: Any, before: Callable[[], Awaitable[None]] | None,
                       on_notice: Callable[[str], None] | None) -> Callable[[], Awaitable[None]]:
    """What ``client`` awaits before its first prompt (after ``before``):
    the sub-agents' own MCP servers started (or failed), their tools given
    to the executor for their agents' calls only and to the client for the
    definitions it sends; a server that failed said with the definition's
    path and the server's name."""

    async def join() -> None:
        if before is not None:
            await before()
        if agent_mcp.joined:
            return
        for line in await agent_mcp.join():
            if on_notice is not None:
                on_notice(line)
        client.executor.agent_tools = agent_mcp.tools
        client.agent_mcp_tools = agent_mcp.specs

    return join


def _joining_mcp_tools(
    client: ProtocolClient, servers: McpServers, exclude: tuple[str, ...],
    on_notice: Callable[[str], None] | None,
) -> Callable[[], Awaitable[None]]:
    """What ``client`` awaits before its first prompt: the MCP servers
    started (or failed), their tools in its registry and announced."""
    joined = False

    async def join() -> None:
        nonlocal joined
        if joined:
            return
        await servers.wait_started()
        joined = True
        servers.sync_registry(client.executor.registry, exclude)
        for line in servers.failures():
            if on_notice is not None:
                on_notice(line)
        await client.announce_tools()

    client.mcp_exclude = exclude
    return join


def describe_connect_error(exc: BaseException) -> tuple[str, str | None, ExitStatus]:
    """(message, error code, exit status) for a failure to reach a server."""
    status = exit_status_for(exc)
    if isinstance(exc, AuthenticationFailed):
        return f"authentication failed: {exc}", "unauthorized", status
    if isinstance(exc, HandshakeFailed | RequestFailed):
        return str(exc), exc.code, status
    message = str(exc)
    if not message.lower().startswith("cannot connect"):
        message = f"cannot connect: {message}"
    return message, "connect_failed", status
