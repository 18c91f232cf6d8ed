"""``gemini-split mcp …``: manage MCP servers and serve our tools over MCP.

``list`` / ``add`` / ``remove`` edit the ``mcpServers`` of gemini-cli's
settings files the way ``gemini mcp …`` does (project scope by default,
``-s user`` for ``~/.gemini/settings.json``): the file is edited in place
by :mod:`gemini_split.userfiles.settings_edit` (atomically, every other key and every
comment kept; ``$VAR`` references stay unexpanded).
``enable`` / ``disable`` switch a server on or off in gemini-cli's
``mcp-server-enablement.json`` (:mod:`gemini_split.userfiles.mcp_enablement`).
``serve`` exposes gemini-split's own tools as an MCP server (stdio, or
streamable HTTP with ``--http``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import trio

from gemini_split.tools.approval import ApprovalPolicy, parse_allowed_tools, parse_approval_mode
from gemini_split.tools.executor import Refusal, ToolExecutor
from gemini_split.tools.workspace import Workspace
from gemini_split.environment import Environment
from gemini_split.errors import ConfigurationError
from gemini_split.exit_status import ExitStatus
from gemini_split.server.auth import load_auth_config
from gemini_split.userfiles import mcp_enablement
from gemini_split.userfiles.settings import load_settings
from gemini_split.userfiles.settings_edit import SettingsFile
from gemini_split.transport import is_loopback_host
from gemini_split.ui.safe_text import visible


def run_mcp_command(args: argparse.Namespace, env: Environment) -> ExitStatus:
    if args.mcp_command == "serve":
        return _serve(args, env)
    if args.mcp_command == "add":
        return _add(args, env)
    if args.mcp_command == "remove":
        return _remove(args, env)
    if args.mcp_command in ("enable", "disable"):
        return _enable_disable(args, env, enable=args.mcp_command == "enable")
    return _list(args, env)


# --- list ---------------------------------------------------------------------


def _list(args: argparse.Namespace, env: Environment) -> ExitStatus:

    from gemini_split.tools.mcp.sources import open_mcp_servers

    loaded = load_settings(env)
    for line in loaded.warnings:
        env.warn(line)
    configs = loaded.merged.mcp_servers
    if not configs:
        print("No MCP servers configured.", file=env.stdout)
        return ExitStatus.SUCCESS

    disabled = mcp_enablement.disabled_states(env.config_dir)

    async def probe() -> list[Any]:
        # Live status: every server is started (and its cached tools refreshed).
        async with open_mcp_servers(configs, cwd=env.cwd, cache_dir=env.config_dir / "mcp-cache",
                                    disabled=disabled) as servers:
            await servers.start_all()
            return servers.statuses()

    statuses = trio.run(probe)

    print("Configured MCP servers:\n", file=env.stdout)
    for status in statuses:
        mark = "✓" if status.state in ("ready", "stopped") else "○" if status.state == "disabled" else "✗"
        state = f"Connected ({len(status.tools)} tools)" if status.state in ("ready", "stopped") else \
            "Disabled" if status.state == "disabled" else f"Disconnected: {status.error}"
        print(visible(f"{mark} {status.name}: {status.target} ({status.transport}) - {state}"), file=env.stdout)
        for tool in status.tools:
            print(visible(f"    {tool}"), file=env.stdout)
    return ExitStatus.SUCCESS


# --- enable / disable ----------------------------------------------------------------


def _enable_disable(args: argparse.Namespace, env: Environment, *, enable: bool) -> ExitStatus:
    """gemini-cli's ``mcp enable|disable NAME [--session]``, with its messages.
    ``--session`` concerns a running session only: from the command line it
    changes nothing on disk (as in gemini-cli, where it ends with the process);
    gemini-cli's message is printed, and a note on stderr says so."""
    loaded = load_settings(env)
    name = mcp_enablement.normalize(args.name)
    merged = loaded.merged
    if name not in {mcp_enablement.normalize(n) for n in merged.mcp_servers}:
        print(f"Error: Server '{args.name}' not found. Use 'gemini-split mcp list' to see available servers.",
              file=env.stdout)
        return ExitStatus.ERROR
    if enable:
        blocked = mcp_enablement.blocked_by_settings(args.name, merged.mcp.allowed, merged.mcp.excluded)
        if blocked is not None:
            print(f"Error: {blocked}", file=env.stdout)
            return ExitStatus.ERROR
        if args.session:
            print(f"✓ Session disable cleared for '{name}'.", file=env.stdout)
            _session_note(env, "enable", name)
        else:
            mcp_enablement.enable(env.config_dir, name)
            print(f"✓ MCP server '{name}' enabled.", file=env.stdout)
        return ExitStatus.SUCCESS
    if args.session:
        print(f"✓ MCP server '{name}' disabled for this session.", file=env.stdout)
        _session_note(env, "disable", name)
    else:
        mcp_enablement.disable(env.config_dir, name)
        print(f"✓ MCP server '{name}' disabled.", file=env.stdout)
    return ExitStatus.SUCCESS


def _session_note(env: Environment, action: str, name: str) -> None:
    print(f"note: --session lasts only as long as this command, as in gemini-cli; in a running REPL use "
          f"'/mcp {action} {name} --session'", file=env.stderr)


# --- add / remove -----------------------------------------------------------------


def _settings_path(scope: str, env: Environment) -> Path:
    if scope == "user":
        return env.config_dir / "settings.json"
    return env.cwd / ".gemini" / "settings.json"


