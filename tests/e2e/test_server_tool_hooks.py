"""Issue 29 §4: the user's BeforeTool/AfterTool hooks see the tools a
server runs (``--tools server``). A real ``gemini-split serve
--server-tools`` (its tools in an allowlisted project, the fake Gemini
server behind it) and a real client process with gemini-cli's hooks in its
settings: the server asks the client (``hook_request``, protocol 1.4), the
hooks run here, and their verdict decides what runs there and what the
model reads (the fake's recorded requests)."""

from __future__ import annotations

import json
import sys
import time

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from tests.client.test_hooks import DENY_RM, bodies, group, run, script, settings, setup, shell_call  # noqa: F401
from tests.e2e.test_serve_e2e import API_KEY, daemon
from tests.server.server_tools.helpers import unix_listener

pytestmark = pytest.mark.timeout(90)


def _serve(setup: dict, fake: FakeGemini, listen: tuple[str, ...]):
    """``serve --server-tools`` whose project ``proj`` is ``setup["project"]``."""
    project = setup["tmp"] / "project"
    project.mkdir(exist_ok=True)
    (project / "victim.txt").write_text("precious\n")
    setup["project"] = project
    return daemon(setup["tmp"], fake, "--server-tools", "--sandbox", "none",
                  "--workspace-root", str(setup["tmp"] / "workspaces"), "--project", f"proj={project}", "--max-approval-mode", "yolo", *listen)


def _client(setup: dict, address: str, *args: str):
    return run(setup, None, "--server", address, "--tools", "server", "--project", "proj", *args)


def test_a_before_tool_hook_denies_rm_and_the_server_never_runs_it(setup):
    guard = script(setup["home"] / "rm_guard.py", DENY_RM)
    settings(setup["home"], {"BeforeTool": group(str(guard), "run_shell_command", name="rm-guard", timeout=10000)})
    with FakeGemini(shell_call("rm victim.txt"), api_key=API_KEY) as fake, unix_listener() as listen, \
            _serve(setup, fake, listen) as (_p, address):
        done = _client(setup, address, "--yolo", "-p", "tidy up")
        assert done.returncode == 0, done.stderr
        assert "Deleting files is not allowed by the rm-guard hook" in bodies(fake)[1]
    assert (setup["project"] / "victim.txt").read_text() == "precious\n"
    assert "do not run" not in done.stderr
    event = json.loads((setup["home"] / "rm_guard.py.log").read_text().splitlines()[0])
    # gemini-cli's input; the common fields are the client's own
    assert event["hook_event_name"] == "BeforeTool" and event["tool_name"] == "run_shell_command"
    assert event["tool_input"] == {"command": "rm victim.txt"} and event["cwd"] == str(setup["work"])
    assert event["session_id"] and event["timestamp"]


def test_after_tool_context_reaches_the_next_model_request(setup):
    out = json.dumps({"hookSpecificOutput": {"hookEventName": "AfterTool", "additionalContext": "LINT-OK-4711"}})
    settings(setup["home"], {"AfterTool": group(f"cat > /dev/null; echo '{out}'", "read_file")})
    calls = [{"function_calls": [{"name": "read_file", "args": {"file_path": "victim.txt"}}]}, {"text": "ok"}]
    with FakeGemini(calls, api_key=API_KEY) as fake, unix_listener() as listen, \
            _serve(setup, fake, listen) as (_p, address):
        done = _client(setup, address, "-p", "read it")
        assert done.returncode == 0, done.stderr
        assert "precious" in bodies(fake)[1] and "LINT-OK-4711" in bodies(fake)[1]


def test_a_hook_that_times_out_is_killed_here_and_the_call_goes_on_there(setup):
    settings(setup["home"], {"BeforeTool": group("sleep 30", name="slowpoke", timeout=500)})
    with FakeGemini(shell_call("touch made.txt"), api_key=API_KEY) as fake, unix_listener() as listen, \
            _serve(setup, fake, listen) as (_p, address):
        started = time.monotonic()
        done = _client(setup, address, "--yolo", "-p", "go")
        assert time.monotonic() - started < 30
        assert done.returncode == 0, done.stderr
    assert "hook 'slowpoke' (BeforeTool) did not finish within 0.5 s and was killed" in done.stderr
    assert (setup["project"] / "made.txt").exists()


