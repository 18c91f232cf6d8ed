"""Tokens stay on the client: a prompt through ``serve`` calls an OAuth MCP
server's tool, and nothing the server process keeps or prints holds the
access or refresh token (its state directory — every message it received
is in the session store — its log, its output)."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import pytest
import trio

from gemini_split.tools.mcp import oauth
from gemini_split.userfiles.settings import MCPServerSettings
from tests.mcp_oauth_servers import serve_oauth_servers

from .test_oauth import _sign_in

pytestmark = pytest.mark.timeout(90)


async def test_a_prompt_through_serve_uses_the_token_the_server_never_sees(tmp_path, monkeypatch):
    client_home, server_home, work = tmp_path / "client", tmp_path / "server", tmp_path / "work"
    for d in (client_home, server_home, work):
        d.mkdir()
    monkeypatch.setenv("GEMINI_SPLIT_HOME", str(client_home))
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"function_calls": [{"name": "mcp_secure_whoami", "args": {}}]},
                                  {"text": "done"}]))
    async with trio.open_nursery() as nursery:
        auth, url = await nursery.start(serve_oauth_servers)
        with trio.fail_after(70):
            await _sign_in("secure", MCPServerSettings(http_url=url))
            (client_home / "settings.json").write_text(json.dumps({"mcpServers": {
                "secure": {"httpUrl": url, "trust": True}}}))
            serve = shlex.join(["env", f"GEMINI_SPLIT_HOME={server_home}", sys.executable, "-m", "gemini_split",
                                "serve", "--stdio", "-m", f"scripted:{script}", "--state-dir", str(server_home / "state"),
                                "--log-file", str(server_home / "serve.log")])
            environ = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI", "GOOGLE"))}
            environ.update(HOME=str(tmp_path), GEMINI_SPLIT_HOME=str(client_home))
            done = await trio.run_process(
                [sys.executable, "-m", "gemini_split", "--server", f"stdio:{serve}", "-y", "-o", "json",
                 "-p", "who am I?"], cwd=work, env=environ, capture_stdout=True, capture_stderr=True, check=False)
        nursery.cancel_scope.cancel()
    out = done.stdout.decode() + done.stderr.decode()
    assert done.returncode == 0, out[-3000:]
    assert "done" in out
    stored = json.loads((client_home / oauth.TOKENS_FILE_NAME).read_text())[0]["token"]
    secrets = [stored["accessToken"], stored["refreshToken"]]
    assert stored["accessToken"] in auth.seen_tokens  # the MCP server got it, from the client
    assert any(tool_answer.startswith("signed in as") for tool_answer in _tool_answers(server_home))
    assert all(secret not in out for secret in secrets)
    for path in server_home.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert all(secret.encode() not in data for secret in secrets), path


def _tool_answers(server_home: Path) -> list[str]:
    """The tool results the server stored (it did receive the call's answer)."""
    found = []
    for path in server_home.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            at = data.find(b"signed in as")
            if at >= 0:
                found.append(data[at:at + 40].decode("utf-8", "replace"))
    return found
