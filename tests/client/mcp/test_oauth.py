"""OAuth 2.1 for remote MCP servers, against the MCP SDK's own server with
its auth support and a real authorization server (tests/mcp_oauth_servers.py).
The browser step is an HTTP client following the printed authorization URL."""

from __future__ import annotations

import json
import re
import socket
import stat
import time
from functools import partial

import httpx
import msgspec
import pytest
import trio
from mcp.shared.auth import OAuthClientInformationFull

from gemini_split.tools.mcp import oauth
from gemini_split.tools.mcp.sources import open_mcp_servers
from gemini_split.tools.base import ToolFailed
from gemini_split.userfiles.settings import MCPServerSettings
from tests.mcp_oauth_servers import serve_oauth_servers

pytestmark = pytest.mark.timeout(60)

#: The keys of one credential in gemini-cli's file, and of its token.
GEMINI_CLI_KEYS = {"serverName", "token", "clientId", "tokenUrl", "mcpServerUrl", "updatedAt"}
GEMINI_CLI_TOKEN_KEYS = {"accessToken", "tokenType", "refreshToken", "scope", "expiresAt"}


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMINI_SPLIT_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


async def _browser(url: str) -> None:
    """What a browser does with the authorization URL: follow the redirects
    to the loopback listener (run in a thread: the client is synchronous)."""
    def follow() -> None:
        with httpx.Client(follow_redirects=True, timeout=20) as client:
            answer = client.get(url)
            assert answer.status_code == 200 and "Authentication Successful!" in answer.text, answer.text
    await trio.to_thread.run_sync(follow)


async def _sign_in(name: str, config: MCPServerSettings) -> list[str]:
    said: list[str] = []
    async with trio.open_nursery() as nursery:
        def say(text: str) -> None:
            said.append(text)
            found = re.search(r"^(http://\S+/authorize\?\S+)$", text, re.M)
            if found:
                nursery.start_soon(_browser, found.group(1))
        await oauth.authenticate(name, config, say=say, open_browser=False)
    return said


async def _status(name: str, config: MCPServerSettings, tmp_path):
    async with open_mcp_servers({name: config}, cwd=tmp_path) as servers:
        status = servers.statuses()[0]
        tools = {t.name: t for t in servers.tools()}
        answer = await tools[f"mcp_{name}_whoami"].run({}, None) if tools else None
    return status, answer


async def test_first_use_asks_for_auth_then_mcp_auth_signs_in_and_the_tools_answer(home, tmp_path):
    async with trio.open_nursery() as nursery:
        auth, url = await nursery.start(serve_oauth_servers)
        config = MCPServerSettings(http_url=url)
        with trio.fail_after(40):
            status, _ = await _status("secure", config, tmp_path)
            assert status.state == "failed"
            assert status.error == "MCP server 'secure' requires authentication using: /mcp auth secure"
            assert auth.registrations == 0  # starting never registers or signs in

            said = await _sign_in("secure", config)
            assert any("Opening your browser for OAuth sign-in" in s and url.split("/mcp")[0] not in s
                       for s in said)
            assert auth.registrations == 1 and auth.authorizations == 1

            status, answer = await _status("secure", config, tmp_path)
            assert status.state in ("ready", "stopped") and status.tools == ["mcp_secure_whoami"]
            assert answer.startswith("signed in as ")
        nursery.cancel_scope.cancel()

    path = home / "mcp-oauth-tokens.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    entries = json.loads(path.read_text())
    assert [e["serverName"] for e in entries] == ["secure"]
    assert set(entries[0]) <= GEMINI_CLI_KEYS and set(entries[0]["token"]) <= GEMINI_CLI_TOKEN_KEYS
    assert entries[0]["mcpServerUrl"] == url and entries[0]["tokenUrl"].endswith("/token")
    assert entries[0]["token"]["accessToken"] in auth.access
    assert "secret" not in path.read_text().lower()


