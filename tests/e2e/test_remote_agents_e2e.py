"""Issue 32, remote (Agent2Agent) sub-agents end to end: ``gemini-split -p``
against the fake Gemini server, the remote agent a real A2A server (the
official ``a2a-sdk`` under uvicorn, ``tests/a2a_peer.py``) in a subprocess.
The client makes the A2A call (the credentials are the client's); the
server sees the agent's name, card description and URL only."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import ExitStack, contextmanager
from importlib.util import find_spec
from pathlib import Path

import pytest

from gemini_split.testing.fake_gemini import FakeGemini
from tests.e2e.test_subagents_e2e import API_KEY, MAIN, model_requests, run, tool_names

# Only the peer's own process imports the SDK's server (seconds of imports in
# every test process that collected this file, were it imported here).
if not all(find_spec(name) for name in ("a2a.server.routes", "starlette", "uvicorn")):
    pytest.skip("the remote agent tests need a2a-sdk[http-server] and uvicorn (the [test] extra)",
                allow_module_level=True)
pytestmark = pytest.mark.timeout(120)

PEER = Path(__file__).resolve().parent.parent / "a2a_peer.py"
SECRET = "s3cr3t-from-the-environment"


@contextmanager
def a2a_peer(tmp_path: Path, mode: str = "echo"):
    """The A2A server; yields ``(base URL, read_log)``."""
    port_file, log = tmp_path / f"peer-{mode}.port", tmp_path / f"peer-{mode}.log"
    log.touch()
    proc = subprocess.Popen([sys.executable, str(PEER), str(port_file), str(log), mode],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text()):
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "the A2A peer did not start within 60 s"
            time.sleep(0.05)
        yield (f"http://127.0.0.1:{port_file.read_text()}",
               lambda: [json.loads(line) for line in log.read_text().splitlines()])
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def a2a_peers(tmp_path_factory):
    """This module's A2A servers, one per mode, each started on first use
    and shared by the tests after it (a peer is a few seconds of CPU to
    start): ``with a2a_peers(mode) as (base URL, read_log)``, ``read_log()``
    giving what the peer logged since the ``with`` began."""
    started: dict[str, tuple] = {}
    with ExitStack() as stack:
        @contextmanager
        def peer(mode: str = "echo"):
            if mode not in started:
                started[mode] = stack.enter_context(a2a_peer(tmp_path_factory.mktemp(f"a2a-{mode}"), mode))
            base, read_all = started[mode]
            before = len(read_all())
            yield base, lambda: read_all()[before:]

        yield peer


def write(directory: Path, name: str, front: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.md"
    path.write_text(f"---\n{front}\n---\n")
    return path


def card_json(url: str, *, streaming: bool = False) -> str:
    card = {"protocolVersion": "0.3.0", "name": "Inline", "description": "An inline card.", "version": "1",
            "url": url, "capabilities": {"streaming": streaming}}
    return "agent_card_json: '" + json.dumps(card) + "'"


def dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/rpc"


def script_delegating(query: str, answer: str = "Done.") -> list[dict]:
    return [
        {"system_contains": MAIN, "function_calls": [{"name": "peer", "args": {"query": query}}]},
        {"system_contains": MAIN, "text": answer},
    ]


def events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def test_the_main_model_delegates_to_a_remote_agent_and_its_answer_is_the_report(a2a_peers, tmp_path, monkeypatch):
    from tests.e2e.test_serve_e2e import API_KEY as SERVE_KEY
    from tests.server.resume.test_resume_e2e import _free_port, serve

    home, state = tmp_path / "home", tmp_path / "state"
    port = _free_port()
    with a2a_peers() as (base, peer_log):
        write(home / "agents", "peer", f"kind: remote\nname: peer\n"
                                       f"agent_card_url: {base}/.well-known/agent-card.json\n"
                                       "auth:\n  type: apiKey\n  key: $PEER_KEY")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI", "GOOGLE"))}
        env.update(GEMINI_SPLIT_HOME=str(home), HOME=str(tmp_path), PEER_KEY=SECRET)
        with FakeGemini(script=script_delegating("summarize the ledger", "The peer echoed."),
                        api_key=SERVE_KEY) as fake, serve(tmp_path, fake, state, port):
            done = subprocess.run(
                [sys.executable, "-m", "gemini_split", "--server", f"ws://127.0.0.1:{port}", "-p", "go",
                 "-o", "stream-json", "--yolo"], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                capture_output=True, text=True, timeout=90)
            requests = model_requests(fake)
        log = peer_log()
    assert done.returncode == 0, done.stderr
    # The peer got the task, with the key from $PEER_KEY in its header.
    assert "summarize the ledger" in [r.get("task") for r in log]
    calls = [r for r in log if r.get("path") == "/rpc"]
    assert calls and all(r["x-api-key"] == SECRET for r in calls)
    # The card's description is what the main model was offered.
    first = requests[0]["body"]
    declared = {d["name"]: d for t in first.get("tools", []) for d in t.get("functionDeclarations", [])}
    assert declared["peer"]["description"] == "Echoes what it is told, as a remote agent."
    # Its answer is the report the main model reads next.
    assert "echo: summarize the ledger" in json.dumps(requests[-1]["body"]["contents"])
    seen = events(done.stdout)
    start = next(e for e in seen if e["type"] == "agent_start")
    assert start["agent_name"] == "peer" and start["agent_id"] != 0
    texts = [e for e in seen if e.get("agent_id") == start["agent_id"] and e["type"] == "message"]
    assert any("echo: summarize the ledger" in e.get("content", "") for e in texts)
    finish = next(e for e in seen if e["type"] == "agent_finish")
    assert finish["outcome"] == "completed"
    # The key never reached the server: nothing it stored or sent has it.
    stored = b"".join(p.read_bytes() for p in state.rglob("*") if p.is_file())
    assert stored and SECRET.encode() not in stored
    assert SECRET not in done.stdout and SECRET not in done.stderr
    assert b"PEER_KEY" not in stored  # not even the name of the variable (no auth material at all)


def test_a_streaming_remote_agent_with_command_auth_streams_its_task_and_artifact(a2a_peers, tmp_path):
    marker = tmp_path / "ran"
    with a2a_peers("stream") as (base, peer_log):
        write(tmp_path / "home" / "agents", "peer",
              f"kind: remote\nname: peer\nagent_card_url: {base}/.well-known/agent-card.json\n"
              f"auth:\n  type: http\n  scheme: Bearer\n  token: '!touch {marker} && echo from-command'")
        with FakeGemini(script=script_delegating("stream it"), api_key=API_KEY) as fake:
            done = run(tmp_path, fake, "-p", "go", "--yolo", "-o", "stream-json")
            requests = model_requests(fake)
        log = peer_log()
    assert done.returncode == 0, done.stderr
    assert marker.exists()  # the command ran here, on the client
    assert [r["authorization"] for r in log if r.get("path") == "/rpc"] == ["Bearer from-command"]
    report = json.dumps(requests[-1]["body"]["contents"])
    assert "done: stream it" in report  # the task's artifact is the report
    seen = events(done.stdout)
    start = next(e for e in seen if e["type"] == "agent_start")
    said = [e["content"] for e in seen if e["type"] == "message" and e.get("agent_id") == start["agent_id"]]
    # What it said came as it said it (tool_progress → the sub-agent's text), once.
    assert "".join(said) == "part 1\n\npart 2\n\ndone: stream it" and len(said) == 3
    finish = next(e for e in seen if e["type"] == "agent_finish")
    assert finish["outcome"] == "completed"
    assert seen.index(finish) > max(i for i, e in enumerate(seen) if e in said or e.get("content") in said)


def test_a_dead_remote_agent_ends_the_sub_agent_with_a_clear_outcome_and_the_session_goes_on(tmp_path):
    write(tmp_path / "home" / "agents", "peer", f"kind: remote\nname: peer\n{card_json(dead_url())}")
    with FakeGemini(script=script_delegating("anyone there?", "The peer is down."), api_key=API_KEY) as fake:
        done = run(tmp_path, fake, "-p", "go", "--yolo", "-o", "stream-json")
        requests = model_requests(fake)
    assert done.returncode == 0, done.stderr
    finish = next(e for e in events(done.stdout) if e["type"] == "agent_finish")
    assert finish["outcome"] == "error" and "could not be reached" in finish.get("summary", "")
    assert "could not be reached" in json.dumps(requests[-1]["body"]["contents"])
    assert events(done.stdout)[-1]["type"] == "result"
    assert "The peer is down." in done.stdout


def test_a_slow_remote_agent_ends_at_its_timeout_and_the_session_goes_on(a2a_peers, tmp_path):
    with a2a_peers("slow") as (base, _):
        write(tmp_path / "home" / "agents", "peer", f"kind: remote\nname: peer\ntimeout_mins: 0.05\n"
                                                    f"agent_card_url: {base}/.well-known/agent-card.json")
        with FakeGemini(script=script_delegating("take your time", "Gave up."), api_key=API_KEY) as fake:
            began = time.monotonic()
            done = run(tmp_path, fake, "-p", "go", "--yolo", "-o", "stream-json")
            took = time.monotonic() - began
    assert done.returncode == 0, done.stderr
    finish = next(e for e in events(done.stdout) if e["type"] == "agent_finish")
    assert finish["outcome"] == "timeout" and "did not answer within 3 seconds" in finish.get("summary", "")
    assert "Gave up." in done.stdout and took < 60


def test_a_remote_task_still_running_at_the_timeout_is_cancelled_there(a2a_peers, tmp_path):
    """The call is over: the agent is told (A2A ``tasks/cancel``) and stops
    working on the task, rather than on for the hour it would take."""
    with a2a_peers("slowstream") as (base, read_log):
        write(tmp_path / "home" / "agents", "peer", f"kind: remote\nname: peer\ntimeout_mins: 0.05\n"
                                                    f"agent_card_url: {base}/.well-known/agent-card.json")
        with FakeGemini(script=script_delegating("take your time", "Gave up."), api_key=API_KEY) as fake:
            done = run(tmp_path, fake, "-p", "go", "--yolo", "-o", "stream-json")
        deadline = time.monotonic() + 10
        while not any("cancelled" in r for r in read_log()) and time.monotonic() < deadline:
            time.sleep(0.05)
        log = read_log()
    assert done.returncode == 0, done.stderr
    finish = next(e for e in events(done.stdout) if e["type"] == "agent_finish")
    assert finish["outcome"] == "timeout"
    started = [r["started"] for r in log if "started" in r]
    assert len(started) == 1 and [r["cancelled"] for r in log if "cancelled" in r] == started
    assert "Gave up." in done.stdout


def test_a_remote_agent_answering_too_much_is_stopped_and_the_session_goes_on(a2a_peers, tmp_path):
    with a2a_peers("huge") as (base, _):
        write(tmp_path / "home" / "agents", "peer",
              f"kind: remote\nname: peer\nagent_card_url: {base}/.well-known/agent-card.json")
        with FakeGemini(script=script_delegating("say a lot", "Too much."), api_key=API_KEY) as fake:
            done = run(tmp_path, fake, "-p", "go", "--yolo", "-o", "stream-json")
            requests = model_requests(fake)
    assert done.returncode == 0, done.stderr
    finish = next(e for e in events(done.stdout) if e["type"] == "agent_finish")
    assert finish["outcome"] == "error" and "more than 1 MiB" in finish.get("summary", "")
    assert len(json.dumps(requests[-1]["body"])) < 100_000  # none of it reached the model


def test_bad_remote_definitions_are_reported_with_path_and_field_and_the_others_still_load(tmp_path):
    agents = tmp_path / "home" / "agents"
    no_url = write(agents, "nourl", "kind: remote\nname: nourl")
    both = write(agents, "both", f"kind: remote\nname: both\nagent_card_url: http://x.invalid/\n"
                                 f"{card_json('http://x.invalid/rpc')}")
    bad_json = write(agents, "badjson", "kind: remote\nname: badjson\nagent_card_json: '{not json'")
    ftp = write(agents, "ftp", "kind: remote\nname: ftp\nagent_card_url: ftp://example.com/card")
    oauth = write(agents, "oauth", f"kind: remote\nname: oauth\n{card_json('http://x.invalid/rpc')}\n"
                                   "auth:\n  type: oauth\n  client_id: abc")
    listed = write(agents, "several", f"- kind: remote\n  name: good-one\n  {card_json('http://a.invalid/rpc')}\n"
                                      f"- kind: remote\n  name: bad-one\n  agent_card_url: file:///etc/passwd\n"
                                      f"- kind: remote\n  name: good-two\n  {card_json('http://b.invalid/rpc')}")
    with FakeGemini(script=[{"text": "ok"}], api_key=API_KEY) as fake:
        done = run(tmp_path, fake, "-p", "hi")
        (request,) = model_requests(fake)
    assert done.returncode == 0, done.stderr
    assert f"{no_url}: remote agent nourl: field 'agent_card_url' (or 'agent_card_json') is required" in done.stderr
    assert f"{both}: remote agent both: give 'agent_card_url' or 'agent_card_json', not both" in done.stderr
    assert f"{bad_json}: field 'agent_card_json': the agent card is not valid JSON" in done.stderr
    assert f"{ftp}: field 'agent_card_url' must be an http:// or https:// URL" in done.stderr
    assert f"{oauth}: field 'auth.type': oauth is not supported" in done.stderr
    assert f"{listed}: field 'agent_card_url' must be an http:// or https:// URL" in done.stderr
    names = set(tool_names(request))
    assert {"good-one", "good-two"} <= names
    assert not {"nourl", "both", "badjson", "ftp", "oauth", "bad-one"} & names


def test_delegating_to_a_remote_agent_asks_first_and_nobody_to_ask_refuses_naming_it(a2a_peers, tmp_path):
    with a2a_peers() as (base, peer_log):
        write(tmp_path / "home" / "agents", "peer",
              f"kind: remote\nname: peer\nagent_card_url: {base}/.well-known/agent-card.json")
        with FakeGemini(script=script_delegating("please"), api_key=API_KEY) as fake:
            done = run(tmp_path, fake, "-p", "go", "-o", "stream-json")  # default approval mode, no terminal
            requests = model_requests(fake)
        log = peer_log()
    assert done.returncode == 0, done.stderr
    assert not [r for r in log if r.get("path") == "/rpc"]  # never called
    said = json.dumps(requests[-1]["body"]["contents"])
    assert "peer needs the user's approval" in said


def test_a_session_whose_tools_run_on_the_server_offers_no_remote_agent(tmp_path):
    from tests.e2e.test_serve_e2e import API_KEY as SERVE_KEY, daemon
    from tests.server.server_tools.helpers import unix_listener

    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    write(home / "agents", "peer", f"kind: remote\nname: peer\n{card_json('http://a.invalid/rpc')}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI", "GOOGLE"))}
    env.update(GEMINI_SPLIT_HOME=str(home), HOME=str(tmp_path))
    with FakeGemini(script=[{"text": "ok"}], api_key=SERVE_KEY) as fake, unix_listener() as listen, \
            daemon(tmp_path, fake, "--server-tools", "--sandbox", "none", "--workspace-root",
                   str(tmp_path / "workspaces"), "--project", f"proj={project}", *listen) as (_proc, address):
        done = subprocess.run(
            [sys.executable, "-m", "gemini_split", "--server", address, "--tools", "server",
             "--project", "proj", "-p", "hi"], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
            capture_output=True, text=True, timeout=90)
        (request,) = model_requests(fake)
    assert done.returncode == 0, done.stderr
    assert "peer" not in tool_names(request) and "generalist" in tool_names(request)


def test_a_second_call_of_a_remote_agent_goes_on_with_the_same_conversation(a2a_peers, tmp_path):
    with a2a_peers() as (base, peer_log):
        write(tmp_path / "home" / "agents", "peer",
              f"kind: remote\nname: peer\nagent_card_url: {base}/.well-known/agent-card.json")
        script = [
            {"system_contains": MAIN, "function_calls": [{"name": "peer", "args": {"query": "first"}}]},
            {"system_contains": MAIN, "function_calls": [{"name": "peer", "args": {"query": "second"}}]},
            {"system_contains": MAIN, "text": "Both."},
        ]
        with FakeGemini(script=script, api_key=API_KEY) as fake:
            done = run(tmp_path, fake, "-p", "go", "--yolo")
        tasks = [r for r in peer_log() if "task" in r]
    assert done.returncode == 0, done.stderr
    assert [t["task"] for t in tasks] == ["first", "second"]
    assert tasks[0]["context_id"] and tasks[1]["context_id"] == tasks[0]["context_id"]


def test_a_remote_agent_longer_than_the_servers_tool_timeout_ends_with_its_own_timeout_message(a2a_peers, tmp_path):
    """The server waits a remote agent's call for its ``timeout_mins`` (plus a
    margin), not its ``--tool-timeout``: the client's own "did not answer
    within 3 seconds" is the outcome, not the server's "the client did not
    answer within 1 seconds"."""
    from tests.e2e.test_serve_e2e import API_KEY as SERVE_KEY
    from tests.server.resume.test_resume_e2e import _free_port, serve

    home, state = tmp_path / "home", tmp_path / "state"
    port = _free_port()
    with a2a_peers("slow") as (base, _):
        write(home / "agents", "peer", f"kind: remote\nname: peer\ntimeout_mins: 0.05\n"
                                       f"agent_card_url: {base}/.well-known/agent-card.json")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI", "GOOGLE"))}
        env.update(GEMINI_SPLIT_HOME=str(home), HOME=str(tmp_path))
        with FakeGemini(script=script_delegating("take your time", "Gave up."), api_key=SERVE_KEY) as fake, \
                serve(tmp_path, fake, state, port, "--tool-timeout", "1"):
            done = subprocess.run(
                [sys.executable, "-m", "gemini_split", "--server", f"ws://127.0.0.1:{port}", "-p", "go",
                 "-o", "stream-json", "--yolo"], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                capture_output=True, text=True, timeout=90)
            requests = model_requests(fake)
    assert done.returncode == 0, done.stderr
    finish = next(e for e in events(done.stdout) if e["type"] == "agent_finish")
    assert finish["outcome"] == "timeout", finish
    assert "the remote agent peer did not answer within 3 seconds" in finish.get("summary", ""), finish
    assert "the client did not answer" not in json.dumps(requests[-1]["body"]["contents"])
    assert "Gave up." in done.stdout
