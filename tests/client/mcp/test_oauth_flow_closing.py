"""A request that fails part-way through the OAuth flow (the server is
unreachable, the request is cancelled) closes the SDK's flow in its own
task: the provider's lock is released by the task that took it, so the
next request through the same provider is not stuck behind it, and no
"Exception ignored during finalization" error is logged."""

from __future__ import annotations

import logging
import socket

import httpx2
import pytest
import trio

from gemini_split.tools.mcp import oauth
from gemini_split.userfiles.settings import MCPServerSettings

pytestmark = pytest.mark.timeout(30)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_a_failed_request_leaves_the_oauth_provider_usable(tmp_path, caplog):
    url = f"http://127.0.0.1:{_closed_port()}/mcp"
    auth = oauth.auth_for("remote", MCPServerSettings(http_url=url), file=tmp_path / "tokens.json")
    caplog.set_level(logging.ERROR, logger="trio.async_generator_errors")
    async with httpx2.AsyncClient(auth=auth) as client:
        for _ in range(2):  # the second waits for the provider's lock
            with trio.fail_after(10), pytest.raises(httpx2.ConnectError):
                await client.get(url)
            for _ in range(20):  # an abandoned generator is finalized at a later checkpoint
                await trio.sleep(0)
    assert [r.getMessage() for r in caplog.records if r.name == "trio.async_generator_errors"] == []
