"""gemini-split's own tools served over MCP (``gemini-split mcp serve``).

Seed 002's tool server: an MCP host (gemini-cli, Claude Code, …) lists and
calls the same tools the agent uses, through the same
:class:`~gemini_split.tools.executor.ToolExecutor` — the same workspace
confinement, shell command analysis, output caps and structured errors.
Nobody can be asked in an MCP session, so a call that would need approval is
refused (the result says why, naming ``mcp serve``'s approval mode, and how
to allow it) unless the approval mode or ``--allowed-tools`` allows it.
:func:`exposed_tools` is the list: the built-in tools but those that only
make sense to gemini-split's own model loop (docs/mcp.md names them).

Two transports: stdio (:func:`serve_stdio`, the host spawns us) and
streamable HTTP (:func:`serve_http`), which requires a bearer token on every
request unless it listens on loopback without an authenticator.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Callable
from typing import Any

import trio

from gemini_split import __version__
from gemini_split.tools.executor import ToolExecutor
from gemini_split.tools.registry import ToolRegistry, default_tools

log = logging.getLogger(__name__)

Authenticate = Callable[[str | None], Any]
_call_ids = itertools.count(1)

#: Built-in tools an MCP host is not offered: plan mode's switch its own
#: approval mode for its model, which an MCP session has not.
NOT_EXPOSED = frozenset({"enter_plan_mode", "exit_plan_mode"})


def exposed_tools() -> Any:
    """The tool registry ``mcp serve`` exposes (see :data:`NOT_EXPOSED`)."""
    tools = default_tools()
    exposed = ToolRegistry(tool for tool in tools if tool.name not in NOT_EXPOSED)
    exposed.closers = tools.closers
    return exposed


def build_server(executor: ToolExecutor) -> Any:
    """An MCP lowlevel ``Server`` exposing ``executor``'s registry."""
    import mcp_types as types
    from mcp.server.lowlevel import Server

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=[
            types.Tool(name=tool.name, description=tool.description, input_schema=tool.parameters)
            for tool in executor.registry
        ])

    async def call_tool(ctx: Any, params: Any) -> Any:
        call_id = f"mcp-{next(_call_ids)}"
        result, failure = await executor.execute(call_id, params.name, params.arguments or {}, _discard)
        if failure is not None:
            text = failure.message + (f"\nHint: {failure.hint}" if failure.hint else "")
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=text)],
                structured_content={"error": {"code": failure.code, "message": failure.message,
                                              **({"hint": failure.hint} if failure.hint else {})}},
                is_error=True,
            )
        text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    return Server(
        "gemini-split", version=__version__,
        instructions="gemini-split's coding tools, confined to one workspace directory.",
        on_list_tools=list_tools, on_call_tool=call_tool,
    )


async def _discard(event: Any) -> None:
    return None


async def serve_stdio(executor: ToolExecutor) -> None:
    """Serve MCP on this process's stdin/stdout until stdin closes. While it
    runs, fd 1 points at stderr, so nothing stray can corrupt the stream."""
    from mcp.server.stdio import stdio_server

    server = build_server(executor)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


async def serve_http(
    executor: ToolExecutor,
    host: str,
    port: int,
    *,
    authenticate: Authenticate | None,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve MCP over streamable HTTP at ``http://host:port/mcp`` until
    cancelled. With ``authenticate``, every request needs
    ``Authorization: Bearer TOKEN`` that it accepts (else 401)."""
    import hypercorn.config
    import hypercorn.trio

    server = build_server(executor)
    app = server.streamable_http_app(host=host)
    if authenticate is not None:
        app = _require_bearer(app, authenticate)
    config = hypercorn.config.Config()
    config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    config.accesslog = None
    config.errorlog = logging.getLogger("gemini_split.mcp.http")
    shutdown = trio.Event()
    try:
        await hypercorn.trio.serve(app, config, shutdown_trigger=shutdown.wait, task_status=task_status)
    finally:
        shutdown.set()


def _require_bearer(app: Any, authenticate: Authenticate) -> Any:
    """ASGI middleware: 401 unless the bearer token is accepted. The token
    is never logged; the authenticator compares in constant time."""

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await app(scope, receive, send)
            return
        token = None
        for name, value in scope.get("headers", ()):
            if name.lower() == b"authorization":
                scheme, _, rest = value.decode("latin-1").partition(" ")
                if scheme.lower() == "bearer":
                    token = rest.strip()
        if authenticate(token) is None:
            body = json.dumps({"error": "unauthorized", "message": "a valid bearer token is required"}).encode()
            await send({"type": "http.response.start", "status": 401, "headers": [
                (b"content-type", b"application/json"), (b"www-authenticate", b"Bearer"),
                (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        await app(scope, receive, send)

    return guarded
