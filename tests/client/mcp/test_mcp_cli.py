"""MCP through the whole program: servers from settings.json lend their
tools to the model (real google-genai client, fake Gemini server), and
``gemini-split mcp add/list/remove`` edit settings.json as gemini-cli does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gemini_split.userfiles.settings import strip_json_comments
from gemini_split.testing.fake_gemini import FakeGemini

from tests.cli.test_oneshot_cli import API_KEY, run_cli

pytestmark = pytest.mark.timeout(90)


def _responses(fake) -> list[dict]:
    return [p["functionResponse"] for r in fake.requests
            for p in r["body"]["contents"][-1].get("parts", []) if "functionResponse" in p]


def _declared(fake) -> set[str]:
    return {d["name"] for tool in fake.requests[0]["body"].get("tools", []) for d in tool.get("functionDeclarations", [])}


def _home_with(tmp_path: Path, servers: dict) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / "settings.json").write_text(json.dumps({"mcpServers": servers}))
    return home


def test_mcp_tools_from_settings_reach_the_model_and_a_broken_server_does_not_stop_the_others(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "tracked.txt").write_text("x")
    home = _home_with(tmp_path, {
        "time": {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
                 "trust": True},
        "git": {"command": sys.executable, "args": ["-m", "mcp_server_git", "--repository", str(repo)]},
        "broken": {"command": str(tmp_path / "no-such-server")},
    })
    script = [{"function_calls": [{"name": "mcp_time_get_current_time", "args": {"timezone": "UTC"}},
                                  {"name": "mcp_git_git_status", "args": {"repo_path": str(repo)}}]},
              {"text": "done"}]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        result = run_cli(["-p", "what time is it, and git status", "--allowed-tools", "mcp_git_git_status"],
                         cwd=repo, fake=fake, env_extra={"GEMINI_SPLIT_HOME": str(home)}, timeout=80)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("done")
    assert {"mcp_time_get_current_time", "mcp_git_git_status", "read_file"} <= _declared(fake)
    time_response, git_response = _responses(fake)
    assert '\\"timezone\\": \\"UTC\\"' in json.dumps(time_response["response"]["output"])
    assert "tracked.txt" in git_response["response"]["output"]
    assert "broken" in result.stderr and "not found" in result.stderr  # reported by name, once


def test_an_mcp_tool_asks_first_so_one_shot_refuses_it_unless_allowed(tmp_path):
    home = _home_with(tmp_path, {"time": {"command": sys.executable,
                                          "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}})
    script = [{"function_calls": [{"name": "mcp_time_get_current_time", "args": {"timezone": "UTC"}}]}, {"text": "ok"}]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        result = run_cli(["-p", "time?"], cwd=tmp_path, fake=fake, env_extra={"GEMINI_SPLIT_HOME": str(home)})
    assert result.returncode == 0, result.stderr
    (response,) = _responses(fake)
    assert response["response"]["error"]["code"] == "refused"


def test_allowed_mcp_server_names_keeps_only_those_servers(tmp_path):
    home = _home_with(tmp_path, {
        "time": {"command": sys.executable, "args": ["-m", "mcp_server_time"]},
        "other": {"command": str(tmp_path / "never-started")},
    })
    with FakeGemini(script=[{"text": "hi"}], api_key=API_KEY) as fake:
        result = run_cli(["-p", "hi", "--allowed-mcp-server-names", "time"], cwd=tmp_path, fake=fake,
                         env_extra={"GEMINI_SPLIT_HOME": str(home)})
    assert result.returncode == 0, result.stderr
    assert "mcp_time_get_current_time" in _declared(fake)
    assert "other" not in result.stderr


def test_a_malformed_server_entry_is_named_and_left_out_and_the_rest_still_runs(tmp_path):
    home = _home_with(tmp_path, {
        "broken": {"command": 42},
        "time": {"command": sys.executable, "args": ["-m", "mcp_server_time"]},
    })
    with FakeGemini(script=[{"text": "hi"}], api_key=API_KEY) as fake:
        result = run_cli(["-p", "hi"], cwd=tmp_path, fake=fake, env_extra={"GEMINI_SPLIT_HOME": str(home)})
    assert result.returncode == 0, result.stderr
    assert str(home / "settings.json") in result.stderr
    assert "key mcpServers.broken.command: expected `str | null`, got `int`" in result.stderr and "left out" in result.stderr
    assert "Traceback" not in result.stderr
    assert "mcp_time_get_current_time" in _declared(fake)


def test_mcp_add_list_remove_edit_settings_json_like_gemini_cli(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    project = tmp_path / "project"
    (project / ".gemini").mkdir(parents=True)
    (project / ".gemini" / "settings.json").write_text('{\n  // kept key\n  "model": {"name": "gemini-2.5-pro"}\n}\n')
    env = {"GEMINI_SPLIT_HOME": str(home), "GEMINI_CLI_TRUST_WORKSPACE": "true"}

    added = run_cli(["mcp", "add", "-e", "TZ_KEY=$MY_TOKEN", "time", sys.executable, "--",
                     "-m", "mcp_server_time", "--local-timezone", "UTC"], cwd=project, env_extra=env)
    assert added.returncode == 0, added.stderr
    assert 'MCP server "time" added to project settings' in added.stdout
    written = (project / ".gemini" / "settings.json").read_text()
    assert written.startswith('{\n  // kept key\n  "model": {"name": "gemini-2.5-pro"},\n  "mcpServers": {\n')
    data = json.loads(strip_json_comments(written))
    assert data["model"] == {"name": "gemini-2.5-pro"}  # other keys kept, comments too
    assert data["mcpServers"]["time"] == {"command": sys.executable,
                                          "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
                                          "env": {"TZ_KEY": "$MY_TOKEN"}}  # $VAR kept unexpanded
    assert added.stderr == "" and not (project / ".gemini" / "settings.json.bak").exists()

    http = run_cli(["mcp", "add", "-s", "user", "-t", "http", "-H", "Authorization: Bearer abc", "--trust",
                    "--include-tools", "a,b", "remote", "https://example.invalid/mcp"], cwd=project, env_extra=env)
    assert http.returncode == 0, http.stderr
    assert json.loads((home / "settings.json").read_text())["mcpServers"]["remote"] == {
        "url": "https://example.invalid/mcp", "type": "http", "headers": {"Authorization": "Bearer abc"},
        "trust": True, "includeTools": ["a", "b"]}

    listed = run_cli(["mcp", "list"], cwd=project, env_extra=env, timeout=80)
    assert listed.returncode == 0, listed.stderr
    assert "✓ time:" in listed.stdout and "(stdio) - Connected (2 tools)" in listed.stdout
    assert "mcp_time_get_current_time" in listed.stdout
    assert "✗ remote: https://example.invalid/mcp (http) - Disconnected" in listed.stdout

    removed = run_cli(["mcp", "remove", "time"], cwd=project, env_extra=env)
    assert removed.returncode == 0 and 'Server "time" removed' in removed.stdout
    assert (project / ".gemini" / "settings.json").read_text() == (
        '{\n  // kept key\n  "model": {"name": "gemini-2.5-pro"},\n  "mcpServers": {}\n}\n')
    missing = run_cli(["mcp", "remove", "time"], cwd=project, env_extra=env)
    assert missing.returncode == 1 and "not found" in missing.stdout
