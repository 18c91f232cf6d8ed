"""Issue 29 §4: gemini-cli's hooks (settings.json ``hooks``), run on the client.

Real ``gemini-split`` processes against the fake Gemini server, with hook
scripts in gemini-cli's contract (JSON on stdin, JSON or exit 2 out); what the
model received is read from the fake's recorded request bodies. The runner's
edge cases (a hung hook's process group, a flood of output) are checked on
:func:`run_hook` directly.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio

from gemini_split.userfiles.hooks import MAX_STDOUT_BYTES, HookDefinition, parse_hooks, run_hook
from gemini_split.testing.fake_gemini import FakeGemini

from tests.server.server_tools.helpers import unix_listener
from tests.e2e.test_serve_e2e import API_KEY, daemon

pytestmark = pytest.mark.timeout(90)

#: gemini-cli's writing-hooks example, in Python: deny rm in run_shell_command.
DENY_RM = r'''#!/usr/bin/env python3
import json, sys
event = json.load(sys.stdin)
with open(__file__ + ".log", "a") as log:
    log.write(json.dumps(event) + "\n")
command = event.get("tool_input", {}).get("command", "")
if command.split()[:1] == ["rm"]:
    print(json.dumps({"decision": "deny", "reason": "Deleting files is not allowed by the rm-guard hook"}))
else:
    print(json.dumps({"decision": "allow"}))
'''


def script(path: Path, text: str, *, executable: bool = True) -> Path:
    path.write_text(text)
    path.chmod(0o755 if executable else 0o644)
    return path


@pytest.fixture
def setup(tmp_path: Path) -> dict:
    home, work = tmp_path / "home", tmp_path / "work"
    (work / ".gemini").mkdir(parents=True)
    home.mkdir()
    (work / "victim.txt").write_text("precious\n")
    (tmp_path / "trusted.json").write_text(json.dumps({str(work): "TRUST_FOLDER"}))
    return {"home": home, "work": work, "tmp": tmp_path}


def settings(where: Path, hooks: dict, **more) -> None:
    path = where / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"hooks": hooks, **more}))


def group(command: str, matcher: str = "", **hook) -> list[dict]:
    return [{"matcher": matcher, "hooks": [{"type": "command", "command": command, **hook}]}]


def run(setup: dict, fake: FakeGemini | None, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI", "GOOGLE"))}
    env.update(HOME=str(setup["tmp"]), GEMINI_SPLIT_HOME=str(setup["home"]),
               GEMINI_CLI_TRUSTED_FOLDERS_PATH=str(setup["tmp"] / "trusted.json"))
    if fake is not None:
        env.update(GEMINI_API_KEY=API_KEY, GOOGLE_GEMINI_BASE_URL=fake.url)
    return subprocess.run([sys.executable, "-m", "gemini_split", *args], cwd=setup["work"], env=env,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def shell_call(command: str) -> list[dict]:
    return [{"function_calls": [{"name": "run_shell_command", "args": {"command": command}}]}, {"text": "done"}]


def bodies(fake: FakeGemini) -> list[str]:
    return [json.dumps(r["body"]) for r in fake.requests if r["action"].endswith("GenerateContent")]


def test_a_before_tool_hook_denies_rm_the_tool_never_runs_and_the_model_gets_the_reason(setup):
    guard = script(setup["home"] / "rm_guard.py", DENY_RM)
    settings(setup["home"], {"BeforeTool": group(str(guard), "run_shell_command", name="rm-guard", timeout=10000)})
    with FakeGemini(shell_call("rm victim.txt"), api_key=API_KEY) as fake:
        done = run(setup, fake, "--yolo", "-p", "tidy up")
        assert done.returncode == 0, done.stderr
        assert (setup["work"] / "victim.txt").exists()
        assert "Deleting files is not allowed by the rm-guard hook" in bodies(fake)[1]
    event = json.loads((setup["home"] / "rm_guard.py.log").read_text().splitlines()[0])
    assert event["hook_event_name"] == "BeforeTool" and event["tool_name"] == "run_shell_command"
    assert event["tool_input"]["command"] == "rm victim.txt" and event["cwd"] == str(setup["work"])
    assert event["session_id"] and event["timestamp"]


def test_the_same_hook_allows_other_commands_and_does_not_see_tools_its_matcher_excludes(setup):
    guard = script(setup["home"] / "rm_guard.py", DENY_RM)
    settings(setup["home"], {"BeforeTool": group(str(guard), "run_shell_command")})
    calls = [{"function_calls": [{"name": "read_file", "args": {"file_path": "victim.txt"}}]},
             *shell_call("touch made.txt")]
    with FakeGemini(calls, api_key=API_KEY) as fake:
        done = run(setup, fake, "--yolo", "-p", "go")
        assert done.returncode == 0, done.stderr
    assert (setup["work"] / "made.txt").exists()
    seen = [json.loads(line)["tool_name"] for line in (setup["home"] / "rm_guard.py.log").read_text().splitlines()]
    assert seen == ["run_shell_command"]


def test_exit_status_2_blocks_the_tool_with_stderr_as_the_reason(setup):
    settings(setup["home"], {"BeforeTool": group("echo 'blocked: not on Fridays' >&2; exit 2", "run_shell_.*")})
    with FakeGemini(shell_call("touch made.txt"), api_key=API_KEY) as fake:
        done = run(setup, fake, "--yolo", "-p", "go")
        assert done.returncode == 0, done.stderr
        assert "blocked: not on Fridays" in bodies(fake)[1]
    assert not (setup["work"] / "made.txt").exists()


def test_a_hook_that_hangs_is_killed_at_its_timeout_and_the_tool_call_goes_on(setup):
    pidfile = setup["tmp"] / "child.pid"
    settings(setup["home"], {"BeforeTool": group(f"sleep 60 & echo $! > {pidfile}; wait", name="slowpoke",
                                                 timeout=500)})
    with FakeGemini(shell_call("touch made.txt"), api_key=API_KEY) as fake:
        started = time.monotonic()
        done = run(setup, fake, "--yolo", "-p", "go")
        assert time.monotonic() - started < 30
        assert done.returncode == 0, done.stderr
    assert (setup["work"] / "made.txt").exists()
    assert "hook 'slowpoke' (BeforeTool) did not finish within 0.5 s and was killed" in done.stderr
    child = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):  # the whole process group went, not only sh
        for _ in range(50):
            os.kill(child, 0)
            time.sleep(0.1)


def test_after_tool_context_is_appended_to_the_result_the_model_reads(setup):
    out = json.dumps({"hookSpecificOutput": {"hookEventName": "AfterTool", "additionalContext": "LINT-OK-4711"}})
    settings(setup["home"], {"AfterTool": group(f"cat > /dev/null; echo '{out}'", "read_file")})
    calls = [{"function_calls": [{"name": "read_file", "args": {"file_path": "victim.txt"}}]}, {"text": "ok"}]
    with FakeGemini(calls, api_key=API_KEY) as fake:
        done = run(setup, fake, "-p", "read it")
        assert done.returncode == 0, done.stderr
        assert "precious" in bodies(fake)[1] and "LINT-OK-4711" in bodies(fake)[1]


def test_session_start_and_before_agent_context_reach_the_prompt_and_system_messages_the_user(setup):
    start = json.dumps({"systemMessage": "hello from SessionStart",
                        "hookSpecificOutput": {"additionalContext": "BRANCH=main"}})
    before = json.dumps({"hookSpecificOutput": {"additionalContext": "TODAY=friday"}})
    settings(setup["home"], {"SessionStart": group(f"echo '{start}'", "startup"),
                             "BeforeAgent": group(f"echo '{before}'")})
    with FakeGemini(api_key=API_KEY) as fake:
        done = run(setup, fake, "-p", "what day is it")
        assert done.returncode == 0, done.stderr
        body = bodies(fake)[0]
    assert "BRANCH=main" in body and "what day is it" in body and "TODAY=friday" in body
    assert "hello from SessionStart" in done.stderr


def test_a_before_agent_deny_sends_nothing_and_says_why(setup):
    settings(setup["home"], {"BeforeAgent": group(
        """echo '{"decision": "deny", "reason": "no prompts mentioning secrets"}'""")})
    with FakeGemini(api_key=API_KEY) as fake:
        done = run(setup, fake, "-p", "print the secrets")
        assert done.returncode != 0
        assert "no prompts mentioning secrets" in done.stderr
        assert bodies(fake) == []


def test_project_hooks_run_only_in_a_trusted_folder(setup):
    marker = setup["tmp"] / "ran"
    settings(setup["work"] / ".gemini", {"BeforeAgent": group(f"touch {marker}")})
    with FakeGemini(api_key=API_KEY) as fake:
        (setup["tmp"] / "trusted.json").write_text(json.dumps({str(setup["work"]): "DO_NOT_TRUST"}))
        assert run(setup, fake, "-p", "hi").returncode == 0
        assert not marker.exists()
        (setup["tmp"] / "trusted.json").write_text(json.dumps({str(setup["work"]): "TRUST_FOLDER"}))
        assert run(setup, fake, "-p", "hi").returncode == 0
        assert marker.exists()


def test_hook_environment_names_the_project_and_session(setup):
    dump = setup["tmp"] / "env.txt"
    settings(setup["home"], {"BeforeAgent": group(
        f'echo "$GEMINI_PROJECT_DIR|$CLAUDE_PROJECT_DIR|$GEMINI_CWD|$GEMINI_SESSION_ID|$HOME" > {dump}')})
    with FakeGemini(api_key=API_KEY) as fake:
        assert run(setup, fake, "-p", "hi").returncode == 0
    project, claude, cwd, session, home = dump.read_text().strip().split("|")
    assert project == claude == cwd == str(setup["work"]) and session and home == str(setup["tmp"])


# --- against a serve ----------------------------------------------------------


def test_tool_hooks_run_on_the_client_against_a_remote_serve(setup):
    guard = script(setup["home"] / "rm_guard.py", DENY_RM)
    settings(setup["home"], {"BeforeTool": group(str(guard), "run_shell_command")})
    with FakeGemini(shell_call("rm victim.txt"), api_key=API_KEY) as fake, daemon(setup["tmp"], fake) as (_p, address):
        done = run(setup, None, "--server", address, "--yolo", "-p", "tidy up")
        assert done.returncode == 0, done.stderr
        assert "Deleting files is not allowed by the rm-guard hook" in bodies(fake)[1]
    assert (setup["work"] / "victim.txt").exists()


# --- bad input ---------------------------------------------------------------------


def test_malformed_hook_entries_are_named_with_the_file_and_the_rest_still_loads(setup):
    guard = script(setup["home"] / "rm_guard.py", DENY_RM)
    path = setup["home"] / "settings.json"
    path.write_text(json.dumps({"hooks": {"BeforeTool": [{"hooks": "oops"}, *group(str(guard))],
                                          "AfterTool": 7, "BeforeEverything": []},
                                "model": {"name": "gemini-2.5-pro"}}))
    with FakeGemini(shell_call("rm victim.txt"), api_key=API_KEY) as fake:
        done = run(setup, fake, "--yolo", "-p", "tidy up")
        assert done.returncode == 0, done.stderr
        assert fake.requests[0]["path"].endswith("gemini-2.5-pro:streamGenerateContent") or \
            "gemini-2.5-pro" in fake.requests[0]["path"]
    assert f"{path}: key hooks.BeforeTool[0].hooks: expected a list of hooks" in done.stderr
    assert f"{path}: key hooks.AfterTool: expected a list of hook groups" in done.stderr
    assert f"{path}: key hooks.BeforeEverything: not a hook event" in done.stderr
    assert (setup["work"] / "victim.txt").exists()  # the good hook still ran


def test_a_hook_that_is_not_executable_is_reported_by_name_and_the_call_goes_on(setup):
    hook = script(setup["home"] / "check.sh", "#!/bin/sh\nexit 2\n", executable=False)
    settings(setup["home"], {"BeforeTool": group(str(hook), name="check")})
    with FakeGemini(shell_call("touch made.txt"), api_key=API_KEY) as fake:
        done = run(setup, fake, "--yolo", "-p", "go")
        assert done.returncode == 0, done.stderr
    assert "hook 'check' (BeforeTool): its command is not executable" in done.stderr
    assert (setup["work"] / "made.txt").exists()


def test_garbage_on_stdout_is_reported_naming_the_hook_and_ignored(setup):
    settings(setup["home"], {"BeforeTool": group("echo 'Checking…'; echo '{\"decision\": \"deny\"}'", name="chatty")})
    with FakeGemini(shell_call("touch made.txt"), api_key=API_KEY) as fake:
        done = run(setup, fake, "--yolo", "-p", "go")
        assert done.returncode == 0, done.stderr
    assert "hook 'chatty' (BeforeTool) printed something that is not a JSON object" in done.stderr
    assert (setup["work"] / "made.txt").exists()


def test_hooks_list_shows_each_event_and_where_it_came_from(setup):
    guard = script(setup["home"] / "rm_guard.py", DENY_RM)
    settings(setup["home"], {"BeforeTool": group(str(guard), "run_shell_command", name="rm-guard", timeout=5000),
                             "BeforeModel": group("true")})
    done = run(setup, None, "hooks", "list")
    assert done.returncode == 0, done.stderr
    assert "BeforeTool:\n  rm-guard  matcher 'run_shell_command'  timeout 5 s" in done.stdout
    assert f"from {setup['home'] / 'settings.json'}" in done.stdout
    assert "BeforeModel:  (not fired by gemini-split)" in done.stdout


# --- the runner ---------------------------------------------------------------------


def _run_one(command: str, timeout_ms: int = 10_000, cwd: Path = Path("/")):
    hook = HookDefinition("BeforeTool", command, name="h", timeout_ms=timeout_ms)
    return trio.run(run_hook, hook, b'{"tool_name": "x"}', dict(os.environ), cwd)


def test_a_flood_of_output_is_bounded_and_reported():
    started = time.monotonic()
    result = _run_one("head -c 50000000 /dev/zero | tr '\\0' x; echo '{}' >&2")
    assert time.monotonic() - started < 20
    assert result.output == {} and result.warning is not None
    assert f"printed more than {MAX_STDOUT_BYTES // 1024} KiB" in result.warning


def test_a_hook_that_does_not_read_stdin_is_fine_and_empty_output_is_no_opinion():
    result = _run_one("true")
    assert result.warning is None and result.output == {} and not result.blocked


def test_other_exit_statuses_are_warnings_with_the_last_stderr_line():
    result = _run_one("echo 'jq: command not found' >&2; exit 3")
    assert "exited with status 3 (jq: command not found)" in result.warning and not result.blocked


def test_parse_hooks_never_raises_on_hostile_shapes():
    for raw in ([], "x", {"BeforeTool": [None, 1, {"hooks": [None, {"type": "http"}, {"command": ""},
                                                              {"command": "x", "timeout": -1}]}]}):
        hooks, warnings = parse_hooks(raw, "somewhere")
        assert hooks == [] and warnings and all(w.startswith("gemini-split: somewhere: key hooks") for w in warnings)


def test_a_hook_that_leaves_a_background_process_holding_its_output_is_answered_at_once():
    started = time.monotonic()
    result = _run_one("""sleep 30 & echo '{"systemMessage": "left one behind"}'""", timeout_ms=20_000)
    assert time.monotonic() - started < 10
    assert result.warning is None and result.output == {"systemMessage": "left one behind"}
