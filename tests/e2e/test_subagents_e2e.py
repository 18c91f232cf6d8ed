"""Issue 32 end to end: ``gemini-split -p`` (embedded server) against the
fake Gemini server, the sub-agent definitions in the user's and the
project's ``.gemini/agents``; what each model request carried is read from
the fake's recorded request bodies (turns routed per agent by their system
instructions: ``system_contains``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

pytestmark = pytest.mark.timeout(90)

API_KEY = "agents-key"
MAIN = "You are gemini-split"


def write_agent(directory: Path, name: str, front: str, body: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.md"
    path.write_text(f"---\n{front}\n---\n{body}\n")
    return path


def run(tmp_path: Path, fake: FakeGemini, *args: str, settings: dict | None = None,
        trusted: bool = False) -> subprocess.CompletedProcess:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    if settings is not None:
        (home / "settings.json").write_text(json.dumps(settings))
    if trusted:
        (home / "trustedFolders.json").write_text(json.dumps({str(tmp_path / "proj"): "TRUST_FOLDER"}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI", "GOOGLE"))}
    env.update(HOME=str(tmp_path), GEMINI_SPLIT_HOME=str(home), GEMINI_API_KEY=API_KEY,
               GOOGLE_GEMINI_BASE_URL=fake.url)
    (tmp_path / "proj").mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-m", "gemini_split", *args], cwd=tmp_path / "proj", env=env,
                          capture_output=True, text=True, timeout=80, stdin=subprocess.DEVNULL)


def model_requests(fake: FakeGemini) -> list[dict]:
    return [r for r in fake.requests if r["action"] and r["action"].endswith("GenerateContent")]


def system_of(record: dict) -> str:
    return "".join(p.get("text", "") for p in (record["body"].get("systemInstruction") or {}).get("parts", []))


def tool_names(record: dict) -> list[str]:
    return [d["name"] for t in record["body"].get("tools", []) for d in t.get("functionDeclarations", [])]


def test_two_sub_agents_called_in_one_turn_run_at_once_each_with_its_own_prompt_model_and_tools(tmp_path):
    agents = tmp_path / "home" / "agents"
    write_agent(agents, "alpha", "name: alpha\ndescription: Alpha reads.\ntools: [read_file]\n"
                                 "model: gemini-2.5-flash-lite\ntemperature: 0.2", "You are ALPHA.")
    write_agent(agents, "beta", "name: beta\ndescription: Beta greps.\ntools: [grep_search]", "You are BETA.")
    script = [
        {"system_contains": MAIN, "function_calls": [{"name": "alpha", "args": {"query": "a"}},
                                                     {"name": "beta", "args": {"query": "b"}}]},
        {"system_contains": "ALPHA", "delay": 1.0, "text": "ALPHA-THINKS ",
         "function_calls": [{"name": "complete_task", "args": {"result": "alpha report"}}]},
        {"system_contains": "BETA", "delay": 1.0,
         "function_calls": [{"name": "complete_task", "args": {"result": "beta report"}}]},
        {"system_contains": MAIN, "text": "Both reported."},
    ]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        done = run(tmp_path, fake, "-p", "investigate")
        requests = model_requests(fake)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Both reported.\n"  # the sub-agents' own text is not the answer
    alpha = next(r for r in requests if "ALPHA" in system_of(r))
    beta = next(r for r in requests if "BETA" in system_of(r))
    # Both were asked before either answered (each answer took a second).
    assert abs(alpha["time"] - beta["time"]) < 0.9
    assert alpha["model"] == "gemini-2.5-flash-lite" and beta["model"] == requests[0]["model"]
    assert alpha["body"]["generationConfig"]["temperature"] == 0.2
    assert "temperature" not in beta["body"].get("generationConfig", {})
    assert tool_names(alpha) == ["read_file", "complete_task"]
    assert tool_names(beta) == ["grep_search", "complete_task"]
    assert "BETA" not in system_of(alpha) and "ALPHA" not in system_of(beta)
    main_last = json.dumps(requests[-1]["body"]["contents"])
    assert "alpha report" in main_last and "beta report" in main_last and "ALPHA-THINKS" not in main_last
    assert {"alpha", "beta", "codebase_investigator", "generalist"} <= set(tool_names(requests[0]))


def test_at_name_at_the_start_of_a_prompt_asks_the_model_to_delegate_to_that_agent(tmp_path):
    write_agent(tmp_path / "home" / "agents", "auditor", "name: auditor\ndescription: Audits.", "AUDITOR.")
    with FakeGemini(script=[{"text": "ok"}], api_key=API_KEY) as fake:
        done = run(tmp_path, fake, "-p", "@auditor check the login code")
        (request,) = model_requests(fake)
    assert done.returncode == 0, done.stderr
    texts = [p["text"] for p in request["body"]["contents"][-1]["parts"] if "text" in p]
    assert "@auditor check the login code" in texts
    assert any("<system_note>" in t and "explicitly selected the following agent(s): auditor" in t
               and "'auditor'" in t for t in texts)


def test_an_at_word_that_names_no_agent_gets_no_note(tmp_path):
    with FakeGemini(script=[{"text": "ok"}], api_key=API_KEY) as fake:
        run(tmp_path, fake, "-p", "@nobody hello")
        (request,) = model_requests(fake)
    assert "<system_note>" not in json.dumps(request["body"]["contents"])


def test_a_malformed_definition_is_reported_with_its_path_and_field_and_the_others_still_load(tmp_path):
    agents = tmp_path / "home" / "agents"
    bad_yaml = write_agent(agents, "broken", "name: broken\ndescription: [unclosed", "x")
    bad_field = write_agent(agents, "hot", "name: hot\ndescription: Too hot.\ntemperature: 7", "x")
    no_name = write_agent(agents, "anon", "description: Who am I?", "x")
    write_agent(agents, "good", "name: good\ndescription: Fine.\ntools: [read_file, teleport]", "GOOD.")
    with FakeGemini(script=[{"text": "ok"}], api_key=API_KEY) as fake:
        done = run(tmp_path, fake, "-p", "hi")
        (request,) = model_requests(fake)
    assert done.returncode == 0, done.stderr
    assert f"{bad_yaml}: malformed YAML frontmatter" in done.stderr
    assert f"{bad_field}: field 'temperature'" in done.stderr
    assert f"{no_name}: field 'name'" in done.stderr
    assert "field 'tools': no tool named teleport" in done.stderr
    names = tool_names(request)
    assert "good" in names and not {"broken", "hot", "anon"} & set(names)


def test_a_definition_granting_itself_more_than_the_session_allows_is_clamped_and_says_so(tmp_path):
    write_agent(tmp_path / "home" / "agents", "greedy",
                "name: greedy\ndescription: Wants all.\ntools: [read_file, run_shell_command, teleport]",
                "You are GREEDY.")
    script = [
        {"system_contains": MAIN, "function_calls": [{"name": "greedy", "args": {"query": "go"}}]},
        {"system_contains": "GREEDY", "function_calls": [{"name": "run_shell_command",
                                                          "args": {"command": "touch pwned"}}]},
        {"system_contains": "GREEDY", "function_calls": [{"name": "complete_task", "args": {"result": "r"}}]},
        {"system_contains": MAIN, "text": "done"},
    ]
    settings = {"tools": {"exclude": ["run_shell_command"]}}
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        done = run(tmp_path, fake, "-p", "go", "-o", "stream-json", "--yolo", settings=settings)
        requests = model_requests(fake)
    assert done.returncode == 0, done.stderr
    greedy = [r for r in requests if "GREEDY" in system_of(r)]
    assert tool_names(greedy[0]) == ["read_file", "complete_task"]
    refusal = greedy[1]["body"]["contents"][-1]["parts"][0]["functionResponse"]["response"]["error"]
    assert refusal["code"] == "refused" and "not granted to sub-agent greedy" in refusal["message"]
    assert not (tmp_path / "proj" / "pwned").exists()
    started = next(json.loads(line) for line in done.stdout.splitlines() if '"agent_start"' in line)
    assert set(started["refused_tools"]) == {"run_shell_command", "teleport"}


def test_project_agents_count_only_in_a_trusted_folder_and_override_the_users(tmp_path):
    write_agent(tmp_path / "home" / "agents", "helper", "name: helper\ndescription: USER-HELPER", "x")
    write_agent(tmp_path / "proj" / ".gemini" / "agents", "helper",
                "name: helper\ndescription: PROJECT-HELPER", "x")
    with FakeGemini(script=[{"text": "a"}, {"text": "b"}], api_key=API_KEY) as fake:
        run(tmp_path, fake, "-p", "hi")
        run(tmp_path, fake, "-p", "hi", trusted=True)
        untrusted, trusted = model_requests(fake)

    def description(record):
        return next(d["description"] for t in record["body"]["tools"] for d in t["functionDeclarations"]
                    if d["name"] == "helper")

    assert description(untrusted) == "USER-HELPER" and description(trusted) == "PROJECT-HELPER"


def test_agents_overrides_in_settings_disable_an_agent_and_set_its_model_and_turns(tmp_path):
    settings = {"agents": {"overrides": {
        "generalist": {"enabled": False},
        "codebase_investigator": {"modelConfig": {"model": "gemini-2.5-pro"}, "runConfig": {"maxTurns": 1}}}}}
    script = [
        {"system_contains": MAIN, "function_calls": [{"name": "codebase_investigator",
                                                      "args": {"objective": "map it"}}]},
        {"system_contains": "Codebase Investigator", "function_calls": [{"name": "glob", "args": {"pattern": "*"}}]},
        # gemini-cli's final recovery turn, past maxTurns: its answer is the report.
        {"system_contains": "Codebase Investigator", "text": "INTERRUPTED: only globbed"},
        {"system_contains": MAIN, "text": "done"},
    ]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        done = run(tmp_path, fake, "-p", "go", settings=settings)
        requests = model_requests(fake)
    assert done.returncode == 0, done.stderr
    assert "generalist" not in tool_names(requests[0])
    investigator = [r for r in requests if "Codebase Investigator" in system_of(r)]
    assert len(investigator) == 2 and investigator[0]["model"] == "gemini-2.5-pro"
    assert "<objective>\nmap it\n</objective>" in investigator[0]["body"]["contents"][0]["parts"][0]["text"]
    assert set(tool_names(investigator[0])) == {"list_directory", "read_file", "glob", "grep_search",
                                                "complete_task"}
    told = investigator[1]["body"]["contents"][-1]["parts"][-1]["text"]
    assert told.startswith("You have exceeded the maximum number of turns. You have one final chance")
    answer = requests[-1]["body"]["contents"][-1]["parts"][0]["functionResponse"]["response"]["error"]
    assert answer["code"] == "max_turns" and "INTERRUPTED: only globbed" in answer["message"]


def test_experimental_enable_agents_false_offers_no_sub_agent_at_all(tmp_path):
    """gemini-cli's switch: neither the built-ins nor the user's own."""
    write_agent(tmp_path / "home" / "agents", "alpha", "name: alpha\ndescription: Alpha reads.", "You are ALPHA.")
    with FakeGemini(script=[{"system_contains": MAIN, "text": "alone"}], api_key=API_KEY) as fake:
        done = run(tmp_path, fake, "-p", "go", settings={"experimental": {"enableAgents": False}})
        requests = model_requests(fake)
    assert done.returncode == 0, done.stderr
    offered = tool_names(requests[0])
    assert "read_file" in offered
    assert not {"alpha", "generalist", "codebase_investigator"} & set(offered)
    assert done.stdout == "alone\n"


def _wait_until_stored(state: Path, event_type: str, timeout: float = 15.0) -> None:
    """Return once the server's SQLite store in ``state`` holds an event of ``event_type``."""
    import sqlite3
    import time

    from gemini_split.server.store.sqlite import DB_NAME

    deadline = time.monotonic() + timeout
    while True:
        conn = sqlite3.connect(f"file:{state / DB_NAME}?mode=ro", uri=True)
        try:
            if conn.execute("SELECT 1 FROM events WHERE type = ?", (event_type,)).fetchone():
                return
        finally:
            conn.close()
        assert time.monotonic() < deadline, f"no {event_type} was stored in {timeout:g} s"
        time.sleep(0.02)


