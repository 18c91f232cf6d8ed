"""``run_shell_command`` in the editor's terminal (``terminal/*``), with the
tool environment's rules: no keys, a directory inside the workspace."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from .helpers import API_KEY, HERE, agent_env

pytestmark = pytest.mark.timeout(60)


def test_a_shell_command_runs_in_the_editors_terminal_without_the_agents_keys(tmp_path):
    (tmp_path / "sub").mkdir()
    command = "echo hi-from-terminal; pwd; echo key=$GEMINI_API_KEY"
    script = [{"function_calls": [{"name": "run_shell_command",
                                   "args": {"command": command, "description": "say hi", "dir_path": "sub"}}]},
              {"text": "ran it"}]
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "trustedFolders.json").write_text(json.dumps({str(tmp_path): "TRUST_FOLDER"}))  # for yolo
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        plan = {"agent": [sys.executable, "-m", "gemini_split", "--acp"], "cwd": str(tmp_path),
                "env": agent_env(fake, tmp_path / "home"), "capabilities": {"terminal": True},
                "steps": [{"do": "initialize"}, {"do": "new"}, {"do": "set_mode", "mode": "yolo"},
                          {"do": "prompt", "text": "run"}]}
        (tmp_path / "plan.json").write_text(json.dumps(plan))
        done = subprocess.run([sys.executable, str(HERE / "sdk_terminal_editor.py"), str(tmp_path / "plan.json")],
                              capture_output=True, text=True, timeout=50, env=plan["env"], cwd=HERE)
        assert done.returncode == 0, done.stderr[-3000:]
        seen = json.loads(done.stdout)
    assert seen["results"][3] == {"stopReason": "end_turn"}
    create = next(c for c in seen["calls"] if c["method"] == "terminal/create")
    assert create["cwd"] == str(tmp_path / "sub")
    assert create["command"] == "env" and create["args"][0] == "-i" and create["args"][-1] == command
    assert not any(a.startswith("GEMINI_API_KEY=") for a in create["args"])
    assert any(c["method"] == "terminal/release" for c in seen["calls"])
    (response,) = [p["functionResponse"]["response"] for r in fake.requests
                   for p in r["body"]["contents"][-1].get("parts", []) if "functionResponse" in p]
    output = response["output"]
    assert output["exit_code"] == 0
    assert "hi-from-terminal" in output["output"] and str(tmp_path / "sub") in output["output"]
    assert "key=\n" in output["output"] and API_KEY not in json.dumps(response)
    start = next(u for u in seen["updates"] if u["sessionUpdate"] == "tool_call")
    assert start["kind"] == "execute"
    assert start["title"] == f"{command} [sub] (say hi)"
    assert start["_meta"] == {"cwd": str(tmp_path / "sub"), "description": "say hi"}
    embedded = [c for u in seen["updates"] if u["sessionUpdate"] == "tool_call_update" for c in u.get("content", [])]
    assert {"type": "terminal", "terminalId": "term-1"} in embedded
