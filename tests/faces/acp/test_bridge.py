"""Issue 17 §2: ``serve --acp-ws`` — ACP over WebSocket on the server's
sessions, shared by several SDK clients, with late-joiner replay."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from .helpers import API_KEY, HERE, agent_env, message_text, run_editor

pytestmark = pytest.mark.timeout(90)


class Bridge:
    def __init__(self, fake, tmp_path, *extra: str):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gemini_split", "serve", "--listen", "127.0.0.1:0", "--acp-ws", "127.0.0.1:0",
             "--state-dir", ":memory:", *extra],
            env=agent_env(fake, tmp_path / "home"), stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        self.url = None
        assert self.process.stderr is not None
        seen = []
        while time.monotonic() < deadline:
            line = self.process.stderr.readline()
            seen.append(line)
            assert line, "serve exited before the bridge started: " + "".join(seen)[-2000:]
            m = re.search(r"ACP bridge on (ws://\S+)", line)
            if m:
                self.url = m.group(1)
                break
        assert self.url

    def close(self):
        self.process.terminate()
        self.process.wait(timeout=20)


def _start_editor(plan, tmp_path, name):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(plan))
    return subprocess.Popen([sys.executable, str(HERE / "sdk_editor.py"), str(path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _finish(process, timeout=60):
    out, err = process.communicate(timeout=timeout)
    assert process.returncode == 0, err[-3000:]
    return json.loads(out)


def test_two_clients_share_a_session_and_a_late_joiner_gets_the_last_whole_turn(tmp_path):
    script = [{"text": "answer one"}, {"text": "answer two", "chunks": 2}, {"text": "answer three"}]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        bridge = Bridge(fake, tmp_path)
        try:
            session_file = tmp_path / "session"
            first = _start_editor({"ws": bridge.url, "cwd": "/home/someone/project",
                                   "steps": [{"do": "initialize"}, {"do": "new"},
                                             {"do": "prompt", "text": "first"}, {"do": "prompt", "text": "second"},
                                             {"do": "write_session", "path": str(session_file)},
                                             {"do": "wait_text", "text": "answer three"}]}, tmp_path, "a")
            deadline = time.monotonic() + 60
            while not session_file.exists():
                assert first.poll() is None, first.communicate()[1][-3000:]
                assert time.monotonic() < deadline
                time.sleep(0.05)
            session = session_file.read_text()
            late = run_editor({"ws": f"{bridge.url}/?sessionId={session}&limit=1", "cwd": "/home/someone/project",
                               "steps": [{"do": "initialize"}, {"do": "wait_text", "text": "answer two"},
                                         {"do": "use", "session": session}, {"do": "prompt", "text": "third"}]},
                              tmp_path)
            early = _finish(first)
        finally:
            bridge.close()
    # The late joiner: the last whole turn (the user's message, then the answer), not the first one.
    replayed = [(u["sessionUpdate"], u["content"]["text"]) for u in late["updates"]
                if u["sessionUpdate"] in ("user_message_chunk", "agent_message_chunk")]
    assert replayed[0] == ("user_message_chunk", "second")
    assert "answer one" not in message_text(late) and "first" not in json.dumps(late["updates"])
    assert message_text(late).startswith("answer two") and message_text(late).endswith("answer three")
    assert late["results"][3] == {"stopReason": "end_turn"}
    # The first client saw the other's prompt and its answer, in the same session.
    assert ("user_message_chunk", "third") in [(u["sessionUpdate"], u.get("content", {}).get("text"))
                                              for u in early["updates"]]
    assert message_text(early) == "answer oneanswer twoanswer three"
    assert {u["sessionId"] for u in early["updates"] + late["updates"]} == {session}
    # One native session: the model saw one conversation with all three prompts.
    assert len(fake.requests[-1]["body"]["contents"]) == 5


def test_a_bridge_client_without_fs_gets_no_tools_and_is_told_so(tmp_path):
    with FakeGemini(script=[{"text": "no tools here"}], api_key=API_KEY) as fake:
        bridge = Bridge(fake, tmp_path)
        try:
            seen = run_editor({"ws": bridge.url, "cwd": "/srv/elsewhere",
                               "steps": [{"do": "initialize"}, {"do": "new"}, {"do": "prompt", "text": "hi"},
                                         {"do": "use", "session": "s-not-mine"}, {"do": "prompt", "text": "x"}]},
                              tmp_path)
        finally:
            bridge.close()
    assert seen["results"][2] == {"stopReason": "end_turn"}
    assert "no file access" in message_text(seen, "agent_thought_chunk")
    assert "tools" not in fake.requests[0]["body"] or not fake.requests[0]["body"]["tools"]
    assert seen["results"][4]["error"]["code"] == -32002


def _ask(tool: str, **args) -> dict:
    return {"function_calls": [{"name": tool, "args": args}]}


def test_bridge_tools_are_the_prompting_clients_fs_confined_to_its_cwd(tmp_path):
    project = tmp_path / "client-project"
    project.mkdir()
    (project / "a.txt").write_text("client file\n")
    (tmp_path / "secret.txt").write_text("CANARY")
    script = [_ask("read_file", file_path="a.txt"), _ask("read_file", file_path="../secret.txt"), {"text": "done"}]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        bridge = Bridge(fake, tmp_path)
        try:
            seen = run_editor({"ws": bridge.url, "cwd": str(project),
                               "capabilities": {"fs": {"readTextFile": True, "writeTextFile": False}},
                               "steps": [{"do": "initialize"}, {"do": "new"}, {"do": "prompt", "text": "read"}]},
                              tmp_path)
        finally:
            bridge.close()
    assert [c["path"] for c in seen["calls"]] == [str(project / "a.txt")]
    responses = [p["functionResponse"]["response"] for r in fake.requests
                 for p in r["body"]["contents"][-1].get("parts", []) if "functionResponse" in p]
    assert responses[0] == {"output": "client file\n"}
    assert responses[1]["error"]["code"] == "outside_workspace"
    offered = [d["name"] for t in fake.requests[0]["body"]["tools"] for d in t.get("functionDeclarations", [])]
    assert offered == ["read_file"]  # only what this client can serve


def test_with_tokens_a_session_is_its_users_and_unknown_to_another(tmp_path):
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tokens": {"token-alice-1234": {"userId": "alice"}, "token-bob-12345": {"userId": "bob"}}}))
    with FakeGemini(script=[{"text": "for alice"}], api_key=API_KEY) as fake:
        bridge = Bridge(fake, tmp_path, "--auth-config", str(tokens))
        try:
            alice = run_editor({"ws": bridge.url, "cwd": "/p", "headers": {"Authorization": "Bearer token-alice-1234"},
                                "steps": [{"do": "initialize"}, {"do": "new"}, {"do": "prompt", "text": "hi"}]},
                               tmp_path)
            session = alice["results"][1]["sessionId"]
            bob = run_editor({"ws": bridge.url, "cwd": "/p", "headers": {"Authorization": "Bearer token-bob-12345"},
                              "steps": [{"do": "initialize"}, {"do": "use", "session": session},
                                        {"do": "prompt", "text": "steal"}, {"do": "load", "session": session}]},
                             tmp_path)
            refused = subprocess.run([sys.executable, str(HERE / "sdk_editor.py"), str(tmp_path / "none.json")],
                                     capture_output=True, text=True, timeout=60) if (tmp_path / "none.json").write_text(
                json.dumps({"ws": bridge.url, "cwd": "/p", "steps": [{"do": "initialize"}]})) else None
        finally:
            bridge.close()
    assert alice["results"][2] == {"stopReason": "end_turn"}
    assert bob["results"][2]["error"]["code"] == -32002
    assert bob["results"][3]["error"]["code"] == -32002
    assert bob["updates"] == []
    assert refused is not None and refused.returncode != 0  # no token: the upgrade is refused (401)