@pytest.mark.timeout(150)
def test_a_restart_mid_sub_agent_ends_it_interrupted_once_and_never_runs_it_again(tmp_path):
    from tests.e2e.test_serve_e2e import API_KEY as SERVE_KEY
    from tests.server.resume.test_resume_e2e import _free_port, serve

    home = tmp_path / "home"
    write_agent(home / "agents", "slowpoke", "name: slowpoke\ndescription: Slow.\ntools: [read_file]",
                "You are SLOWPOKE.")
    state, port = tmp_path / "state", _free_port()
    address = f"ws://127.0.0.1:{port}"
    script = [
        {"system_contains": MAIN, "function_calls": [{"name": "slowpoke", "args": {"query": "take your time"}}]},
        # killed in the middle of this
        {"system_contains": "SLOWPOKE", "text": "y" * 2000, "chunks": 400, "chunk_delay": 0.02},
        {"system_contains": MAIN, "text": "Fresh start."},
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI", "GOOGLE"))}
    env.update(GEMINI_SPLIT_HOME=str(home), HOME=str(tmp_path))
    with FakeGemini(script=script, api_key=SERVE_KEY) as fake:
        with serve(tmp_path, fake, state, port) as proc:
            first = subprocess.Popen(
                [sys.executable, "-m", "gemini_split", "--server", address, "-p", "go", "-o", "stream-json",
                 "--reconnect-timeout", "60"],
                cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True)
            before = []
            for line in first.stdout:  # until the sub-agent streams
                before.append(line)
                if '"agent_id":1' in line and '"content":"y' in line:
                    break
            # Killed once its start is in the store: events are written
            # just after they are shown, and a crash loses what was not yet
            # (the store's contract); under load, once, that was its start.
            _wait_until_stored(state, "agent_started")
            proc.kill()
            proc.wait()
        with serve(tmp_path, fake, state, port, name="restarted"):
            out, err = first.communicate(timeout=60)
            again = subprocess.run(
                [sys.executable, "-m", "gemini_split", "--server", address, "--resume",
                 json.loads(before[0])["session_id"], "-p", "again",
                 "-o", "stream-json"], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                text=True, timeout=60)
        requests = model_requests(fake)
    assert first.returncode == 1, (before, out, err)
    finishes = [json.loads(line) for line in out.splitlines() if '"agent_finish"' in line]
    assert [(f["agent_name"], f["outcome"]) for f in finishes] == [("slowpoke", "interrupted")]
    result = json.loads(out.splitlines()[-1])
    assert result["type"] == "result" and "interrupted" in result["error"]["message"]
    assert "Traceback" not in err
    assert again.returncode == 0, again.stdout
    assert '"agent_finish"' not in again.stdout  # said once, not again at the next request
    # Never run again: the sub-agent's one request, and the history the next
    # request sends is one the API accepts (the interrupted request left nothing).
    assert len([r for r in requests if "SLOWPOKE" in system_of(r)]) == 1
    contents = requests[-1]["body"]["contents"]
    assert [c["role"] for c in contents] == ["user"]
    assert contents[-1]["parts"][-1]["text"] == "again"


@pytest.mark.timeout(150)
def test_attach_watch_stream_json_replays_the_sub_agents_nested_under_their_call(tmp_path):
    """A late joiner (``attach --watch -o stream-json``) sees the turn as it
    was: the call of the sub-agent, its agent_started, its own events with
    its agent_id, its agent_finished, then the main agent's answer."""
    import signal
    import time

    from tests.e2e.test_serve_e2e import API_KEY as SERVE_KEY
    from tests.server.resume.test_resume_e2e import _free_port, serve

    home = tmp_path / "home"
    write_agent(home / "agents", "scout", "name: scout\ndescription: Scouts.\ntools: [list_directory]",
                "You are SCOUT.")
    port = _free_port()
    address = f"ws://127.0.0.1:{port}"
    script = [
        {"system_contains": MAIN, "function_calls": [{"name": "scout", "args": {"query": "look around"}}]},
        {"system_contains": "SCOUT", "text": "scouting ",
         "function_calls": [{"name": "list_directory", "args": {"dir_path": "."}}]},
        {"system_contains": "SCOUT", "function_calls": [{"name": "complete_task", "args": {"result": "all clear"}}]},
        {"system_contains": MAIN, "text": "Scout says all clear."},
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI", "GOOGLE"))}
    env.update(GEMINI_SPLIT_HOME=str(home), HOME=str(tmp_path))
    with FakeGemini(script=script, api_key=SERVE_KEY) as fake, \
            serve(tmp_path, fake, tmp_path / "state", port):
        done = subprocess.run([sys.executable, "-m", "gemini_split", "--server", address, "-p", "go", "--yolo"],
                              cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stdout == "Scout says all clear.\n"
        assert "scout completed" in done.stderr and "↳ scout: list_directory" in done.stderr
        watcher = subprocess.Popen(
            [sys.executable, "-m", "gemini_split", "--server", address, "attach", "latest", "--watch",
             "-o", "stream-json", "--limit", "1"],
            cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        events = []
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                line = watcher.stdout.readline()
                assert line, watcher.stderr.read()
                events.append(json.loads(line))
                if events[-1]["type"] == "finished":
                    break
            watcher.send_signal(signal.SIGINT)
            watcher.wait(timeout=20)
        finally:
            if watcher.poll() is None:
                watcher.kill()
    kinds = [(e["type"], e.get("agent_id", 0)) for e in events]
    call = next(e for e in events if e["type"] == "tool_started" and e["tool"] == "scout")
    started = next(e for e in events if e["type"] == "agent_started")
    assert started["parent_call_id"] == call["call_id"] and started["agent_id"] == 1 and started["name"] == "scout"
    assert ("text_delta", 1) in kinds and ("tool_execution_request", 1) in kinds
    finished = next(e for e in events if e["type"] == "agent_finished")
    assert finished["outcome"] == "completed" and finished["summary"] == "all clear"
    order = [k for k in kinds if k[0] in ("tool_started", "agent_started", "agent_finished", "tool_completed")]
    assert order[:2] == [("tool_started", 0), ("agent_started", 1)] and order[-2:] == [("agent_finished", 1),
                                                                                         ("tool_completed", 0)]
    assert all(e.get("replayed") for e in events)
