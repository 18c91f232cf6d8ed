"""The REPL's ``/mcp`` (gemini-cli's sub-commands) and MCP prompts as slash commands.

``/mcp [list|ls]``, ``desc`` and ``schema`` show every configured server
as gemini-cli's status view does ("Configured MCP servers:", then
``🟢 NAME - Ready (N tools, N prompts, N resources)`` and its Tools,
Prompts and Resources; ``desc`` adds descriptions, ``schema`` the tools'
parameters). Servers declared from the cache are started for it (live
status). ``reload`` restarts the servers and lists them again;
``enable NAME`` / ``disable NAME`` (``--session``: this session only)
record the choice in ``mcp-server-enablement.json``
(:mod:`gemini_split.userfiles.mcp_enablement`) and start or stop the server
at once; the model's tools follow (announced again).

A server's prompts become commands: ``/NAME args`` calls ``prompts/get``
with the arguments parsed as gemini-cli parses them (``--arg="value"``
named, the rest positional; a single missing required argument takes all
the positional words) and sends the prompt's text as the user's turn,
shown first. ``/NAME help`` (or ``--help``) and a call missing an argument
print the prompt's usage.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import trio
from rich.text import Text

from gemini_split.tools.base import ToolFailed
from gemini_split.tools.mcp.prompts import NAMED, command_name, parse_prompt_args, prompt_help, prompt_text
from gemini_split.ui.safe_text import visible
from gemini_split.userfiles import mcp_enablement

from ..command_context import CommandContext, CommandUsage

if TYPE_CHECKING:
    from gemini_split.tools.mcp.cache import CachedPrompt
    from gemini_split.tools.mcp.sources import McpServer, McpServers

USAGE = "/mcp [list|desc|schema|reload] | enable NAME [--session] | disable NAME [--session] | auth [NAME]"
#: gemini-cli's sub-commands and their other names ("tools": gemini-split's earlier name for list).
ACTIONS = {"list": "list", "ls": "list", "nodesc": "list", "nodescription": "list", "tools": "list",
           "desc": "desc", "description": "desc", "schema": "schema", "reload": "reload", "refresh": "reload",
           "enable": "enable", "disable": "disable"}
#: gemini-cli shows this many resources of a server, then "… N resources hidden".
MAX_RESOURCES_SHOWN = 10


async def mcp_command(repl: CommandContext, args: list[str]) -> None:
    """Run ``/mcp ARGS``; raises :class:`CommandUsage` for bad arguments."""
    action = ACTIONS.get(args[0]) if args else "list"
    rest = args[1:]
    if action in ("enable", "disable"):
        await _enable_disable(repl, rest, enable=action == "enable")
        return
    if action is None or rest:
        raise CommandUsage(USAGE)
    client = repl.require_client()
    if action == "reload":
        servers = client.mcp_servers
        if servers is None or not servers.servers:
            raise CommandUsage("No MCP servers configured.")
        repl.console.print(Text("Reloading MCP servers..."))
        async with trio.open_nursery() as nursery:
            for server in servers.servers:
                nursery.start_soon(server.restart)
        await _tools_changed(repl, servers)
        action = "list"
    groups = _groups(client)
    if not groups:
        repl.console.print(Text("No MCP servers configured."))
        repl.console.print(Text("Please view MCP documentation in your browser: https://goo.gle/gemini-cli-docs-mcp "
                                "or use the cli /docs command"))
        return
    async with trio.open_nursery() as nursery:
        for _, group in groups:
            nursery.start_soon(group.start_all)
    repl.console.print(Text("Configured MCP servers:", style="bold"))
    repl.console.print()
    for owner, group in groups:
        for server in group.servers:
            _show(repl, server, owner, descriptions=action in ("desc", "schema"), schema=action == "schema")


def mcp_actions(repl: CommandContext) -> Iterable[str]:
    return ["list", "desc", "schema", "reload", "enable", "disable", "auth"]


def mcp_server_names(repl: CommandContext, action: str) -> Iterable[str]:
    """Tab's names after ``enable`` (the disabled servers) and ``disable`` (the others)."""
    servers = getattr(repl.client, "mcp_servers", None) if repl.client is not None else None
    if servers is None or action not in ("enable", "disable"):
        return []
    return [s.name for s in servers.servers if (s.disabled is None) == (action == "disable")]