async def test_an_expired_token_is_refreshed_and_stored(home, tmp_path):
    async with trio.open_nursery() as nursery:
        auth, url = await nursery.start(serve_oauth_servers)
        config = MCPServerSettings(http_url=url)
        with trio.fail_after(40):
            await _sign_in("secure", config)
            path = home / "mcp-oauth-tokens.json"
            first = json.loads(path.read_text())[0]["token"]

            # Expired on the server only: the stored expiry still looks good, so the 401 refreshes.
            auth.expire_all()
            status, answer = await _status("secure", config, tmp_path)
            assert answer.startswith("signed in as ") and auth.refreshes == 1
            second = json.loads(path.read_text())[0]["token"]
            assert second["accessToken"] != first["accessToken"] and second["accessToken"] in auth.access

            # Expired by the stored expiry (gemini-cli's 5-minute margin): refreshed before it is sent.
            entries = json.loads(path.read_text())
            entries[0]["token"]["expiresAt"] = 1000
            path.write_text(json.dumps(entries))
            seen = len(auth.seen_tokens)
            status, answer = await _status("secure", config, tmp_path)
            assert answer.startswith("signed in as ") and auth.refreshes == 2
            assert second["accessToken"] not in auth.seen_tokens[seen:]
            assert auth.registrations == 1 and auth.authorizations == 1  # no new sign-in
        nursery.cancel_scope.cancel()


async def test_a_revoked_token_gives_gemini_clis_message_and_no_token_in_it(home, tmp_path):
    async with trio.open_nursery() as nursery:
        auth, url = await nursery.start(serve_oauth_servers)
        config = MCPServerSettings(http_url=url)
        with trio.fail_after(40):
            await _sign_in("secure", config)
            token = json.loads((home / "mcp-oauth-tokens.json").read_text())[0]["token"]
            auth.revoke_all()
            status, _ = await _status("secure", config, tmp_path)
            assert status.state == "failed"
            assert status.error == ("MCP server 'secure' rejected stored OAuth token. "
                                    "Please re-authenticate using: /mcp auth secure")
            assert token["accessToken"] not in status.error and token["refreshToken"] not in status.error
            assert auth.authorizations == 1

            await _sign_in("secure", config)  # /mcp auth again mends it
            _, answer = await _status("secure", config, tmp_path)
            assert answer.startswith("signed in as ")
        nursery.cancel_scope.cancel()


async def test_a_call_after_the_token_is_revoked_fails_with_the_message(home, tmp_path):
    async with trio.open_nursery() as nursery:
        auth, url = await nursery.start(serve_oauth_servers)
        config = MCPServerSettings(http_url=url)
        with trio.fail_after(40):
            await _sign_in("secure", config)
            async with open_mcp_servers({"secure": config}, cwd=tmp_path) as servers:
                tool = servers.tools()[0]
                assert (await tool.run({}, None)).startswith("signed in as ")
                auth.revoke_all()
                with pytest.raises(ToolFailed) as failed:
                    await tool.run({}, None)
            assert "/mcp auth secure" in str(failed.value)
        nursery.cancel_scope.cancel()


async def test_a_declined_sign_in_says_so_and_stores_nothing(home):
    async with trio.open_nursery() as nursery:
        auth, url = await nursery.start(serve_oauth_servers)
        auth.deny = "access_denied"
        with trio.fail_after(40), pytest.raises(oauth.SignInFailed, match="^OAuth error: access_denied$"):
            said: list[str] = []

            def say(text: str) -> None:
                said.append(text)
                found = re.search(r"^(http://\S+/authorize\?\S+)$", text, re.M)
                nursery.start_soon(_declined, found.group(1))

            await oauth.authenticate("secure", MCPServerSettings(http_url=url), say=say, open_browser=False)
        nursery.cancel_scope.cancel()
    assert not (home / "mcp-oauth-tokens.json").exists()


async def _declined(url: str) -> None:
    def follow() -> None:
        with httpx.Client(follow_redirects=True, timeout=20) as client:
            answer = client.get(url)
            assert "Authentication Failed" in answer.text and "access_denied" in answer.text
    await trio.to_thread.run_sync(follow)


