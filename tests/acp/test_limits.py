"""Issue 35 §6–§7 and issue 34's late-joiner order: hostile JSON-RPC on
both ACP faces (``--acp`` on stdio, ``serve --acp-ws``), spoken raw — a
plain ``websockets`` client and raw stdin lines — so nothing in between can
tidy up what the agent sends back."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from websockets.sync.client import connect

from gemini_split.testing.fake_gemini import FakeGemini

from .helpers import API_KEY, agent_env
from .test_bridge import Bridge

pytestmark = pytest.mark.timeout(90)

DEEP = 5000
#: An ``initialize`` whose params hold a value nested ``DEEP`` levels.
DEEP_REQUEST = ('{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1, "x": '
                + "[" * DEEP + "]" * DEEP + "}}")
DEEP_OBJECTS = '{"a": ' * DEEP + "1" + "}" * DEEP


def _initialize(id: object) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {"protocolVersion": 1}})


def _ws_call(ws, message: str) -> dict:
    ws.send(message)
    return json.loads(ws.recv(timeout=30))


def test_stdio_agent_answers_json_nested_5000_deep_with_parse_error_and_goes_on(tmp_path):
    lines = [DEEP_REQUEST, DEEP_OBJECTS, _initialize("after")]
    with FakeGemini(script=[], api_key=API_KEY) as fake:
        done = subprocess.run([sys.executable, "-m", "gemini_split", "--acp"], input="\n".join(lines) + "\n",
                              capture_output=True, text=True, timeout=60, cwd=tmp_path,
                              env=agent_env(fake, tmp_path / "home"))
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(r.get("id"), r["error"]["code"] if "error" in r else "ok") for r in replies] == [
        (None, -32700), (None, -32700), ("after", "ok")]
    assert "nested too deeply" in replies[0]["error"]["message"]
    assert done.returncode == 0
    log = (tmp_path / "home" / "gemini-acp.log").read_text()
    assert "Traceback" not in log and "RecursionError" not in log


def test_bridge_answers_json_nested_5000_deep_with_parse_error_and_keeps_the_connection(tmp_path):
    with FakeGemini(script=[], api_key=API_KEY) as fake:
        bridge = Bridge(fake, tmp_path)
        try:
            with connect(bridge.url, open_timeout=30) as ws:
                deep = _ws_call(ws, DEEP_REQUEST)
                objects = _ws_call(ws, DEEP_OBJECTS)
                after = _ws_call(ws, _initialize("after"))
        finally:
            bridge.close()
        logged = bridge.process.stderr.read()
    assert deep["id"] is None and deep["error"]["code"] == -32700
    assert "nested too deeply" in deep["error"]["message"]
    assert objects["error"]["code"] == -32700
    assert after["id"] == "after" and after["result"]["protocolVersion"] == 1
    assert "Traceback" not in logged and "RecursionError" not in logged
