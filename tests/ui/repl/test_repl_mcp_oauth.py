"""``/mcp auth`` in the REPL, through a pseudo-terminal, against the MCP SDK's
server protected by a real authorization server (tests/mcp_oauth_servers.py,
in a process of its own). The browser step is an HTTP client following the
URL the REPL prints."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from .test_repl import PROMPT, ask, start_repl, workdir  # noqa: F401 - fixtures

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def oauth_server():
    """The protected MCP server's URL (its authorization server beside it)."""
    proc = subprocess.Popen([sys.executable, "-m", "tests.mcp_oauth_servers"], cwd=ROOT, stdout=subprocess.PIPE,
                            text=True)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        yield url
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_mcp_auth_signs_in_from_the_repl_and_the_tools_join(start_repl, tmp_path, oauth_server):
    home = tmp_path / "home"
    home.mkdir()
    (home / "settings.json").write_text(json.dumps({"mcpServers": {
        "secure": {"httpUrl": oauth_server, "trust": True}}}))
    repl = start_repl([{"text": "first answer"},
                       {"function_calls": [{"name": "mcp_secure_whoami", "args": {}}]},
                       {"text": "done"}], cols=400)
    ask(repl, "hello")
    repl.expect(r"MCP server 'secure' requires authentication using: /mcp auth secure", timeout=30)
    repl.expect(r"first answer", timeout=30)
    repl.expect(PROMPT)

    ask(repl, "/mcp auth")
    repl.expect(r"MCP servers with OAuth authentication:\s+- secure\s+Use /mcp auth <server-name> to authenticate\.")
    repl.expect(PROMPT)

    ask(repl, "/mcp auth secure")
    repl.expect(r"Starting OAuth authentication for MCP server 'secure'\.\.\.")
    repl.expect(r"Opening your browser for OAuth sign-in")
    url = repl.expect(r"(http://127\.0\.0\.1:\d+/authorize\?\S+)", timeout=20).group(1)
    with httpx.Client(follow_redirects=True, timeout=20) as browser:
        page = browser.get(url)
    assert page.status_code == 200 and "Authentication Successful!" in page.text
    repl.expect(r"Successfully authenticated with MCP server 'secure'!", timeout=20)
    repl.expect(r"Restarting MCP server 'secure'\.\.\.")
    repl.expect(r"Successfully authenticated and reloaded tools for 'secure'", timeout=20)
    repl.expect(PROMPT)

    ask(repl, "who am I?")
    repl.expect(r"signed in as ", timeout=30)
    repl.expect(r"done", timeout=30)

    tokens = home / "mcp-oauth-tokens.json"
    assert stat.S_IMODE(tokens.stat().st_mode) == 0o600
    token = json.loads(tokens.read_text())[0]["token"]["accessToken"]
    assert token not in repl.text  # never shown


def test_mcp_auth_names_an_unknown_server(start_repl, tmp_path):
    (tmp_path / "home").mkdir()
    repl = start_repl([{"text": "x"}])
    ask(repl, "/mcp auth")
    repl.expect(r"No MCP servers configured with OAuth authentication\.")
    ask(repl, "/mcp auth nowhere")
    repl.expect(r"MCP server 'nowhere' not found\.")
