"""A real server with server-side tools for tests: the AgentService over
the real WebSocket transport (or loopback), a scripted model, the real tool
registry through ``gemini_split.tools.tool_host``, and raw clients that say
exactly what they want in ``hello`` and in their decisions."""

from __future__ import annotations

import shutil
import tempfile
from contextlib import asynccontextmanager, contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from gemini_split.tools.tool_host import open_tool_host
from gemini_split.protocol import Finished, Hello, ServerEvent
from gemini_split.server.session.features.server_tools import ServerTools
from gemini_split.testing.service import open_test_service
from gemini_split.transport import ConnectOptions, get_transport

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


#: The service these tests run: ``open_test_service`` over a real WebSocket
#: (``serving(model, server_tools)``; ``address=`` picks another transport).
serving = partial(open_test_service, address="ws://127.0.0.1:0")


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
