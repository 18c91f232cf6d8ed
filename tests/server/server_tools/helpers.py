"""A real server with server-side tools for tests: the AgentService over
the real WebSocket transport (or loopback), a scripted model, the real tool
registry through ``gemini_split.tools.tool_host``, and raw clients that say
exactly what they want in ``hello`` and in their decisions."""

from __future__ import annotations

import shutil
import tempfile
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import trio

from gemini_split.tools.tool_host import open_tool_host
from gemini_split.protocol import Finished, Hello, ServerEvent
from gemini_split.server.config import ServerConfig
from gemini_split.server.model.scripted import ScriptedModel
from gemini_split.server.service import AgentService
from gemini_split.server.session.features.server_tools import ServerTools
from gemini_split.transport import ConnectOptions, ServeOptions, get_transport

from tests.server.helpers import RawClient

CANARY = "CANARY-SECRET-7d3f"
APPROVER = ("tool_deltas", "tool_approvals")


@contextmanager
def unix_listener():
    """``("--listen", "unix:PATH")`` for a ``serve --server-tools`` without
    tokens (refused on TCP): a socket in a fresh 0700 directory, short
    enough for ``sun_path``."""
    directory = tempfile.mkdtemp(prefix="gs-sock-")
    try:
        yield ("--listen", f"unix:{directory}/serve.sock")
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def make_server_tools(root: Path, **options: Any) -> ServerTools:
    tools = ServerTools(factory=open_tool_host, workspace_root=root, **options)
    tools.prepare()
    return tools


@asynccontextmanager
async def serving(model: ScriptedModel, tools: ServerTools | None, *, address: str = "ws://127.0.0.1:0",
                  **config: Any):
    """An AgentService with ``tools``, listening; yields ``(service, address)``."""
    service = AgentService(model, ServerConfig(model="scripted", **config), server_tools=tools)
    transport = get_transport(address)
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        bound = await nursery.start(transport.serve, address, service.handle_connection, ServeOptions())
        yield service, bound
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def hello(address: str, **fields: Any):
    """A raw connection after ``hello(**fields)``; yields (raw, first reply)."""
    stream = await get_transport(address).open_connection(address, ConnectOptions())
    raw = RawClient(stream)
    fields.setdefault("client", "raw-test")
    try:
        await raw.send(Hello(**fields))
        yield raw, await raw.receive()
    finally:
        await stream.aclose()


async def until(raw: RawClient, kind: type, **match: Any) -> tuple[list[ServerEvent], ServerEvent]:
    """Events up to and including the first ``kind`` whose fields equal ``match``."""
    seen = await raw.receive_until(
        lambda m: isinstance(m, kind) and all(getattr(m, k) == v for k, v in match.items()))
    return seen[:-1], seen[-1]


async def finish(raw: RawClient) -> list[ServerEvent]:
    return await raw.receive_until(lambda m: isinstance(m, Finished))


def workspaces_in(root: Path) -> list[Path]:
    """The sessions' workspaces in a workspace root: not its dot areas
    (``.rewind``: the edit journals ``/rewind`` puts files back from)."""
    return [p for p in root.iterdir() if not p.name.startswith(".")]


def outside_canary(tmp_path: Path) -> Path:
    """A directory beside the workspace root holding a canary file."""
    outside = tmp_path / "outside"
    outside.mkdir(exist_ok=True)
    canary = outside / "canary.txt"
    canary.write_text(CANARY + "\n")
    return canary
