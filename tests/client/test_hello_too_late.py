"""A hello that reaches the server too late, and a client that stays quick.

A ``--server stdio:…`` server gives up on a client whose hello has not come
within its hello timeout: it says why (an ``error``) and exits. The client
then reports that refusal — not a server that "exited before saying
anything". And the client's event loop is not held up by loading the MCP
SDK (a second of CPU, far more on a loaded machine), which once delayed the
hello past that timeout. Real processes throughout."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import trio

from gemini_split.client.failures import HandshakeFailed
from gemini_split.client.protocol_client import ProtocolClient
from gemini_split.tools.approval import ApprovalPolicy
from gemini_split.tools.executor import ToolExecutor
from gemini_split.tools.registry import default_tools
from gemini_split.tools.workspace import Workspace
from gemini_split.transport import ConnectOptions, get_transport

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[2]

#: A real ``serve --stdio`` service, with a hello timeout of 0.2 s.
IMPATIENT_SERVER = textwrap.dedent("""
    import trio
    from gemini_split.server.config import ServerConfig
    from gemini_split.server.model.scripted import ScriptedModel
    from gemini_split.server.service import AgentService
    from gemini_split.transport import ServeOptions, get_transport

    async def main():
        service = AgentService(ScriptedModel([]), ServerConfig(model="scripted", hello_timeout=0.2))
        await get_transport("stdio:").serve("stdio:-", service.handle_connection, ServeOptions())

    trio.run(main)
""")


async def test_a_server_that_gave_up_before_the_hello_came_is_reported_with_its_reason(tmp_path):
    address = "stdio:" + shlex.join([sys.executable, "-c", IMPATIENT_SERVER])
    stream = await get_transport(address).open_connection(address, ConnectOptions(extra={"cwd": str(ROOT)}))
    client = ProtocolClient(stream, ToolExecutor(default_tools(), Workspace(tmp_path), ApprovalPolicy()))
    try:
        with trio.fail_after(30):
            while stream.returncode is None:  # the hello comes after the server has given up and exited
                await trio.sleep(0.05)
            assert stream.returncode == 0
            with pytest.raises(HandshakeFailed) as failed:
                await client.handshake()
    finally:
        await stream.aclose()
    assert str(failed.value) == "the server refused the connection: no hello within 0.2 seconds"
    assert failed.value.code == "unexpected_message"


#: Starts an MCP server (the SDK not yet imported; the server refuses at
#: once) and measures, meanwhile, the longest the event loop went without
#: running a ticking task.
LOOP_WATCH = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    import trio
    from gemini_split.tools.mcp.sources import open_mcp_servers
    from gemini_split.userfiles.settings import MCPServerSettings

    async def main():
        assert "mcp" not in sys.modules
        gaps = []
        started = trio.Event()

        async def tick(task_status=trio.TASK_STATUS_IGNORED):
            last = time.monotonic()
            task_status.started()
            while not started.is_set():
                await trio.sleep(0.005)
                now = time.monotonic()
                gaps.append(now - last)
                last = now

        began = time.monotonic()
        config = {"remote": MCPServerSettings(http_url="http://127.0.0.1:9/mcp")}  # refused at once
        async with trio.open_nursery() as nursery:
            await nursery.start(tick)
            async with open_mcp_servers(config, cwd=Path.cwd(), wait=False) as servers:
                await servers.wait_started()
                took = time.monotonic() - began
                started.set()
        assert "mcp.client.streamable_http" in sys.modules
        print(json.dumps({"starting": took, "longest_gap": max(gaps)}))

    trio.run(main)
""")


async def test_loading_the_mcp_sdk_does_not_hold_up_the_event_loop(tmp_path):
    done = await trio.run_process([sys.executable, "-c", LOOP_WATCH], cwd=ROOT, capture_stdout=True,
                                  capture_stderr=True, check=False)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    seen = json.loads(done.stdout.decode().strip().splitlines()[-1])
    # The import takes most of a second of CPU; while it runs, other tasks
    # (the hello to a server) still get their turns.
    assert seen["longest_gap"] < seen["starting"] / 4, seen
