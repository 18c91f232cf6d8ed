"""The composition root: flags, environment and profiles in, the program's
parts out.

Everything that decides *which* parts a run uses lives here, so the front
ends (:mod:`gemini_split.ui`) and the commands never reach up for it: the
client settings (precedence: a flag beats an environment variable, which
beats a profile's value, which beats ``settings.json``
(:mod:`gemini_split.userfiles.settings`), which beats the default), the model (and its key),
and the embedded server side. The arrows only run downward::

    cli -> commands -> ui -> app -> {client, server} -> transport -> protocol

Errors are :class:`~gemini_split.errors.ConfigurationError` (or a subclass)
whose text says what to change.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, ContextManager

import msgspec
import trio

from gemini_split._trio_util import single_exceptions
from gemini_split.userfiles.agents import Discovery as AgentDiscovery
from gemini_split.userfiles.agents import agent_roots, wire_agents
from gemini_split.userfiles.agents import discover as discover_agent_files
from gemini_split.tools.approval import ApprovalMode, ApprovalPolicy, parse_allowed_tools, parse_approval_mode
from gemini_split.client.connect import ClientSettings, ContextSettings, Endpoint, SessionChoice, ToolSettings
from gemini_split.userfiles.context import (
    SubdirectoryContext,
    load_project_context,
    session_context_message,
    session_context_text,
)
from gemini_split.client.local_daemon import ensure_daemon
from gemini_split.userfiles.skills import Discovery, discover, skill_roots, wire_skills
from gemini_split.tools.builtin.session_tools import default_memory_file
from gemini_split.tools.plans import PlanPlace
from gemini_split.tools.builtin.subprocess_env import is_secret_name
from gemini_split.userfiles.system_prompt import custom_prompt_file, read_custom_prompt, write_prompt_file
from gemini_split.collector import paused_collection
from gemini_split.environment import Environment
from gemini_split.errors import (
    BadInput,
    ConfigurationError,
    GeminiSplitError,
    MissingApiKey,
    ProfileError,
    SettingsError,
)
from gemini_split.model_aliases import resolve_model_name
from gemini_split.options import ClientOptions, ServerToolsOptions
from gemini_split.policy import excluded_tools_rules, load_policy
from gemini_split.sandbox import Sandbox, sandbox_mode_from
from gemini_split.userfiles.settings import (
    LoadedSettings,
    MCPServerSettings,
    PlanSettings,
    Settings,
    load_settings,
    workspace_dir_refusal,
    yolo_disabled_by,
)
from gemini_split.telemetry import Recorder, TelemetryFlags, activated, secret_values
from gemini_split.telemetry import resolve_config as resolve_telemetry
from gemini_split.protocol import Caller
from gemini_split.transport import ConnectFailed, ConnectOptions, ServeOptions, get_transport

if TYPE_CHECKING:
    from gemini_split.client.profiles import ServerProfile
    from gemini_split.policy import Policy
    from gemini_split.sandbox import Sandbox
    from gemini_split.server.model.base import Model
    from gemini_split.server.service import AgentService
    from gemini_split.server.session.features.server_tools import ServerTools

DEFAULT_SERVER_PORT = 8080
log = logging.getLogger(__name__)


def resolve_client_settings(options: ClientOptions, env: Environment,
                            loaded: LoadedSettings | None = None, *, interactive: bool = False) -> ClientSettings:
    """Flags (``options``), environment, settings files and profiles → :class:`ClientSettings`.

    ``loaded`` is the already-read settings, if the caller has them;
    ``interactive``: the REPL (a person approves and reads along)."""
    if loaded is None:
        loaded = _load_settings(options, env)
        for line in loaded.warnings:
            env.warn(line)
    s = loaded.merged
    workspace = Path(options.workspace).expanduser() if options.workspace else env.cwd
    workspace = workspace if workspace.is_absolute() else env.cwd / workspace
    if not workspace.is_dir():
        raise BadInput(f"workspace {workspace} is not a directory")
    server_arg = options.server
    if not server_arg and not env.environ.get("GEMINI_SERVER_MODE"):
        server_arg = s.gemini_split.server
    server = resolve_server_address(server_arg, env)
    connect = _connect_options(options, server_arg, env)
    if connect.insecure:
        env.warn("WARNING: --insecure: the server's TLS certificate is NOT verified; "
                 "anyone on the network path can read and change this session.")
    # Resolved in this order, which decides the error shown first.
    approval_mode = resolve_approval_mode(options, env, s)
    if approval_mode is ApprovalMode.YOLO:
        refuse_disabled_yolo(_asked_for_yolo(options), loaded)
    allowed_tools = _allowed_tools(options, s)
    policy = resolve_policy(options, env, loaded)
    sandbox = resolve_sandbox(options, env, s)
    include_dirs = resolve_include_dirs(options, env, s)
    core_tools = _tool_names("tools.core", s.tools.core)
    exclude_tools = _tool_names("tools.exclude", s.tools.exclude) or ()
    model = resolve_model(options, env, s)
    tools = ToolSettings(
        workspace=Path(os.path.realpath(workspace)),
        include_dirs=include_dirs,
        approval_mode=approval_mode,
        allowed_tools=allowed_tools,
        policy=policy,
        sandbox=sandbox,
        core_tools=core_tools,
        exclude_tools=exclude_tools,
        mcp_servers=s.mcp_servers,
        mcp_allowed=_mcp_allowed(options, s),
        mcp_excluded=tuple(s.mcp.excluded),
        mcp_cache=env.config_dir / "mcp-cache",
        mcp_enablement=env.config_dir,
        edits_dir=env.config_dir / "rewind",
        checkpoints_home=env.config_dir if s.general.checkpointing.enabled else None,
        plans=_plan_place(s.general.plan, env, Path(os.path.realpath(workspace))),
        reject_dangerous=_rejects_dangerous(options, env),
        run_on=options.tools,
        project=options.project,
    )
    tools = with_extensions(tools, env, only=options.extensions, trusted=loaded.trusted)
    caller, send_api_key = None, False
    if server is not None and server.startswith("unix:"):
        caller = local_caller(env, model)
    elif options.send_api_key:
        caller, send_api_key = sent_api_key(env, server), True
    restart_server = None
    if server is not None and names_local_daemon(server_arg, env):
        restart_server = partial(_local_daemon_address, env)
    settings = ClientSettings(
        endpoint=Endpoint(server=server, connect=connect, reconnect_timeout=options.reconnect_timeout,
                          caller=caller, send_api_key=send_api_key, restart_server=restart_server),
        session=SessionChoice(resume=options.resume, new_session_id=options.session_id, model=model,
                              label=TERMINAL_LABEL),
        tools=tools,
        loaded_settings=loaded,
    )
    if tools.run_on == "server" and server is None:
        raise ConfigurationError("--tools server needs --server: the embedded server runs no tools of its own")
    if tools.project is not None and tools.run_on != "server":
        raise ConfigurationError("--project needs --tools server")
    attach_context(settings, env, interactive=interactive)
    return settings


def _plan_place(plan: PlanSettings, env: Environment, project: Path) -> PlanPlace | None:
    """Where plan mode keeps a session's plans (``general.plan``):
    gemini-cli's ``~/.gemini/tmp/<project>/<session-id>/plans``, or
    ``general.plan.directory`` inside the project (gemini-cli refuses one
    outside it, and so do we); None with ``general.plan.enabled: false``."""
    if not plan.enabled:
        return None
    if not plan.directory:
        return PlanPlace(temp=env.config_dir / "tmp", project=project)
    path = Path(os.path.realpath(project / Path(plan.directory).expanduser()))
    if path != project and project not in path.parents:
        raise SettingsError(f"Custom plans directory '{plan.directory}' resolves to '{path}', which is outside "
                            f"the project root '{project}' (settings general.plan.directory).")
    return PlanPlace(fixed=path)


def with_extensions(tools: ToolSettings, env: Environment, *, only: tuple[str, ...] | None = None,
                    trusted: bool = False) -> ToolSettings:
    """``tools`` with the installed extensions (``~/.gemini/extensions``):
    the active ones' MCP servers (a server of settings.json with the same
    name wins, as in gemini-cli) and excluded tools merged in, and the set
    itself for their context files and commands (their settings' values
    from the workspace's ``.env`` too when the folder is ``trusted``).
    ``only`` (``-e``): just these are active; a name not installed is a
    ConfigurationError. Each
    extension or entry left out is said in one line."""
    if not (env.config_dir / "extensions").is_dir():
        _refuse_unknown_extensions(only or (), [])
        return tools  # none installed: their module is not even loaded (the thin -p path)
    from gemini_split.userfiles.extensions import load_extensions, unknown_names  # lazy_imports.EDGES

    found = load_extensions(env.config_dir, tools.workspace, home=_home_dir(env), only=only,
                            workspace_settings=trusted)
    _refuse_unknown_extensions(unknown_names(found, only or ()), list(found.extensions))
    servers = dict(tools.mcp_servers)
    for name, raw in found.mcp_servers().items():
        if name in servers:
            continue
        try:
            servers[name] = msgspec.convert(raw, MCPServerSettings)
        except msgspec.ValidationError as exc:
            found.problems.append(f"extension MCP server {name!r}: {exc}; it is not started")
    for line in found.problems:
        env.warn(f"gemini-split: {line}")
    if tools.policy is not None:
        for ext in found.active():  # "run_shell_command(rm -rf)" is refused when called, too
            tools.policy.add(*excluded_tools_rules(ext.exclude_tools, source=f"extension {ext.name} excludeTools"))
    return msgspec.structs.replace(
        tools, extensions=found, mcp_servers=servers,
        exclude_tools=tuple(dict.fromkeys([*tools.exclude_tools, *found.exclude_tools()])))


def _refuse_unknown_extensions(unknown: Iterable[str], installed: list[str]) -> None:
    """``-e NAME`` of an extension that is not installed: refused, not ignored."""
    unknown = [name for name in unknown if name.lower() != "none"]
    if unknown:
        raise ConfigurationError(f"Extension not found: {', '.join(unknown)} (-e/--extensions; installed: "
                                 f"{', '.join(installed) or 'none'}; gemini-split -l lists them)")


def _home_dir(env: Environment) -> Path:
    return Path(env.environ.get("HOME") or Path.home())


#: How the other clients of a session see this program at a terminal (the
#: REPL, ``-p``): by what it is; ``attach`` says its host instead, an editor
#: (ACP) ``editor``, the gRPC face ``gRPC client``, the browser ``browser``.
TERMINAL_LABEL = "terminal"


def embedded_service_for(options: ClientOptions, env: Environment, settings: ClientSettings, *,
                         model: bool = True) -> AgentService | None:
    """The embedded service when ``settings`` name no server (its key is
    checked now, before anything is shown), else None: the command holds it
    around its sessions with :func:`hold_embedded`. ``model=False``: the
    session store only (``--list-sessions``, ``--delete-session``), so no
    credentials are needed."""
    if settings.endpoint.server is not None:
        return None
    return embedded_service(options, env, settings.loaded_settings, model=model)


def _load_settings(options: ClientOptions, env: Environment) -> LoadedSettings:
    """The settings files, the current folder trusted for this run with ``--skip-trust``."""
    return load_settings(env, trust=True if options.skip_trust else None)


def attach_context(settings: ClientSettings, env: Environment, *, interactive: bool) -> None:
    """Read the context files (``GEMINI.md``… as ``context.fileName`` says)
    and build what the session is told: :attr:`ClientSettings.context`
    (the message, the project context and the subdirectory tracker) and
    the ``save_memory`` file. Call again to refresh (``/memory refresh``)."""
    loaded = settings.loaded_settings
    assert loaded is not None, "context is read from the settings files the client settings came from"
    s = loaded.merged
    names = s.context_file_names()
    dirs = [settings.tools.workspace, *settings.tools.include_dirs]
    memory_dirs = dirs if s.context.load_memory_from_include_directories else dirs[:1]
    extensions = settings.tools.extensions
    extension_files = extensions.context_files() if extensions is not None else ()
    project = load_project_context(memory_dirs, config_dir=env.config_dir, file_names=names,
                                   trusted=loaded.trusted, boundary_markers=s.context.memory_boundary_markers,
                                   extension_files=extension_files)
    for line in project.warnings:
        env.warn(line)
    ignore = (".gitignore",) if s.context.file_filtering.respect_git_ignore else ()
    if s.context.file_filtering.respect_gemini_ignore:
        ignore += (".geminiignore",)
    environment = session_context_text(dirs, include_listing=s.context.include_directory_tree, ignore_files=ignore)
    settings.tools = msgspec.structs.replace(settings.tools,
                                            memory_file=default_memory_file(env.config_dir, names))
    skills = discover_skills(settings, env, extensions=extensions.skill_dirs() if extensions is not None else ())
    for line in skills.warnings:
        env.warn(f"gemini-split: skills: {line}")
    message = session_context_message(
        project, workspace_dirs=dirs, file_names=names, approval_mode=settings.tools.approval_mode.value,
        interactive=interactive, environment=environment, compression_threshold=s.model.compression_threshold,
    )
    if skills.enabled():
        message = msgspec.structs.replace(message, skills=wire_skills(skills))
    agents = discover_agents(settings, env)
    if agents is not None:
        for line in agents.warnings + [n for a in agents.agents for n in a.notes]:
            env.warn(f"gemini-split: agents: {line}")
        message = msgspec.structs.replace(message, agents=wire_agents(
            agents, excluded=settings.tools.exclude_tools, only=settings.tools.core_tools,
            plan=settings.tools.approval_mode is ApprovalMode.PLAN, remote=settings.tools.run_on == "client"))
    custom = custom_prompt_file(env.environ, env.cwd)
    if custom is not None:  # GEMINI_SYSTEM_MD: the user's own, in place of the built-in one
        message = msgspec.structs.replace(message, system_prompt=read_custom_prompt(custom))
    settings.context = ContextSettings(
        message=message,
        project=project,
        tracker=SubdirectoryContext(dirs, file_names=names, loaded=project.paths(), trusted=loaded.trusted),
        skills=skills,
        agents=agents,
        system_prompt_file=custom,
        write_system_prompt=write_prompt_file(env.environ, env.cwd),
    )
    log.debug("context files: %s", ", ".join(str(p) for p in project.paths()) or "none")


def discover_agents(settings: ClientSettings, env: Environment):
    """The sub-agents for this run (``gemini_split.userfiles.agents``): the
    built-ins, the user's ``~/.gemini/agents`` and, in a trusted folder,
    the project's ``.gemini/agents``, with ``agents.overrides`` applied
    (the server clamps each to the session's own tools: in plan mode, the
    read-only ones). None at all with ``experimental.enableAgents`` false."""
    loaded = settings.loaded_settings
    s = loaded.merged
    if not s.experimental.enable_agents:
        return AgentDiscovery()
    roots = agent_roots(env.config_dir, settings.tools.workspace, trusted=loaded.trusted)
    return discover_agent_files(roots, overrides=s.agents.overrides, proxy=s.general.proxy, environ=env.environ)


def discover_skills(settings: ClientSettings, env: Environment, extensions: Iterable[tuple[str, Path]] = ()):
    """The Agent Skills for this run (``gemini_split.userfiles.skills``):
    user skills, and the project's in a trusted folder; the active
    extensions' ``(name, skills directory)`` rank below both. None offered with
    ``skills.enabled`` false, or ``activate_skill`` in ``tools.exclude``."""
    loaded = settings.loaded_settings
    s = loaded.merged
    if not s.skills.enabled or "activate_skill" in settings.tools.exclude_tools:
        return Discovery()
    home = Path(env.environ.get("HOME") or Path.home())
    roots = skill_roots(env.config_dir, home, settings.tools.workspace, trusted=loaded.trusted, extensions=extensions)
    return discover(roots, disabled=s.skills.disabled)


def resolve_include_dirs(options: ClientOptions, env: Environment, s: Settings) -> tuple[Path, ...]:
    """``context.includeDirectories`` then ``--include-directories`` (comma
    separated or repeated), as in gemini-cli: relative to the current
    directory, ``~`` expanded. A missing directory from the command line is
    an error; one from settings is skipped with a warning, as gemini-cli does.
    A folder the folder trust rules refuse is refused the same way, by the
    rule ``/directory add`` applies (:func:`workspace_dir_refusal`)."""
    found: list[Path] = []
    flagged = [d.strip() for value in options.include_directories for d in value.split(",")]
    for source, entries in (("settings context.includeDirectories", s.context.include_directories),
                            ("--include-directories", flagged)):
        for entry in entries:
            if not entry:
                continue
            path = Path(entry).expanduser()
            path = path if path.is_absolute() else env.cwd / path
            if not path.is_dir():
                if source.startswith("settings"):
                    env.warn(f"gemini-split: {source}: {entry} is not a directory; skipped")
                    continue
                raise BadInput(f"{source}: {entry} is not a directory")
            real = Path(os.path.realpath(path))
            refusal = workspace_dir_refusal(real, env, enabled=s.security.folder_trust.enabled)
            if refusal is not None:
                if source.startswith("settings"):
                    env.warn(f"gemini-split: {source}: {entry}: {refusal}; skipped")
                    continue
                raise BadInput(f"{source}: {entry}: {refusal}")
            if real not in found:
                found.append(real)
    return tuple(found)


def _mcp_allowed(options: ClientOptions, s: Settings) -> tuple[str, ...] | None:
    """``--allowed-mcp-server-names`` (repeated or comma-separated), else
    ``mcp.allowed``; None: every configured server may start."""
    names = [n.strip() for value in options.allowed_mcp_server_names for n in value.split(",")]
    if any(names):
        return tuple(n for n in names if n)
    return tuple(s.mcp.allowed) if s.mcp.allowed is not None else None


def resolve_model(options: ClientOptions, env: Environment, s: Settings) -> str | None:
    """``--model``, ``$GEMINI_MODEL``, ``model.name``, an alias resolved
    (:mod:`gemini_split.model_aliases`); None: the server's default."""
    name = options.model or env.environ.get("GEMINI_MODEL") or s.model.name or None
    return resolve_model_name(name, s.model_configs) if name else None


def resolve_approval_mode(options: ClientOptions, env: Environment, s: Settings | None = None) -> ApprovalMode:
    """``--approval-mode``, ``--yolo``, ``$GEMINI_APPROVAL_MODE``, then
    ``general.defaultApprovalMode`` — where, as in gemini-cli, ``yolo`` is
    ignored: yolo is only ever asked for on the command line."""
    if options.yolo:
        return ApprovalMode.YOLO
    source, text = "--approval-mode", options.approval_mode
    if not text and env.environ.get("GEMINI_APPROVAL_MODE"):
        source, text = "GEMINI_APPROVAL_MODE", env.environ["GEMINI_APPROVAL_MODE"]
    if not text and s is not None and s.general.default_approval_mode not in (None, "yolo"):
        source, text = "settings general.defaultApprovalMode", s.general.default_approval_mode
    key = (text or "").strip().lower().replace("-", "_")
    if key == "auto_approve":  # seed 001's name for yolo
        text = "yolo"
    elif key == "reject_dangerous":  # default, with nobody asked (see ToolSettings.reject_dangerous)
        text = "default"
    try:
        mode = parse_approval_mode(text or "default")
    except ValueError as exc:
        error = SettingsError if source.startswith("settings") else ConfigurationError
        raise error(f"{source}: {exc}") from None
    if mode is ApprovalMode.PLAN and s is not None and not s.general.plan.enabled:
        env.warn('gemini-split: approval mode "plan" is disabled in settings (general.plan.enabled); '
                 'using "default"')
        mode = ApprovalMode.DEFAULT
    return mode


def refuse_disabled_yolo(asked: str, loaded: LoadedSettings) -> None:
    """Raise :class:`SettingsError` (exit status 52, gemini-cli's
    ``FatalConfigError``) when ``security.disableYoloMode`` is set: it holds
    "even if enabled by a flag". ``asked``: how yolo was asked for, named
    in the message with the setting and the file that set it."""
    disabled = yolo_disabled_by(loaded)
    if disabled:
        raise SettingsError(f"{asked}: YOLO mode is disabled by {disabled}; run without it "
                            "(tools then ask for approval), or ask whoever manages that file")


def _asked_for_yolo(options: ClientOptions) -> str:
    if options.yolo:
        return "--yolo"
    if options.approval_mode:
        return f"--approval-mode {options.approval_mode}"
    return "GEMINI_APPROVAL_MODE"


def _rejects_dangerous(options: ClientOptions, env: Environment) -> bool:
    """Whether ``--approval-mode`` (or ``$GEMINI_APPROVAL_MODE``) is
    ``reject_dangerous``: nothing is asked, what would be is refused."""
    if options.yolo:
        return False
    text = options.approval_mode or env.environ.get("GEMINI_APPROVAL_MODE") or ""
    return text.strip().lower().replace("-", "_") == "reject_dangerous"


def _allowed_tools(options: ClientOptions, s: Settings) -> tuple[str, ...]:
    """``--allowed-tools`` replaces ``tools.allowed`` (it does not add to it),
    as in gemini-cli."""
    if options.allowed_tools or not s.tools.allowed:
        return resolve_allowed_tools(options.allowed_tools)
    try:
        return resolve_allowed_tools(s.tools.allowed)
    except ConfigurationError as exc:
        raise SettingsError(str(exc).replace("--allowed-tools", "settings tools.allowed", 1)) from None


def resolve_policy(options: ClientOptions, env: Environment, loaded: LoadedSettings) -> Policy:
    """The policy files' rules (:func:`gemini_split.policy.load_policy`):
    the user's (or ``--policy``'s, else settings ``policyPaths``'), the
    admin's (and ``--admin-policy``'s, else ``adminPolicyPaths``'), and a
    trusted project's. A malformed file is a :class:`PolicyError` naming
    file, rule and field (exit status 2)."""
    s = loaded.merged
    policy = load_policy(config_dir=env.config_dir, cwd=env.cwd, trusted=loaded.trusted,
                         policy_paths=options.policy or s.policy_paths,
                         admin_policy_paths=options.admin_policy or s.admin_policy_paths, environ=env.environ)
    for line in policy.warnings:
        env.warn(line)
    return policy


def resolve_sandbox(options: ClientOptions, env: Environment, s: Settings) -> Sandbox | None:
    """Where shell commands run: ``$GEMINI_SANDBOX``, ``-s``/``--sandbox[=MODE]``,
    settings ``tools.sandbox`` (gemini-cli's order), default none; with
    ``--sandbox-network`` they may use the network. Raises
    :class:`~gemini_split.sandbox.SandboxUnavailable` when a sandbox is
    asked for and bwrap cannot provide it: never run unconfined silently."""
    mode = sandbox_mode_from(options.sandbox, env.environ, s.tools.sandbox, warn=env.warn)
    if mode == "none":
        return None
    return Sandbox.resolve(mode, network=options.sandbox_network, environ=env.environ)


def _tool_names(key: str, entries: list[str] | None) -> tuple[str, ...] | None:
    """Tool names from ``tools.core`` / ``tools.exclude``. gemini-cli also
    takes ``run_shell_command(git)`` there to narrow one command; that is
    refused with a clear error rather than silently widened to the whole
    tool."""
    if entries is None:
        return None
    for entry in entries:
        if "(" in entry:
            raise SettingsError(
                f"settings {key}: {entry!r}: per-command entries are not supported here; "
                "name the whole tool, and use tools.allowed or --allowed-tools for commands"
            )
    return tuple(entry.strip() for entry in entries if entry.strip())


def resolve_allowed_tools(values: Iterable[str]) -> tuple[str, ...]:
    """``--allowed-tools`` entries (repeated and/or comma-separated), checked
    now so a typo is a usage error, not a surprise mid-turn."""
    entries = tuple(entry for value in values for entry in parse_allowed_tools(value))
    try:
        ApprovalPolicy(ApprovalMode.DEFAULT, entries)
    except ValueError as exc:
        raise ConfigurationError(f"--allowed-tools: {exc}") from None
    return entries


def resolve_server_address(value: str | None, env: Environment) -> str | None:
    """The server to connect to, or None for embedded mode.

    ``--server`` takes an address (``ws://…``, ``wss://…``, ``stdio:…``) or a
    profile name. Without it, seed 000's environment variables decide:
    ``GEMINI_SERVER_MODE`` = embedded (default) | local | remote, with
    ``GEMINI_SERVER_HOST``, ``GEMINI_SERVER_PORT`` and ``GEMINI_SERVER_SECURE``."""
    if value:
        if ":" in value:
            return value
        if value == "local":
            return _local_daemon_address(env)
        return _profile_address(value, env)
    e = env.environ
    mode = (e.get("GEMINI_SERVER_MODE") or "embedded").strip().lower()
    port = e.get("GEMINI_SERVER_PORT") or str(DEFAULT_SERVER_PORT)
    if not port.isdigit():
        raise ConfigurationError(f"GEMINI_SERVER_PORT={port!r} is not a port number")
    scheme = "wss" if _truthy(e.get("GEMINI_SERVER_SECURE")) else "ws"
    if mode == "embedded":
        return None
    if mode == "local":
        return _local_daemon_address(env)
    if mode == "remote":
        host = e.get("GEMINI_SERVER_HOST")
        if not host:
            raise ConfigurationError("GEMINI_SERVER_MODE=remote needs GEMINI_SERVER_HOST")
        return f"{scheme}://{host}:{port}"
    raise ConfigurationError(f"GEMINI_SERVER_MODE={mode!r}: use embedded, local or remote")


def names_local_daemon(server_arg: str | None, env: Environment) -> bool:
    """Whether the server is the local daemon (``--server local``, or
    ``GEMINI_SERVER_MODE=local`` with no ``--server``)."""
    if server_arg:
        return server_arg == "local"
    return (env.environ.get("GEMINI_SERVER_MODE") or "").strip().lower() == "local"


def _local_daemon_address(env: Environment) -> str:
    """This user's local daemon (``unix:…``), started first when none runs
    (see :mod:`gemini_split.client.local_daemon`)."""
    return ensure_daemon(env)


def local_caller(env: Environment, model: str | None) -> Caller | None:
    """What a local daemon needs from us for a session (``hello.caller``):
    our key, endpoint and model. Sent only to a server proven to run as our
    own user; None when there is no key to send."""
    e = env.environ
    api_key = e.get("GEMINI_API_KEY") or e.get("GOOGLE_API_KEY")
    if _truthy(e.get("GOOGLE_GENAI_USE_VERTEXAI")):
        # Vertex AI: where the daemon finds our credentials (it is our
        # user), not the credentials; the key only for express mode.
        cloud = {name: e[name] for name in _GOOGLE_CLOUD_VARIABLES if e.get(name)}
        return Caller(api_key=api_key, google_cloud=cloud, model=model)
    if not api_key:
        return None
    return Caller(api_key=api_key, base_url=e.get("GOOGLE_GEMINI_BASE_URL") or None, model=model)


def sent_api_key(env: Environment, server: str | None) -> Caller:
    """``--send-api-key``: our Gemini API key for a server that takes its
    clients' keys (``serve --allow-client-credentials``): the key alone,
    no endpoint and no model. Raises when there is no server or no key."""
    if server is None:
        raise ConfigurationError("--send-api-key goes with --server: without one, this process uses your key itself")
    e = env.environ
    api_key = e.get("GEMINI_API_KEY") or e.get("GOOGLE_API_KEY")
    if not api_key:
        raise MissingApiKey("--send-api-key: set GEMINI_API_KEY (or GOOGLE_API_KEY) to the key to send")
    return Caller(api_key=api_key)


#: What a local daemon needs to reach Vertex AI as us (``hello.caller.google_cloud``).
_GOOGLE_CLOUD_VARIABLES = ("GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION",
                           "GOOGLE_VERTEX_BASE_URL", "GOOGLE_APPLICATION_CREDENTIALS", "CLOUDSDK_CONFIG", "HOME")


def _profile_address(name: str, env: Environment) -> str:
    """The address of the profile called ``name`` in ``servers.json``."""
    return _find_profile(name, env).address


def _find_profile(name: str, env: Environment) -> ServerProfile:
    from gemini_split.client.profiles import profile_store  # only when a profile is named

    store = profile_store(env.config_dir)
    profile = store.get(name)
    if profile is None:
        known = ", ".join(store.names()) or "none yet; add one with: gemini-split server add NAME URL"
        raise ConfigurationError(
            f"--server {name!r} is neither an address (ws://HOST:PORT, wss://…, 'stdio:COMMAND') "
            f"nor a profile in {store.path} (profiles: {known})"
        )
    return profile


def _connect_options(options: ClientOptions, server_arg: str | None, env: Environment) -> ConnectOptions:
    """Token, CA and TLS checking: a flag beats the profile named by
    ``--server`` (or ``geminiSplit.server``), which beats ``$GEMINI_SERVER_TOKEN``."""
    token, ca, insecure = options.token, options.ca, options.insecure
    if server_arg and ":" not in server_arg and server_arg != "local":
        profile = _find_profile(server_arg, env)
        token = token or profile.resolve_token(env.environ)
        ca = ca or profile.ca
        insecure = insecure or not profile.reject_unauthorized
    token = token or env.environ.get("GEMINI_SERVER_TOKEN") or None
    return ConnectOptions(token=token, ca_file=ca, insecure=insecure, extra=_spawn_extra(env))


def _spawn_extra(env: Environment) -> dict[str, object]:
    """A command a transport spawns (``stdio:COMMAND``) runs in the program's
    environment and directory, which are ``env``'s, not necessarily this
    process's (an embedding program or a test passes its own)."""
    return {"env": dict(env.environ), "cwd": str(env.cwd)}


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def settings_for(target: str, env: Environment, base: ClientSettings | None = None) -> ClientSettings:
    """Client settings that reach ``target``: a profile name or an address
    (whose token comes from ``$GEMINI_SERVER_TOKEN``)."""
    if ":" in target:
        address = target
        connect = ConnectOptions(token=env.environ.get("GEMINI_SERVER_TOKEN") or None, extra=_spawn_extra(env))
    else:
        from gemini_split.client.profiles import profile_store

        profile = profile_store(env.config_dir).get(target)
        if profile is None:
            raise ProfileError(f"no profile named {target!r} (see: gemini-split server list)")
        address = profile.address
        connect = ConnectOptions(token=profile.resolve_token(env.environ), ca_file=profile.ca,
                                 insecure=not profile.reject_unauthorized, extra=_spawn_extra(env))
    if base is None:
        return ClientSettings(tools=ToolSettings(workspace=env.cwd), endpoint=Endpoint(server=address, connect=connect))
    return base.reaching(server=address, connect=connect, embedded_address=None)



# --- the server side: model and embedded service ----------------------------------
#
# The server package is imported inside these functions, not above: a thin
# remote client (--server ws://…) loads no server code (bench/oneshot.py).


def open_model(flag: str | None, env: Environment, *, missing_key_hint: str = "",
               selected_type: str | None = None, environ: Mapping[str, str] | None = None) -> tuple[str, Model]:
    """The model name (``--model``, else ``$GEMINI_MODEL``, else the default)
    and the model behind it; one place for both embedded mode and ``serve``.

    The way to Gemini (an API key, or Vertex AI with its credentials; see
    :func:`gemini_split.server.model.credentials.resolve_model_auth`, which
    ``selected_type``, settings ``security.auth.selectedType``, feeds) is
    decided before anything else happens (and before google-genai is
    imported), so missing credentials are one clear message and exit
    status 41. Raises :class:`MissingApiKey` when a Gemini model has no
    credentials, and :class:`ConfigurationError` when the model cannot be
    set up (e.g. a ``scripted:`` file that is missing or malformed).
    ``environ`` replaces ``env``'s environment for choosing (``serve
    --auth-method``)."""
    from gemini_split.server.config import DEFAULT_MODEL
    from gemini_split.server.service import create_model

    e = env.environ if environ is None else environ

    name = resolve_model_name(flag or e.get("GEMINI_MODEL") or DEFAULT_MODEL)
    auth = None
    if not name.startswith("scripted:"):
        from gemini_split.server.model.credentials import NO_CREDENTIALS, resolve_model_auth

        try:
            auth = resolve_model_auth(e, selected_type=selected_type, home=Path.home())
        except MissingApiKey as exc:
            hint = missing_key_hint.lstrip(",; ")
            if str(exc) == NO_CREDENTIALS and hint:
                raise MissingApiKey(f"{exc}\n{hint[0].upper()}{hint[1:]}") from None
            raise
        log.debug("model %s through %s", name, auth.describe())
    try:
        return name, create_model(name, auth=auth)
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot set up model {name!r}: {exc}") from None


def embedded_service(options: ClientOptions, env: Environment, loaded: LoadedSettings | None = None, *,
                     model: bool = True) -> AgentService:
    """The server side for embedded mode (the key is checked first; with
    ``model=False`` there is no model, and no key is asked for: a service
    that only lists and deletes stored sessions).

    Resource handling: the service owns its model (one Gemini client, one
    TLS context); close it with ``await service.aclose()`` or ``async with
    service``. Build it once per process: every connection of the process
    (the first, ``/clear``'s, ``/server connect embedded``'s) is a new
    connection to the same service.

    The model comes from :func:`resolve_model`, the turn limit from
    ``--max-turns`` or ``model.maxSessionTurns``; ``loaded`` is the settings
    already read, if the caller has them."""
    s = (loaded or _load_settings(options, env)).merged
    max_turns = options.max_turns or (s.model.max_session_turns if s.model.max_session_turns > 0 else None)
    with paused_collection(env.owns_process):  # the server and google-genai load here
        from gemini_split.server.config import ServerConfig
        from gemini_split.server.service import AgentService

        from gemini_split.server.store import open_store

        if model:
            model_name, served = open_model(
                resolve_model(options, env, s), env,
                missing_key_hint=", or use --server to reach a server that has one.",
                selected_type=s.security.auth.selected_type,
            )
        else:
            from gemini_split.server.config import DEFAULT_MODEL
            from gemini_split.server.model.callers import KeylessModel

            model_name, served = DEFAULT_MODEL, KeylessModel("this run only lists or deletes sessions")
    config = ServerConfig(model=model_name)
    if max_turns:
        config.max_turns = max_turns
    # The same store and place as `serve`: a REPL conversation outlives the
    # process too. Not exclusive: several REPLs may run at once.
    store = open_store(env.config_dir / "sessions", replay_capacity=config.replay_capacity)
    return AgentService(served, config, store=store)


@asynccontextmanager
async def hold_embedded(settings: ClientSettings, service: AgentService | None) -> AsyncIterator[ClientSettings]:
    """Serve ``service`` (embedded mode's server side) for the block, and
    yield ``settings`` whose ``embedded_address`` reaches it; with no
    service, ``settings`` as they are. The service is closed at the end,
    even when cancelled: the command's whole life. (The REPL holds its
    own: it may open one later, on ``/server connect embedded``.)

    Raises :class:`~gemini_split.transport.ConnectFailed` when the session
    store cannot be opened."""
    if service is None:
        yield settings
        return
    try:
        with single_exceptions():
            async with trio.open_nursery() as nursery:
                address = await nursery.start(serve_embedded, service)
                yield settings.reaching(embedded_address=address)
                nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await service.aclose()


async def serve_embedded(service: AgentService, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve ``service`` on a private ``loopback:`` name (given to
    ``task_status.started``) until cancelled: its store open, its sessions
    run here, and every ``open_client`` of this process a new connection to
    it. The service (and its model) outlives this: its owner closes it.

    Raises :class:`~gemini_split.transport.ConnectFailed` when the session
    store cannot be opened (a one-line reason naming the file)."""
    transport = get_transport("loopback:")
    try:
        await service.open_store()
    except GeminiSplitError as exc:
        raise ConnectFailed(f"cannot start the embedded server: {exc}") from None
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        await transport.serve(
            "loopback:", service.handle_connection,
            ServeOptions(max_message_size=service.config.max_message_size),
            task_status=task_status,
        )


def server_tools_from(options: ServerToolsOptions, env: Environment) -> ServerTools | None:
    """``serve --server-tools`` and its options as the server's
    :class:`~gemini_split.server.session.features.server_tools.ServerTools`, whose tool hosts
    run this program's own tool registry (:mod:`gemini_split.tools.tool_host`);
    None without ``--server-tools``. Raises :class:`ConfigurationError`
    for a bad option, a workspace root that cannot be used, or a sandbox
    that does not work (``--sandbox auto``, the default, refuses to start;
    ``--sandbox none`` must be said explicitly)."""
    if not options.enabled:
        given = [flag for flag, value in (("--workspace-root", options.workspace_root), ("--project", options.projects),
                                          ("--web-fetch-allow", options.web_fetch_allow))
                 if value]
        if given:
            raise ConfigurationError(f"{' and '.join(given)} need --server-tools")
        return None
    from gemini_split.tools.tool_host import open_tool_host  # lazy_imports.EDGES
    from gemini_split.server.session.features.server_tools import ServerTools

    projects: dict[str, Path] = {}
    for entry in options.projects:
        name, sep, path = entry.partition("=")
        if not sep or not name.strip() or not path.strip():
            raise ConfigurationError(f"--project {entry!r}: expected NAME=PATH")
        if name.strip() in projects:
            raise ConfigurationError(f"--project {name.strip()!r} is given twice")
        projects[name.strip()] = Path(os.path.realpath(Path(path.strip()).expanduser()))
    from gemini_split.tools.builtin.web_guard import AddressGuard

    try:
        AddressGuard(options.web_fetch_allow)  # checked now: a typo stops the start
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None
    root = Path(options.workspace_root).expanduser() if options.workspace_root else env.config_dir / "workspaces"

    # The server's own settings: its user's and the system's, no project's.
    server_settings = load_settings(env, env.config_dir, trust=False)
    # The server's own rules (no project's: a client cannot bring rules along).
    policy = load_policy(config_dir=env.config_dir, cwd=None,
                         policy_paths=options.policy or server_settings.merged.policy_paths,
                         admin_policy_paths=options.admin_policy or server_settings.merged.admin_policy_paths,
                         environ=env.environ)
    for line in policy.warnings:
        env.warn(line)
    try:
        tools = ServerTools(
            factory=open_tool_host, workspace_root=root, projects=projects,
            approval_timeout=options.approval_timeout, max_approval_mode=options.max_approval_mode,
            sandbox=resolve_server_sandbox(options.sandbox, network=options.sandbox_network, env=env),
            policy=policy, web_fetch_allow=options.web_fetch_allow,
            private_paths=server_private_paths(options, env),
            checkpointing=server_settings.merged.general.checkpointing.enabled,
        )
        if tools.max_approval_mode == "yolo":
            refuse_disabled_yolo(f"--max-approval-mode {options.max_approval_mode}", server_settings)
        tools.prepare()
    except ValueError as exc:
        raise ConfigurationError(f"--server-tools: {exc}") from None
    except OSError as exc:
        raise ConfigurationError(f"--workspace-root: {exc}") from None
    return tools


#: Directories too general to mask whole because a secret file lies in
#: them (the file alone is masked): top-level directories and system trees.
_SHARED_PARENTS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/nix")


def server_private_paths(options: ServerToolsOptions, env: Environment) -> tuple[Path, ...]:
    """What ``serve`` keeps from its server-side commands (besides the
    workspace root and projects, see
    :meth:`gemini_split.server.session.features.server_tools.ServerTools.confinement`): the
    state directory, this program's configuration directory
    (``GEMINI_SPLIT_HOME``), the auth config (``GEMINI_AUTH_CONFIG`` too),
    TLS certificate and key, the ACP log, the Unix socket,
    ``GOOGLE_APPLICATION_CREDENTIALS``, the policy files — each file
    together with the directory holding it (where an environment file such
    as systemd's ``EnvironmentFile`` is expected to live beside
    ``tokens.json``), unless that directory is top-level or a system one."""
    e = env.environ
    files = [*options.private_files, e.get("GEMINI_AUTH_CONFIG"), e.get("GOOGLE_APPLICATION_CREDENTIALS"),
             *options.policy, *options.admin_policy]
    paths: list[Path] = [env.config_dir]
    if options.state_dir != ":memory:":
        paths.append(Path(options.state_dir).expanduser() if options.state_dir else env.config_dir / "sessions")
    for name in files:
        if not name:
            continue
        path = Path(os.path.realpath(Path(name).expanduser()))
        paths.append(path)
        parent = path.parent
        if len(parent.parts) > 2 and not any(parent.is_relative_to(s) for s in _SHARED_PARENTS):
            paths.append(parent)
    return tuple(dict.fromkeys(paths))


def resolve_server_sandbox(flag: str, *, network: bool = False, env: Environment | None = None) -> Sandbox:
    """``serve --sandbox`` → what server-side shell commands run under
    (:class:`gemini_split.sandbox.Sandbox`): ``auto`` (the default) and
    ``bwrap`` are bubblewrap or a refusal to start
    (:class:`~gemini_split.sandbox.SandboxUnavailable`, saying how to
    install it); unconfined only with ``none`` said explicitly.
    ``network``: ``--sandbox-network``."""
    return Sandbox.resolve(flag, network=network, environ=env.environ if env is not None else None)


def client_telemetry(settings: ClientSettings, env: Environment, *, interactive: bool,
                     output_format: str = "text", debug: bool = False) -> ContextManager[Recorder]:
    """The telemetry of a client command (``-p``, the REPL, ACP), from the
    user's settings and ``GEMINI_TELEMETRY_*`` (``docs/telemetry.md``): a
    context manager around the command's ``trio.run``. In embedded mode it
    also records the model calls (the server side runs in this process).

    Raises :class:`~gemini_split.errors.SettingsError` for a target or
    protocol gemini-cli does not know."""
    loaded = settings.loaded_settings
    section = loaded.merged.telemetry if loaded is not None else Settings().telemetry
    config = resolve_telemetry(section, env.environ, cwd=env.cwd)
    if not config.enabled:
        return activated(config, role="client", warn=env.warn)
    tools = settings.tools
    e = env.environ
    servers = sorted(tools.mcp_servers)
    extensions = [ext.name for ext in tools.extensions.active()] if tools.extensions is not None else []
    s = loaded.merged if loaded is not None else Settings()
    attributes = {
        "model": settings.session.model or e.get("GEMINI_MODEL"),  # None: the server decides
        "sandbox_enabled": tools.sandbox is not None,
        "core_tools_enabled": ",".join(tools.core_tools or ()),
        "approval_mode": "reject_dangerous" if tools.reject_dangerous else tools.approval_mode.value,
        "api_key_enabled": bool(e.get("GEMINI_API_KEY") or e.get("GOOGLE_API_KEY")),
        "vertex_ai_enabled": _truthy(e.get("GOOGLE_GENAI_USE_VERTEXAI")),
        "file_filtering_respect_git_ignore": s.context.file_filtering.respect_git_ignore,
        "debug_mode": debug,
        "mcp_servers": ",".join(servers),
        "mcp_servers_count": len(servers),
        "output_format": output_format,
        "extensions": ",".join(extensions),
        "extensions_count": len(extensions),
        "server": settings.endpoint.server or "embedded",
    }
    return activated(config, role="client" if settings.endpoint.server else "embedded",
                     warn=lambda line: env.warn(f"gemini-split: {line}"),
                     secrets=secret_values(e, is_secret_name), config_attributes=attributes,
                     common={"interactive": interactive}, state_dir=env.config_dir)


def server_telemetry(env: Environment, flags: TelemetryFlags | None = None, *, model: str,
                     role: str = "server") -> ContextManager[Recorder]:
    """The telemetry of ``serve`` (and the local daemon), as its operator
    set it: ``flags`` (``serve --telemetry*``) over ``GEMINI_TELEMETRY_*``
    over the ``telemetry`` of the settings files. Settings files that
    cannot be read are left out with a warning (they never stopped
    ``serve``). Warnings go to the log.

    Raises :class:`~gemini_split.errors.SettingsError` for a target or
    protocol gemini-cli does not know."""
    try:
        section = load_settings(env).merged.telemetry
    except SettingsError as exc:
        log.warning("settings.json left out for telemetry: %s", exc)
        section = Settings().telemetry
    config = resolve_telemetry(section, env.environ, flags, cwd=env.cwd)
    if not config.enabled:
        return activated(config, role=role, warn=log.warning)
    log.info("telemetry: exporting to %s%s", config.destination(),
             " (with prompts and answers: logPrompts)" if config.log_prompts else "")
    e = env.environ
    attributes = {
        "model": model,
        "api_key_enabled": bool(e.get("GEMINI_API_KEY") or e.get("GOOGLE_API_KEY")),
        "vertex_ai_enabled": _truthy(e.get("GOOGLE_GENAI_USE_VERTEXAI")),
        "server": role,
    }
    return activated(config, role=role, warn=log.warning, secrets=secret_values(e, is_secret_name),
                     config_attributes=attributes, state_dir=env.config_dir)
