"""An IDE companion built from gemini-cli's companion spec, for the tests:
an MCP server (the SDK's own) over streamable HTTP on a port of its own,
a port file in ``<tmpdir>/gemini/ide``, the bearer token required on every
request, ``ide/contextUpdate`` sent to each client that connects, and
``openDiff``/``closeDiff`` whose outcome the test decides
(:attr:`Companion.answer`): accept (with ``content``, the editor's
version), or reject.

Run it in the test's nursery: ``companion = await nursery.start(serve_companion, ...)``.
Also runnable as a process (``python -m tests.ide_companion WORKSPACE CONTEXT_JSON``)
for a REPL run as a subprocess: it prints its port once listening and
accepts every diff with the content it was given plus ``# edited in the IDE\\n``.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio
from mcp.server.mcpserver import Context, MCPServer

EDITED_MARK = "# edited in the IDE\n"


@dataclass
class Companion:
    port: int = 0
    token: str = ""
    port_file: Path | None = None
    context: dict[str, Any] | None = None
    #: ("accept", content or None for newContent as is), ("reject", None), or
    #: ("hold", None): the diff stays open until closed (closeDiff).
    answer: tuple[str, str | None] = ("accept", None)
    #: openDiff requests: (filePath, newContent).
    diffs: list[tuple[str, str]] = field(default_factory=list)
    closed: list[str] = field(default_factory=list)
    refused: int = 0
    #: Accept every diff with the proposal plus :data:`EDITED_MARK` (as a user editing it).
    mark_edits: bool = False
    #: The connected clients' outbound channels.
    clients: list[Any] = field(default_factory=list)

    async def update_context(self, context: dict[str, Any]) -> None:
        """The user moved in the editor: every client is told."""
        self.context = context
        for outbound in self.clients:
            await _notify_later(outbound, "ide/contextUpdate", context)


def _app(companion: Companion, nursery: trio.Nursery) -> Any:
    class CompanionServer(MCPServer):
        async def _handle_list_tools(self, ctx: Any, params: Any) -> Any:
            # A client has connected: the editor tells it what is open.
            outbound = ctx.session._connection.outbound
            companion.clients.append(outbound)
            if companion.context is not None:
                nursery.start_soon(_notify_later, outbound, "ide/contextUpdate", companion.context)
            return await super()._handle_list_tools(ctx, params)

    server = CompanionServer("gemini-cli-companion-test")

    @server.tool(name="openDiff")
    async def open_diff(filePath: str, newContent: str, ctx: Context) -> list:  # noqa: N803 (the spec's names)
        companion.diffs.append((filePath, newContent))
        verdict, content = companion.answer
        if companion.mark_edits:
            content = newContent + EDITED_MARK
        if verdict == "accept":
            params = {"filePath": filePath, "content": newContent if content is None else content}
            nursery.start_soon(_notify_later, ctx.session._connection.outbound, "ide/diffAccepted", params)
        elif verdict == "reject":
            nursery.start_soon(_notify_later, ctx.session._connection.outbound, "ide/diffRejected",
                               {"filePath": filePath})
        return []

    @server.tool(name="closeDiff")
    async def close_diff(filePath: str, suppressNotification: bool = False) -> str:  # noqa: N803
        companion.closed.append(filePath)
        return json.dumps({"content": None})

    inner = server.streamable_http_app()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization", b"").decode() != f"Bearer {companion.token}":
                companion.refused += 1
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"text/plain")]})
                await send({"type": "http.response.body", "body": b"Unauthorized"})
                return
        await inner(scope, receive, send)

    return app


async def _notify_later(outbound: Any, method: str, params: dict[str, Any]) -> None:
    await trio.sleep(0.1)  # as an editor does: after the client's stream is open
    try:
        await outbound.notify(method, params)
    except Exception:  # noqa: BLE001 — a client that went
        pass


async def serve_companion(workspace: Path, *, context: dict[str, Any] | None = None, token: str | None = None,
                          ide_pid: int | None = None, display_name: str = "VS Code",
                          task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    """Serve until cancelled; the port file is removed on the way out."""
    from hypercorn.config import Config
    from hypercorn.trio import serve

    companion = Companion(token=token or secrets.token_hex(16), context=context)
    async with trio.open_nursery() as nursery:
        config = Config()
        config.bind = ["127.0.0.1:0"]
        config.loglevel = "WARNING"
        config.accesslog = None
        binds = await nursery.start(serve, _app(companion, nursery), config)
        companion.port = int(binds[0].rsplit(":", 1)[1])
        directory = Path(tempfile.gettempdir()) / "gemini" / "ide"
        directory.mkdir(parents=True, exist_ok=True)
        pid = ide_pid or os.getpid()
        companion.port_file = directory / f"gemini-ide-server-{pid}-{companion.port}.json"
        companion.port_file.write_text(json.dumps({
            "port": companion.port, "workspacePath": str(workspace), "authToken": companion.token,
            "ideInfo": {"name": "vscode", "displayName": display_name}}))
        try:
            task_status.started(companion)
            await trio.sleep_forever()
        finally:
            companion.port_file.unlink(missing_ok=True)


async def _main(workspace: str, context: str) -> None:
    async with trio.open_nursery() as nursery:
        companion = await nursery.start(lambda task_status: serve_companion(
            Path(workspace), context=json.loads(context), task_status=task_status))
        companion.mark_edits = True
        print(companion.port, flush=True)


if __name__ == "__main__":
    trio.run(_main, sys.argv[1], sys.argv[2])
