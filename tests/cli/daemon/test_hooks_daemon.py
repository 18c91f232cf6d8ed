"""Issue 29 §4 through the local daemon: the hooks run on the client (the
daemon never reads them), and their verdicts reach the model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from .conftest import API_KEY, run

pytestmark = pytest.mark.timeout(90)


def test_a_before_tool_hook_denies_rm_through_the_local_daemon(environ, home, tmp_path):
    (tmp_path / "victim.txt").write_text("precious\n")
    deny = json.dumps({"decision": "deny", "reason": "no rm through the daemon either"})
    context = json.dumps({"hookSpecificOutput": {"additionalContext": "FROM-THE-CLIENT-HOOK"}})
    Path(home, "settings.json").write_text(json.dumps({"hooks": {
        "BeforeTool": [{"matcher": "run_shell_command", "hooks": [{"type": "command", "command": f"echo '{deny}'"}]}],
        "BeforeAgent": [{"hooks": [{"type": "command", "command": f"echo '{context}'"}]}],
    }}))
    script = [{"function_calls": [{"name": "run_shell_command", "args": {"command": "rm victim.txt"}}]},
              {"text": "done"}]
    with FakeGemini(script, api_key=API_KEY) as fake:
        done = run(["--yolo", "-p", "tidy up"], {**environ, "GOOGLE_GEMINI_BASE_URL": fake.url}, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        bodies = [json.dumps(r["body"]) for r in fake.requests if r["action"].endswith("GenerateContent")]
    assert "FROM-THE-CLIENT-HOOK" in bodies[0]
    assert "no rm through the daemon either" in bodies[1]
    assert (tmp_path / "victim.txt").exists()
    assert Path(home, "daemon", "daemon.sock").exists()  # it went through the daemon


def test_a_before_tool_hook_sees_the_search_the_daemon_runs(environ, home, tmp_path):
    """google_web_search runs in the daemon, not on the client: the daemon
    asks the client's hooks about it (protocol 1.4, ``hook_request``)."""
    deny = json.dumps({"decision": "deny", "reason": "no searching through the daemon"})
    Path(home, "settings.json").write_text(json.dumps({"hooks": {
        "BeforeTool": [{"matcher": "google_web_search", "hooks": [{"type": "command", "command": f"echo '{deny}'"}]}],
    }}))
    script = [{"function_calls": [{"name": "google_web_search", "args": {"query": "trio"}}]}, {"text": "done"}]
    with FakeGemini(script, api_key=API_KEY) as fake:
        done = run(["-p", "what is trio?"], {**environ, "GOOGLE_GEMINI_BASE_URL": fake.url}, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        bodies = [json.dumps(r["body"]) for r in fake.requests if r["action"].endswith("GenerateContent")]
    assert len(bodies) == 2 and "no searching through the daemon" in bodies[1]
    assert Path(home, "daemon", "daemon.sock").exists()
