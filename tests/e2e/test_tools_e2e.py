"""Issue 3's checks through the whole program: the real CLI, the real
google-genai client, the fake Gemini server asking for tools by name."""

from __future__ import annotations

import json
import os

from gemini_split.testing.fake_gemini import FakeGemini

from tests.cli.test_oneshot_cli import API_KEY, run_cli


def _responses(fake) -> list[dict]:
    """The function responses each model request added (its last content;
    earlier contents repeat the history)."""
    return [p["functionResponse"] for r in fake.requests
            for p in r["body"]["contents"][-1].get("parts", []) if "functionResponse" in p]


def _ask(tool: str, **args) -> list[dict]:
    return [{"function_calls": [{"name": tool, "args": args}]}]


def test_default_mode_refuses_shell_in_one_shot_and_tells_model_and_user(tmp_path):
    flag = tmp_path / "FLAG"
    with FakeGemini(script=_ask("run_shell_command", command=f"touch {flag}"), api_key=API_KEY) as fake:
        result = run_cli(["-p", "make the flag"], cwd=tmp_path, fake=fake)
    assert result.returncode == 0, result.stderr
    assert not flag.exists()
    (response,) = _responses(fake)
    assert response["response"]["error"]["code"] == "refused"
    assert "approval" in response["response"]["error"]["message"]
    assert "run_shell_command" in result.stderr  # the user sees it was refused


def test_yolo_runs_the_shell_command_and_its_output_reaches_the_model(tmp_path):
    with FakeGemini(script=_ask("run_shell_command", command="echo from-the-shell; pwd"), api_key=API_KEY) as fake:
        result = run_cli(["-p", "run it", "--approval-mode", "yolo"], cwd=tmp_path, fake=fake)
    assert result.returncode == 0, result.stderr
    (response,) = _responses(fake)
    output = json.dumps(response["response"])
    assert "from-the-shell" in output and str(tmp_path) in output
    assert response["response"]["output"]["exit_code"] == 0


def test_allowed_tools_lets_exactly_that_command_run(tmp_path):
    script = _ask("run_shell_command", command="echo allowed") + _ask("run_shell_command", command="echo x && touch FLAG")
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        result = run_cli(["-p", "go", "--allowed-tools", "run_shell_command(echo)"], cwd=tmp_path, fake=fake)
    assert result.returncode == 0, result.stderr
    first, second = _responses(fake)
    assert "allowed" in json.dumps(first["response"]["output"])
    assert second["response"]["error"]["code"] == "refused"
    assert not (tmp_path / "FLAG").exists()


def test_reading_outside_the_workspace_or_through_a_symlink_out_never_returns_content(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "outside.txt").write_text("CANARY-OUTSIDE")
    os.symlink(tmp_path / "outside.txt", workspace / "link.txt")
    os.symlink(tmp_path, workspace / "up")
    script = _ask("read_file", file_path="../outside.txt") + _ask("read_file", file_path="link.txt") \
        + _ask("read_file", file_path="up/outside.txt") + _ask("read_file", file_path=str(tmp_path / "outside.txt"))
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        result = run_cli(["-p", "read them", "--approval-mode", "yolo"], cwd=workspace, fake=fake)
    assert result.returncode == 0, result.stderr
    responses = _responses(fake)
    assert len(responses) == 4
    assert all(r["response"]["error"]["code"] == "outside_workspace" for r in responses)
    assert "CANARY-OUTSIDE" not in json.dumps(fake.requests) + result.stdout


def test_write_file_and_replace_change_exactly_what_they_say(tmp_path):
    (tmp_path / "app.py").write_text("def main():\n    return 1\n\nprint(main())\n")
    script = _ask("write_file", file_path="new/hello.txt", content="hello\nworld\n") + _ask(
        "replace", file_path="app.py", instruction="return 2", old_string="    return 1\n", new_string="    return 2\n")
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        refused = run_cli(["-p", "edit"], cwd=tmp_path, fake=fake)
    assert refused.returncode == 0 and not (tmp_path / "new").exists()
    assert (tmp_path / "app.py").read_text() == "def main():\n    return 1\n\nprint(main())\n"
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        result = run_cli(["-p", "edit", "--approval-mode", "auto_edit"], cwd=tmp_path, fake=fake)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "new" / "hello.txt").read_text() == "hello\nworld\n"
    assert (tmp_path / "app.py").read_text() == "def main():\n    return 2\n\nprint(main())\n"
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["app.py", "hello.txt", "new"]  # no temp files left
