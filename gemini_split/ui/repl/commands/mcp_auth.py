"""``/mcp auth [NAME]``: gemini-cli's OAuth sign-in for a remote MCP server.

Without a name it lists the servers that use OAuth: those configured with
``oauth.enabled`` and those that answered this session with a demand for it
(gemini-cli's two sources). With a name it runs the sign-in of
:func:`gemini_split.tools.mcp.oauth.authenticate` (the authorization URL
printed, the browser opened where there is one), then restarts that server
and announces its tools to the session — with gemini-cli's messages at each
step. The sign-in happens here, on the client: the tokens never travel to
the server the session runs on.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text

from gemini_split.ui.safe_text import visible

from ..command_context import CommandContext


def _says_auth(status: Any) -> bool:
    error = status.error or ""
    return "/mcp auth " in error


async def mcp_auth(repl: CommandContext, args: list[str]) -> None:
    """Run ``/mcp auth`` with ``args`` (``[]`` or ``[NAME]``)."""
    configs = repl.settings.tools.mcp_servers
    client = repl.client
    running = getattr(client, "mcp_servers", None) if client is not None else None
    servers = {s.name: s for s in running.servers} if running is not None else {}
    if len(args) > 1:
        repl.print_usage("/mcp auth [NAME]")
        return
    if not args:
        names = [n for n, c in configs.items() if c.oauth is not None and c.oauth.enabled]
        names += [n for n, s in servers.items() if _says_auth(s.status) and n not in names]
        if not names:
            repl.console.print(Text("No MCP servers configured with OAuth authentication."))
            return
        repl.console.print(Text("MCP servers with OAuth authentication:\n"
                                + "\n".join(f"  - {visible(n)}" for n in names)
                                + "\n\nUse /mcp auth <server-name> to authenticate."))
        return
    from gemini_split.tools.mcp import oauth  # the MCP SDK's edge

    name = args[0]
    config = configs.get(name)
    if config is None:
        repl.console.print(Text(f"MCP server '{visible(name)}' not found.", style="red"))
        return
    repl.console.print(Text(f"Starting OAuth authentication for MCP server '{visible(name)}'..."))

    def say(text: str) -> None:
        # soft_wrap: the URL stays one line a terminal can select whole.
        repl.console.print(Text(visible(text)), soft_wrap=True)

    try:
        await oauth.authenticate(name, config, say=say)
    except oauth.SignInFailed as exc:
        repl.console.print(Text(f"Failed to authenticate with MCP server '{visible(name)}': {visible(str(exc))}",
                                style="red"))
        return
    repl.console.print(Text(f"✅ Successfully authenticated with MCP server '{visible(name)}'!", style="green"))
    server = servers.get(name)
    if server is None:
        return
    repl.console.print(Text(f"Restarting MCP server '{visible(name)}'..."))
    await server.restart()
    if server.status.state != "ready":
        repl.console.print(Text(f"MCP server '{visible(name)}': {visible(server.status.summary())}", style="red"))
        return
    registry = client.executor.registry
    for tool in server.tools:
        if registry.get(tool.name) is None:
            registry.register(tool)
    await client.announce_tools()
    repl.console.print(Text(f"Successfully authenticated and reloaded tools for '{visible(name)}'"))
