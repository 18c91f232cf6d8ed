"""MCP prompts, resources and enablement outside the REPL: ``gemini-split
mcp enable|disable`` (gemini-cli's file and messages), ``-p`` through the
local daemon, and ``-p`` against ``serve`` with the MCP server on the
client over streamable HTTP. A real MCP server built on the SDK's
``MCPServer`` (prompt_server.py), a fake Gemini server speaking the real
wire format."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from tests.cli.daemon.conftest import environ, fake, home, run  # noqa: F401 (fixtures)
from tests.e2e.test_serve_e2e import API_KEY, client, daemon

PROMPT_SERVER = str(Path(__file__).with_name("prompt_server.py"))
pytestmark = pytest.mark.timeout(150)


def _declared(request: dict) -> set[str]:
    return {d["name"] for tool in request["body"].get("tools", []) for d in tool.get("functionDeclarations", [])}


def _user_text(request: dict) -> str:
    return "".join(p.get("text", "") for p in request["body"]["contents"][-1].get("parts", []))


def _responses(fake) -> list[dict]:
    return [p["functionResponse"] for r in fake.requests
            for p in r["body"]["contents"][-1].get("parts", []) if "functionResponse" in p]


def test_a_disabled_server_is_not_started_nor_offered_and_enable_brings_it_back(environ, home, fake, tmp_path):  # noqa: F811
    work = tmp_path / "work"
    work.mkdir()
    starts = tmp_path / "starts.txt"
    Path(home, "settings.json").write_text(json.dumps({"mcpServers": {"Notes": {
        "command": sys.executable, "args": [PROMPT_SERVER], "env": {"PROMPT_SERVER_STARTS": str(starts)}}}}))

    off = run(["mcp", "disable", "Notes"], environ, work)
    assert off.returncode == 0 and off.stdout.strip() == "✓ MCP server 'notes' disabled.", off.stdout + off.stderr
    assert json.loads(Path(home, "mcp-server-enablement.json").read_text()) == {"notes": {"enabled": False}}
    listed = run(["mcp", "list"], environ, work)
    assert f"○ Notes: {sys.executable} {PROMPT_SERVER} (stdio) - Disabled" in listed.stdout
    assert run(["-p", "hi"], environ, work).returncode == 0  # through the local daemon
    assert not starts.exists()
    assert not {"mcp_Notes_echo", "list_mcp_resources"} & _declared(fake.requests[-1])

    on = run(["mcp", "enable", "notes"], environ, work)
    assert on.returncode == 0 and on.stdout.strip() == "✓ MCP server 'notes' enabled."
    assert json.loads(Path(home, "mcp-server-enablement.json").read_text()) == {}
    done = run(["-p", "hi"], environ, work)
    assert done.returncode == 0, done.stderr
    assert len(starts.read_text().splitlines()) == 1
    assert {"mcp_Notes_echo", "list_mcp_resources", "read_mcp_resource"} <= _declared(fake.requests[-1])

    session_only = run(["mcp", "disable", "Notes", "--session"], environ, work)
    assert session_only.stdout.strip() == "✓ MCP server 'notes' disabled for this session."
    assert "--session lasts only as long as this command" in session_only.stderr
    assert "'/mcp disable notes --session'" in session_only.stderr
    assert json.loads(Path(home, "mcp-server-enablement.json").read_text()) == {}  # nothing on disk

    unknown = run(["mcp", "disable", "nobody"], environ, work)
    assert unknown.returncode == 1
    assert unknown.stdout.strip() == "Error: Server 'nobody' not found. Use 'gemini-split mcp list' to see available servers."
    Path(home, "settings.json").write_text(json.dumps({"mcp": {"excluded": ["Notes"]}, "mcpServers": {"Notes": {
        "command": sys.executable, "args": [PROMPT_SERVER]}}}))
    blocked = run(["mcp", "enable", "Notes"], environ, work)
    assert blocked.returncode == 1 and "Error: Server 'Notes' is blocked by mcp.excluded." in blocked.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def http_server():
    """prompt_server.py over streamable HTTP; yields its URL."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, PROMPT_SERVER, "--http", f"127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_against_serve_prompts_and_resources_come_from_the_clients_http_server(tmp_path, http_server):
    home = tmp_path / "home"
    home.mkdir()
    (home / "settings.json").write_text(json.dumps({"mcpServers": {"notes": {"httpUrl": http_server}}}))
    work = tmp_path / "work"
    work.mkdir()
    env = {"GEMINI_SPLIT_HOME": str(home)}
    script = [{"text": "read it"}, {"text": "a haiku"},
              {"function_calls": [{"name": "read_mcp_resource", "args": {"uri": "notes:notes://today"}}]},
              {"text": "done"}]
    with FakeGemini(script=script, api_key=API_KEY) as fake, daemon(tmp_path, fake) as (_, address):
        read = client(["--server", address, "-p", "summarise @notes:notes://today"], cwd=work, env_extra=env)
        assert read.returncode == 0, read.stderr
        sent = _user_text(fake.requests[-1])
        assert "Content from @notes://today:\nNOTES-OF-TODAY: buy milk, fix the build" in sent

        poem = client(["--server", address, "-p", '/poem-writer --title="Over the wire"'], cwd=work, env_extra=env)
        assert poem.returncode == 0, poem.stderr
        assert _user_text(fake.requests[-1]).endswith(">Write a haiku called Over the wire. Note that a haiku is "
                                                      "5 syllables followed by 7 syllables followed by 5 syllables")

        bad = client(["--server", address, "-p", "/review only-one"], cwd=work, env_extra=env)
        assert bad.returncode != 0 and "Missing required argument(s): --second" in bad.stderr
        assert len(fake.requests) == 2  # nothing was sent

        tool = client(["--server", address, "-p", "what is in my notes?"], cwd=work, env_extra=env)
        assert tool.returncode == 0, tool.stderr
        (response,) = _responses(fake)  # read-only: it ran without asking, even in -p
        assert response["name"] == "read_mcp_resource"
        assert "NOTES-OF-TODAY" in json.dumps(response["response"])