#: A server of protocol 1.3 on stdio: it answers one prompt with "hi".
OLD_SERVER = r'''
import itertools, json, sys
ids = itertools.count(1)
def send(**m):
    print(json.dumps({"id": "s-%d" % next(ids), "timestamp": 1, **m}), flush=True)
for line in sys.stdin:
    m = json.loads(line)
    if m["type"] == "hello":
        send(type="connected", protocol_version="1.3", session_id="s-old", server="old/1.3",
             capabilities=["server_tools"])
    elif m["type"] == "generate_content_request":
        rid = m["id"]
        send(type="request_started", seq=1, request_id=rid, prompt=m["prompt"])
        send(type="text_delta", seq=2, request_id=rid, content="hi")
        send(type="finished", seq=3, request_id=rid)
'''


def test_a_server_older_than_1_4_runs_its_tools_without_hooks_and_the_user_is_told_once(setup):
    settings(setup["home"], {"BeforeTool": group("exit 2")})
    old = setup["tmp"] / "old_server.py"
    old.write_text(OLD_SERVER)
    done = run(setup, None, "--server", f"stdio:{sys.executable} {old}", "--tools", "server", "-p", "hi")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "hi"
    line = ("BeforeTool and AfterTool hooks do not run for the tools the server runs (--tools server): "
            "this server speaks protocol 1.3")
    assert done.stderr.count(line) == 1, done.stderr


def test_without_tool_hooks_nothing_is_said(setup):
    settings(setup["home"], {"BeforeAgent": group("true")})
    with FakeGemini([{"text": "hi"}], api_key=API_KEY) as fake, unix_listener() as listen, \
            _serve(setup, fake, listen) as (_p, address):
        done = _client(setup, address, "-p", "hi")
        assert done.returncode == 0, done.stderr
    assert "hooks" not in done.stderr


# --- the tools the server answers in every session --------------------------------

SEARCH = {"function_calls": [{"name": "google_web_search", "args": {"query": "trio nurseries"}}]}


def test_a_before_tool_hook_sees_and_denies_the_servers_web_search_in_embedded_mode(setup):
    log = setup["tmp"] / "seen.jsonl"
    settings(setup["home"], {"BeforeTool": group(
        f"""tee -a {log} > /dev/null; echo '{{"decision": "deny", "reason": "no searching today"}}'""",
        "google_web_search")})
    with FakeGemini([SEARCH, {"text": "Done."}], api_key=API_KEY) as fake:
        done = run(setup, fake, "-p", "what is trio?")
        assert done.returncode == 0, done.stderr
        assert len(bodies(fake)) == 2  # no grounded search request went out
        assert "no searching today" in bodies(fake)[1] and "hook_denied" in bodies(fake)[1]
    event = json.loads(log.read_text().splitlines()[0])
    assert (event["tool_name"], event["tool_input"]) == ("google_web_search", {"query": "trio nurseries"})


def test_after_tool_context_is_appended_to_the_servers_web_search_results_against_a_serve(setup):
    out = json.dumps({"hookSpecificOutput": {"additionalContext": "CHECKED-BY-HOOK"}})
    settings(setup["home"], {"AfterTool": group(f"cat > /dev/null; echo '{out}'", "google_web_search")})
    with FakeGemini([SEARCH, {"text": "Trio is a library."}, {"text": "Done."}], api_key=API_KEY) as fake, \
            daemon(setup["tmp"], fake) as (_p, address):
        done = run(setup, None, "--server", address, "-p", "what is trio?")
        assert done.returncode == 0, done.stderr
        last = bodies(fake)[-1]
    assert "Trio is a library." in last and "CHECKED-BY-HOOK" in last