def _groups(client: Any) -> list[tuple[str, McpServers]]:
    """(owner label, servers): the session's, then each sub-agent's own."""
    groups: list[tuple[str, Any]] = []
    servers = client.mcp_servers
    if servers is not None and servers.servers:
        groups.append(("", servers))
    agent_mcp = getattr(client, "agent_mcp", None)
    for entry in (agent_mcp.agents if agent_mcp is not None else ()):
        if entry.servers.servers:
            groups.append((f" (sub-agent {entry.agent})", entry.servers))
    return groups


def _show(repl: CommandContext, server: McpServer, owner: str, *, descriptions: bool, schema: bool) -> None:
    status = server.status
    counts = [f"{n} {word}{'s' * (n != 1)}" for n, word in
              ((len(server.tools), "tool"), (len(server.prompts), "prompt"), (len(server.resources), "resource"))
              if n]
    if server.disabled is not None:
        mark, text, style = "⏸️", "Disabled (session)" if server.disabled == "session" else "Disabled", "dim"
    elif status.state in ("ready", "cached"):
        mark, text, style = "🟢", "Ready" + (f" ({', '.join(counts)})" if counts else ""), "green"
    elif status.state == "connecting":
        mark, text, style = "🔄", "Starting... (first startup may take longer)", "yellow"
    else:
        mark, text, style = "🔴", "Disconnected", "red"
    line = Text(f"{mark} ", style=style)
    line.append(visible(server.name) + visible(owner), style="bold")
    line.append(f" - {text}")
    repl.console.print(line)
    if status.state == "failed" and status.error:
        repl.console.print(Text("  Error: " + visible(status.error), style="red"))
    if descriptions and server.config.description:
        repl.console.print(Text(visible(server.config.description.strip()), style="dim"))
    for note in status.skipped:
        repl.console.print(Text("  skipped " + visible(note), style="dim"))
    if server.tools:
        repl.console.print(Text("  Tools:"))
        for tool in server.tools:
            repl.console.print(Text("  - " + visible(tool.name)))
            if descriptions and tool.description.strip():
                repl.console.print(Text("    " + visible(tool.description.strip()), style="dim"))
            if schema:
                repl.console.print(Text("      Parameters:", style="dim"))
                shown = json.dumps(tool.input_schema, indent=2, ensure_ascii=False)
                repl.console.print(Text("\n".join("      " + row for row in visible(shown).splitlines()), style="dim"))
    if server.prompts:
        repl.console.print(Text("  Prompts:"))
        for prompt in server.prompts:
            repl.console.print(Text("  - " + visible(prompt.name)))
            if descriptions and prompt.description.strip():
                repl.console.print(Text("    " + visible(prompt.description.strip())))
    if server.resources:
        repl.console.print(Text("  Resources:"))
        for resource in server.resources[:MAX_RESOURCES_SHOWN]:
            row = "  - " + visible(resource.name or resource.uri or "resource")
            row += f" ({visible(resource.uri)})" if resource.uri else ""
            row += f" [{visible(resource.mime_type)}]" if resource.mime_type else ""
            repl.console.print(Text(row))
            if descriptions and resource.description.strip():
                repl.console.print(Text("    " + visible(resource.description.strip()), style="dim"))
        hidden = len(server.resources) - MAX_RESOURCES_SHOWN
        if hidden > 0:
            repl.console.print(Text(f"  ... {hidden} {'resource' if hidden == 1 else 'resources'} hidden",
                                    style="dim"))
    repl.console.print()