def _read_for_edit(path: Path) -> SettingsFile:
    """The settings file to edit, refused (as written, ``$VAR`` unexpanded)
    when its ``mcpServers`` is not an object."""
    try:
        settings = SettingsFile.read(path)
    except OSError as exc:
        raise ConfigurationError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not isinstance(settings.get("mcpServers", {}), dict):
        raise ConfigurationError(f"{path}: key 'mcpServers' must be an object")
    return settings


def _split_list(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [t.strip() for t in text.split(",") if t.strip()]


def _add(args: argparse.Namespace, env: Environment) -> ExitStatus:
    if args.scope == "project" and _same(env.cwd, Path(env.environ.get("HOME") or Path.home())):
        env.warn("gemini-split: use --scope user to edit settings in the home directory")
        return ExitStatus.USAGE
    entry: dict[str, Any]
    if args.transport == "stdio":
        env_vars: dict[str, str] = {}
        for item in args.env:
            key, sep, value = item.partition("=")
            if not sep or not key:
                env.warn(f"gemini-split: -e {item!r}: expected KEY=VALUE")
                return ExitStatus.USAGE
            env_vars[key] = value
        cmd_args = list(args.args)
        if cmd_args[:1] == ["--"]:
            cmd_args = cmd_args[1:]
        entry = {"command": args.command_or_url, "args": cmd_args, "env": env_vars}
    else:
        headers: dict[str, str] = {}
        for item in args.header:
            key, sep, value = item.partition(":")
            if not sep or not key.strip() or not value.strip():
                env.warn(f"gemini-split: -H {item!r}: expected 'Name: value'")
                return ExitStatus.USAGE
            headers[key.strip()] = value.strip()
        entry = {"url": args.command_or_url, "type": args.transport, "headers": headers}
    optional = {"timeout": args.timeout, "trust": args.trust or None, "description": args.description,
                "includeTools": _split_list(args.include_tools), "excludeTools": _split_list(args.exclude_tools)}
    entry.update({k: v for k, v in optional.items() if v is not None})
    entry = {k: v for k, v in entry.items() if v not in ({}, [])}

    path = _settings_path(args.scope, env)
    settings = _read_for_edit(path)
    existed = args.name in settings.get("mcpServers", {})
    settings.set(("mcpServers", args.name), entry)
    settings.save()
    verb = "updated in" if existed else "added to"
    print(f'MCP server "{args.name}" {verb} {args.scope} settings ({path}). ({args.transport})', file=env.stdout)
    return ExitStatus.SUCCESS


def _remove(args: argparse.Namespace, env: Environment) -> ExitStatus:
    path = _settings_path(args.scope, env)
    settings = _read_for_edit(path)
    if not settings.unset(("mcpServers", args.name)):
        print(f'Server "{args.name}" not found in {args.scope} settings ({path}).', file=env.stdout)
        return ExitStatus.ERROR
    settings.save()
    print(f'Server "{args.name}" removed from {args.scope} settings ({path}).', file=env.stdout)
    return ExitStatus.SUCCESS


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


# --- serve ------------------------------------------------------------------------


def _serve(args: argparse.Namespace, env: Environment) -> ExitStatus:

    from gemini_split.tools.mcp import serve as mcp_serve

    try:
        mode = parse_approval_mode(args.approval_mode)
        allowed = [entry for text in args.allowed_tools for entry in parse_allowed_tools(text)]
        policy = ApprovalPolicy(mode, allowed)
    except ValueError as exc:
        env.warn(f"gemini-split: {exc}")
        return ExitStatus.USAGE
    workspace_dir = Path(args.workspace).expanduser() if args.workspace else env.cwd
    if not workspace_dir.is_dir():
        env.warn(f"gemini-split: --workspace {workspace_dir}: not a directory")
        return ExitStatus.USAGE
    refusal = Refusal(
        why=f"nobody can be asked in an MCP session: this server runs as 'gemini-split mcp serve "
            f"--approval-mode {mode.value}', which refuses what that mode would ask about",
        mode_refuses=f"approval mode {mode.value} refuses",
        hint="do not retry; tell the user which action you need: they can allow it by restarting this MCP server "
             "with --approval-mode auto_edit (file edits) or yolo (everything), or with --allowed-tools "
             "(e.g. 'run_shell_command(git status)')",
    )
    executor = ToolExecutor(mcp_serve.exposed_tools(), Workspace(workspace_dir), policy, asker=None, refusal=refusal)

    if not args.http:
        trio.run(mcp_serve.serve_stdio, executor)
        return ExitStatus.SUCCESS

    host, port = _parse_host_port(args.http)
    auth_path = args.auth_config or env.environ.get("GEMINI_AUTH_CONFIG")
    authenticate = load_auth_config(auth_path) if auth_path else None
    if authenticate is None and not is_loopback_host(host) and not args.insecure_no_auth:
        env.warn(f"gemini-split: refusing to serve MCP on {host} without --auth-config "
                 "(only loopback addresses may go without tokens; --insecure-no-auth overrides)")
        return ExitStatus.USAGE

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            binds = await nursery.start(lambda task_status: mcp_serve.serve_http(
                executor, host, port, authenticate=authenticate, task_status=task_status))
            for bind in binds:
                env.warn(f"gemini-split: MCP on {bind}/mcp" + (" (bearer tokens required)" if authenticate else ""))

    try:
        trio.run(main)
    except KeyboardInterrupt:
        return ExitStatus.INTERRUPTED
    return ExitStatus.SUCCESS


def _parse_host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ConfigurationError(f"--http {text!r}: expected HOST:PORT, e.g. 127.0.0.1:8765")
    return host, int(port)

