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


# --- issue 35 §7: a cwd is a path, and what a user's sessions keep is bounded in bytes -----------


def _new(id: object, cwd: str) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": id, "method": "session/new", "params": {"cwd": cwd, "mcpServers": []}})


def test_stdio_agent_refuses_a_cwd_longer_than_path_max_with_invalid_params(tmp_path):
    lines = [_initialize(0), _new("long", "/" + "a" * 4096), _new("huge", "/" + "a" * (15 * 1024 * 1024)),
             _new("relative", "a" * 100), _new("ok", str(tmp_path))]
    with FakeGemini(script=[], api_key=API_KEY) as fake:
        done = subprocess.run([sys.executable, "-m", "gemini_split", "--acp"], input="\n".join(lines) + "\n",
                              capture_output=True, text=True, timeout=60, cwd=tmp_path,
                              env=agent_env(fake, tmp_path / "home"))
    replies = {r["id"]: r for r in map(json.loads, done.stdout.splitlines())}
    for name in ("long", "huge", "relative"):
        assert replies[name]["error"]["code"] == -32602, replies[name]
    assert "4096" in replies["long"]["error"]["message"] and "PATH_MAX" in replies["huge"]["error"]["message"]
    assert len(replies["huge"]["error"]["message"]) < 300  # the path is not echoed back
    assert replies["ok"]["result"]["sessionId"]


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def test_bridge_refuses_15_mb_cwds_and_holds_no_memory_for_them(tmp_path):
    huge = "/" + "d" * (15 * 1024 * 1024)
    with FakeGemini(script=[], api_key=API_KEY) as fake:
        bridge = Bridge(fake, tmp_path)
        try:
            with connect(bridge.url, open_timeout=30, max_size=None) as ws:
                assert "result" in _ws_call(ws, _initialize(0))
                # The first few grow the allocator's arenas (kept for reuse,
                # not held for the sessions); after them, nothing more may stay.
                replies = [_ws_call(ws, _new(i, huge)) for i in range(5)]
                before = _rss_kb(bridge.process.pid)
                replies += [_ws_call(ws, _new(i, huge)) for i in range(5, 15)]
                after = _rss_kb(bridge.process.pid)
                ok = _ws_call(ws, _new("ok", "/home/someone/project"))
        finally:
            bridge.close()
    assert [r["error"]["code"] for r in replies] == [-32602] * 15
    assert ok["result"]["sessionId"]
    assert after - before < 40 * 1024, f"serve grew by {(after - before) // 1024} MB"


async def test_a_users_sessions_keep_at_most_their_byte_budget_for_late_joiners(tmp_path):
    from gemini_split.protocol import Replay
    from gemini_split.server.model.scripted import ScriptedModel

    from .test_agent_inprocess import bridge_agent

    budget = 64 * 1024
    script = [{"text": f"answer {i}"} for i in range(12)]
    async with bridge_agent(tmp_path, ScriptedModel(script), max_replay_bytes_per_owner=budget) as (agent, connect):
        client = await connect()
        sessions = [(await client.call("session/new", {"cwd": f"/p{i}", "mcpServers": []}))["result"]["sessionId"]
                    for i in range(2)]
        for i in range(6):
            for session in sessions:
                reply = await client.call("session/prompt", {"sessionId": session, "prompt": [
                    {"type": "text", "text": f"prompt {i} " + "x" * 10_000}]})
                assert reply["result"] == {"stopReason": "end_turn"}
        # A late joiner asking for everything gets what the budget kept: the newest, whole.
        kept = {s: agent.sessions[("local", s)].ring.replay(Replay(since=0)) for s in sessions}
    sizes = [len(json.dumps(m, separators=(",", ":"))) for messages in kept.values() for m in messages]
    assert sum(sizes) <= budget
    for session, messages in kept.items():
        texts = [m["update"]["content"]["text"] for m in messages]
        assert texts[-1] == "answer " + str(10 + sessions.index(session))  # the newest stays
        assert any(t.startswith("prompt 5 ") for t in texts) and not any(t.startswith("prompt 0 ") for t in texts)


# --- issue 34: a late joiner hears its initialize answer before the replay ------------------------


def test_a_late_joiner_gets_its_initialize_answer_before_the_replayed_updates(tmp_path):
    with FakeGemini(script=[{"text": "the first answer"}], api_key=API_KEY) as fake:
        bridge = Bridge(fake, tmp_path)
        try:
            with connect(bridge.url, open_timeout=30) as first:
                assert "result" in _ws_call(first, _initialize(0))
                session = _ws_call(first, _new(1, "/home/someone/project"))["result"]["sessionId"]
                first.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {
                    "sessionId": session, "prompt": [{"type": "text", "text": "hello"}]}}))
                while json.loads(first.recv(timeout=30)).get("id") != 2:
                    pass
                with connect(f"{bridge.url}/?sessionId={session}&limit=1", open_timeout=30) as late:
                    late.send(_initialize("init"))
                    seen = [json.loads(late.recv(timeout=30))]
                    while len([m for m in seen if m.get("method") == "session/update"]) < 2:
                        seen.append(json.loads(late.recv(timeout=30)))
        finally:
            bridge.close()
    assert seen[0].get("id") == "init" and seen[0]["result"]["protocolVersion"] == 1, seen[0]
    replayed = [m["params"]["update"] for m in seen[1:]]
    assert replayed[0] == {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "hello"}}
    assert replayed[1]["content"]["text"] == "the first answer"