async def test_a_preregistered_client_signs_in_with_its_secret_which_is_never_stored(home, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    redirect = f"http://127.0.0.1:{port}/oauth/callback"
    async with trio.open_nursery() as nursery:
        auth, url = await nursery.start(serve_oauth_servers)
        auth.preregister("gemini-split-test", "s3cret-value", redirect)
        config = msgspec.convert({"httpUrl": url, "oauth": {
            "enabled": True, "clientId": "gemini-split-test", "clientSecret": "s3cret-value",
            "redirectUri": redirect, "scopes": ["mcp:tools"]}}, MCPServerSettings)
        with trio.fail_after(40):
            await _sign_in("secure", config)
            _, answer = await _status("secure", config, tmp_path)
            assert answer == "signed in as gemini-split-test"
            assert auth.registrations == 0
        nursery.cancel_scope.cancel()
    text = (home / "mcp-oauth-tokens.json").read_text()
    assert "s3cret-value" not in text and json.loads(text)[0]["clientId"] == "gemini-split-test"


async def test_a_token_gemini_cli_stored_is_used_and_refreshed(home, tmp_path):
    """The file as gemini-cli's MCPOAuthTokenStorage writes it (JSON.stringify(list, null, 2))."""
    async with trio.open_nursery() as nursery:
        auth, url = await nursery.start(serve_oauth_servers)
        auth.clients["gemini-cli-client"] = OAuthClientInformationFull(
            client_id="gemini-cli-client", redirect_uris=["http://localhost:7777/oauth/callback"],
            token_endpoint_auth_method="none")
        issued = auth._issue("gemini-cli-client", ["mcp:tools"], url)
        home.mkdir()
        (home / "mcp-oauth-tokens.json").write_text(json.dumps([{
            "serverName": "secure",
            "token": {"accessToken": issued.access_token, "tokenType": "Bearer",
                      "refreshToken": issued.refresh_token, "scope": "mcp:tools",
                      "expiresAt": int(time.time() * 1000) + 3_600_000},
            "clientId": "gemini-cli-client", "tokenUrl": auth.issuer + "/token",
            "mcpServerUrl": url, "updatedAt": int(time.time() * 1000)}], indent=2))
        config = MCPServerSettings(http_url=url)
        with trio.fail_after(40):
            _, answer = await _status("secure", config, tmp_path)
            assert answer == "signed in as gemini-cli-client"
            auth.expire_all()
            _, answer = await _status("secure", config, tmp_path)
            assert answer == "signed in as gemini-cli-client" and auth.refreshes == 1
        nursery.cancel_scope.cancel()


async def test_an_sse_server_signs_in_the_same_way(home, tmp_path):
    async with trio.open_nursery() as nursery:
        auth, url = await nursery.start(partial(serve_oauth_servers, sse=True))
        config = MCPServerSettings(url=url)
        with trio.fail_after(40):
            status, _ = await _status("events", config, tmp_path)
            assert status.transport == "sse"
            assert status.error == "MCP server 'events' requires authentication using: /mcp auth events"
            await _sign_in("events", config)
            _, answer = await _status("events", config, tmp_path)
            assert answer.startswith("signed in as ")
        nursery.cancel_scope.cancel()


async def test_a_server_with_its_own_authorization_header_is_left_alone(home):
    config = MCPServerSettings(http_url="http://127.0.0.1:9/mcp", headers={"Authorization": "Bearer mine"})
    assert oauth.auth_for("own", config) is None
    with pytest.raises(oauth.SignInFailed, match="its own Authorization header"):
        await oauth.authenticate("own", config, say=print, open_browser=False)
    with pytest.raises(oauth.SignInFailed, match="not a remote"):
        await oauth.authenticate("local", MCPServerSettings(command="true"), say=print, open_browser=False)


def test_a_browser_is_opened_only_where_gemini_cli_opens_one():
    assert not oauth.can_open_browser({})  # no display (linux)
    assert oauth.can_open_browser({"DISPLAY": ":0"})
    assert not oauth.can_open_browser({"DISPLAY": ":0", "CI": "1"})
    assert not oauth.can_open_browser({"WAYLAND_DISPLAY": "w", "BROWSER": "www-browser"})