async def _enable_disable(repl: CommandContext, rest: list[str], *, enable: bool) -> None:
    """gemini-cli's ``/mcp enable|disable NAME [--session]``, its messages."""
    action = "enable" if enable else "disable"
    session = "--session" in rest
    names = [word for word in rest if word != "--session"]
    if len(names) != 1:
        raise CommandUsage(f"Server name required. Usage: /mcp {action} <server-name> [--session]")
    client = repl.require_client()
    servers = client.mcp_servers
    server = servers.get(names[0]) if servers is not None else None
    if servers is None or server is None:
        raise CommandUsage(f"Server '{names[0]}' not found. Use /mcp list to see available servers.")
    name = mcp_enablement.normalize(server.name)
    config_dir = servers.enablement_dir
    if enable:
        loaded = repl.settings.loaded_settings
        if loaded is not None:
            blocked = mcp_enablement.blocked_by_settings(server.name, loaded.merged.mcp.allowed, loaded.merged.mcp.excluded)
            if blocked is not None:
                raise CommandUsage(blocked)
        if session:
            servers.session_disabled.discard(name)
        elif config_dir is not None:
            mcp_enablement.enable(config_dir, name)
    elif session:
        servers.session_disabled.add(name)
    elif config_dir is not None:
        mcp_enablement.disable(config_dir, name)
    states = mcp_enablement.disabled_states(config_dir, servers.session_disabled) if config_dir is not None else \
        {n: "session" for n in servers.session_disabled}
    repl.console.print(Text("Reloading MCP servers..."))
    await server.set_disabled(states.get(name))
    await _tools_changed(repl, servers)
    repl.console.print(Text(f"MCP server '{name}' {'enabled' if enable else 'disabled'}"
                            f"{' for this session' if session else ''}.", style="green"))
    if enable and server.status.state == "failed":
        repl.print_usage(f"MCP server '{server.name}' failed: {server.status.error}")


async def _tools_changed(repl: CommandContext, servers: McpServers) -> None:
    """The client's registry made to match the servers, and announced."""
    client = repl.require_client()
    servers.sync_registry(client.executor.registry, client.mcp_exclude)
    await client.announce_tools()


# --- prompts as slash commands ---------------------------------------------------------


def prompt_commands(repl: CommandContext) -> dict[str, tuple[McpServer, CachedPrompt]]:
    """``/name`` → (server, prompt) for every enabled server's prompts (a
    later server's prompt of the same name wins)."""
    client = repl.client
    servers = getattr(client, "mcp_servers", None) if client is not None else None
    found: dict[str, tuple[McpServer, CachedPrompt]] = {}
    for server in (servers.servers if servers is not None else ()):
        if server.disabled is None:
            for prompt in server.prompts:
                found[command_name(prompt)] = (server, prompt)
    return found


async def find_prompt(repl: CommandContext, name: str) -> tuple[McpServer, CachedPrompt] | None:
    """The MCP prompt ``/name`` calls, waiting for servers still starting."""
    client = repl.client
    servers = getattr(client, "mcp_servers", None) if client is not None else None
    if servers is None or not servers.servers:
        return None
    if name not in prompt_commands(repl) and not servers.started:
        await servers.wait_started()
    return prompt_commands(repl).get(name)


async def run_prompt(repl: CommandContext, server: McpServer, prompt: CachedPrompt, line: str) -> None:
    """``/name ARGS``: the prompt got from its server and sent as a turn."""
    rest = line.split(None, 1)[1].strip() if len(line.split(None, 1)) > 1 else ""
    if rest in ("help", "--help"):
        repl.console.print(Text(visible(prompt_help(prompt))))
        return
    inputs = parse_prompt_args(rest, prompt.arguments)
    if isinstance(inputs, str):
        repl.print_usage(inputs)
        repl.console.print(Text(visible(prompt_help(prompt)), style="dim"))
        return
    try:
        result = await server.get_prompt(prompt.name, inputs)
    except ToolFailed as exc:
        repl.print_usage(f"Error invoking prompt: {exc}")
        return
    text = prompt_text(result)
    if text is None:
        repl.print_usage("Received an empty or invalid prompt response from the server.")
        return
    repl.console.print(Text(visible(text), style="dim"))
    await repl.run_turn(text, references=False, typed=line)


def prompt_completions(repl: CommandContext, name: str, typed_args: str, current: str) -> list[str]:
    """Tab after ``/name``: the ``--arg="`` of the prompt's arguments not given yet."""
    found = prompt_commands(repl).get(name)
    if found is None:
        return []
    given = {m.group(1) for m in NAMED.finditer(typed_args)}
    return [f'--{a["name"]}="' for a in found[1].arguments
            if a["name"] not in given and f'--{a["name"]}="'.startswith(current)]


def described(repl: CommandContext) -> Callable[[], Iterable[tuple[str, str]]]:
    """(command, description) of each prompt command, for Tab and /help."""
    def rows() -> Iterable[tuple[str, str]]:
        for name, (server, prompt) in prompt_commands(repl).items():
            yield name, visible(prompt.description or f"Invoke prompt {prompt.name}", newlines=False) + \
                f" (MCP server {visible(server.name, newlines=False)})"
    return rows
