"""Malformed JSON-RPC on ``gemini-split --acp``'s stdin: each gets its
error code and the agent goes on (a real process, raw lines)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from .helpers import API_KEY, agent_env

pytestmark = pytest.mark.timeout(60)


def test_malformed_messages_get_json_rpc_errors_and_the_agent_goes_on(tmp_path):
    lines = [
        "{oops",
        "[]",
        '[{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}]',
        '{"id": 2, "method": "initialize"}',
        '{"jsonrpc": "2.0", "id": [3], "method": "initialize"}',
        '{"jsonrpc": "2.0", "id": 4, "method": "no/such/method"}',
        '{"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": {"protocolVersion": "one"}}',
        '{"jsonrpc": "2.0", "id": 6, "method": "session/new", "params": {"cwd": "relative/dir"}}',
        '{"jsonrpc": "2.0", "id": 7, "method": "session/prompt", "params": {"sessionId": "s-x", "prompt": []}}',
        '{"jsonrpc": "2.0", "id": 8, "method": "initialize", "params": {"protocolVersion": 1}}',
        '{"jsonrpc": "2.0", "id": 9, "method": "initialize", "params": {"protocolVersion": 1, "x": "'
        + "a" * (17 * 1024 * 1024) + '"}}',
        '{"jsonrpc": "2.0", "id": "last", "method": "initialize", "params": {"protocolVersion": 1}}',
    ]
    with FakeGemini(script=[], api_key=API_KEY) as fake:
        done = subprocess.run([sys.executable, "-m", "gemini_split", "--acp"], input="\n".join(lines) + "\n",
                              capture_output=True, text=True, timeout=50, cwd=tmp_path,
                              env=agent_env(fake, tmp_path / "home"))
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    got = [(r.get("id"), r["error"]["code"] if "error" in r else "ok") for r in replies]
    assert got == [
        (None, -32700), (None, -32600), (None, -32600), (2, -32600), (None, -32600), (4, -32601),
        (5, -32602), (6, -32602), (7, -32002), (8, "ok"), (None, -32600), ("last", "ok"),
    ]
    assert replies[-1]["result"]["protocolVersion"] == 1
    assert done.returncode == 0
    log = (tmp_path / "home" / "gemini-acp.log").read_text()
    assert "aaaa" not in log and API_KEY not in log
