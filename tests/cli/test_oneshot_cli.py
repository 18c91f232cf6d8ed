"""One-shot mode end to end: the real CLI (in this process, and a few times
as a real subprocess), the real google-genai client, a local fake Gemini
server speaking the REST wire format. What a script piping prompts through
gemini-split would see."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time


from gemini_split.testing.fake_gemini import FakeGemini

from tests.inprocess import cli

API_KEY = "test-key-123"


def run_cli(args, *, cwd, fake=None, stdin="", env_extra=None, timeout=60, drop=(), in_process=True):
    """The CLI in this process (tests/inprocess.py), or with
    ``in_process=False`` as a real subprocess: a few tests keep doing that."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_"))}
    env["GEMINI_API_KEY"] = API_KEY
    if fake is not None:
        env["GOOGLE_GEMINI_BASE_URL"] = fake.url
    env.update(env_extra or {})
    for name in drop:
        env.pop(name, None)
    if in_process:
        return cli(args, environ=env, cwd=cwd, stdin=stdin)
    return subprocess.run(
        [sys.executable, "-m", "gemini_split", *args],
        cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=timeout,
    )


def _function_responses(fake) -> list[dict]:
    out = []
    for request in fake.requests:
        for content in request["body"].get("contents", []):
            for part in content.get("parts", []):
                if "functionResponse" in part:
                    out.append(part["functionResponse"])
    return out


def test_streamed_text_arrives_whole_and_in_order(tmp_path):
    text = "".join(f"chunk{i:02d} " for i in range(50))
    with FakeGemini(script=[{"text": text, "chunks": 50}], api_key=API_KEY) as fake:
        result = run_cli(["-p", "count"], cwd=tmp_path, fake=fake, in_process=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout == text + "\n"
    assert fake.requests[0]["model"] == "gemini-2.5-flash"


def test_read_file_runs_on_the_client_and_its_content_reaches_the_model(tmp_path):
    (tmp_path / "notes.txt").write_text("Remember: the demo is on Friday.\n")
    script = [{"function_calls": [{"name": "read_file", "args": {"file_path": "notes.txt"}}]}]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        result = run_cli(["-p", "Read notes.txt and summarise it"], cwd=tmp_path, fake=fake)
    assert result.returncode == 0, result.stderr
    (response,) = _function_responses(fake)
    assert response["name"] == "read_file"
    assert response["response"] == {"output": "Remember: the demo is on Friday.\n"}
    # Echo mode answered with what it received: the content made the round trip.
    assert "the demo is on Friday" in result.stdout
    assert "read_file" in result.stderr  # progress goes to stderr, not stdout


def test_json_output_is_one_object_with_response_stats_and_error(tmp_path):
    (tmp_path / "a.txt").write_text("alpha\n")
    script = [
        {"function_calls": [{"name": "read_file", "args": {"file_path": "a.txt"}}]},
        {"text": "It says alpha.", "chunks": 3},
    ]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        result = run_cli(["-p", "what is in a.txt?", "--output-format", "json"], cwd=tmp_path, fake=fake)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["response"] == "It says alpha."
    assert "error" not in out  # gemini-cli writes no error key on success
    model_stats = out["stats"]["models"]["gemini-2.5-flash"]
    assert model_stats["api"]["totalRequests"] == 2
    assert model_stats["tokens"]["total"] > 0
    read_file = out["stats"]["tools"]["byName"]["read_file"]
    assert {k: read_file[k] for k in ("count", "success", "fail")} == {"count": 1, "success": 1, "fail": 0}
    assert read_file["decisions"] == {"accept": 1, "reject": 0, "modify": 0, "auto_accept": 0}  # as gemini-cli


def test_stream_json_is_one_event_per_line_with_gemini_cli_names(tmp_path):
    (tmp_path / "a.txt").write_text("alpha\n")
    script = [
        {"text": "Looking. ", "function_calls": [{"name": "read_file", "args": {"file_path": "a.txt"}}]},
        {"text": "Found alpha.", "chunks": 2},
    ]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        result = run_cli(["-p", "go", "-o", "stream-json"], cwd=tmp_path, fake=fake)
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    kinds = [e["type"] for e in events]
    assert kinds[0] == "init" and kinds[-1] == "result"
    assert {"message", "tool_use", "tool_result"} <= set(kinds)
    assert all("timestamp" in e for e in events)
    tool_use = next(e for e in events if e["type"] == "tool_use")
    tool_result = next(e for e in events if e["type"] == "tool_result")
    assert tool_use["tool_name"] == "read_file" and tool_use["parameters"] == {"file_path": "a.txt"}
    assert tool_result["tool_id"] == tool_use["tool_id"] and tool_result["status"] == "success"
    assert tool_result["output"] == "alpha\n"
    assistant = "".join(e["content"] for e in events if e["type"] == "message" and e["role"] == "assistant")
    assert assistant == "Looking. Found alpha."
    assert events[-1]["status"] == "success" and events[-1]["stats"]["tool_calls"] == 1


def test_a_missing_key_is_a_clear_message_and_exit_41_before_anything_happens(tmp_path):
    with FakeGemini(script=[{"text": "never"}]) as fake:
        result = run_cli(["-p", "hi"], cwd=tmp_path, fake=fake, drop=("GEMINI_API_KEY",), in_process=False)
    assert result.returncode == 41
    assert "GEMINI_API_KEY" in result.stderr
    assert result.stdout == ""
    assert fake.requests == []


def test_a_rejected_key_is_reported_as_an_auth_problem(tmp_path):
    with FakeGemini(script=[{"text": "never"}], api_key="the-right-key") as fake:
        result = run_cli(["-p", "hi", "-o", "json"], cwd=tmp_path, fake=fake)
    assert result.returncode == 41
    out = json.loads(result.stdout)
    assert out["error"]["type"] == "model_auth"
    assert "API key" in out["error"]["message"]


def test_an_unreachable_endpoint_fails_fast_with_a_clear_error(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: nothing listens
    start = time.monotonic()
    result = run_cli(["-p", "hi"], cwd=tmp_path, env_extra={"GOOGLE_GEMINI_BASE_URL": f"http://127.0.0.1:{port}"})
    assert result.returncode == 1
    assert "cannot reach the Gemini API" in result.stderr
    assert time.monotonic() - start < 20


def test_503_then_success_retries_and_succeeds(tmp_path):
    script = [{"error": {"status": 503, "message": "The model is overloaded"}}, {"text": "recovered"}]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        result = run_cli(["-p", "hi"], cwd=tmp_path, fake=fake)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "recovered\n"
    assert "retry 2/10 in " in result.stderr and "503" in result.stderr
    assert len(fake.requests) == 2


def test_piped_stdin_joins_the_prompt_and_alone_is_the_prompt(tmp_path):
    with FakeGemini(api_key=API_KEY) as fake:  # no script: the fake echoes the prompt
        with_p = run_cli(["-p", "explain this"], cwd=tmp_path, fake=fake, stdin="def f(): pass\n")
        alone = run_cli([], cwd=tmp_path, fake=fake, stdin="just stdin\n")
    assert with_p.returncode == 0, with_p.stderr
    assert with_p.stdout == "Echo: def f(): pass\n\nexplain this\n"
    assert alone.returncode == 0, alone.stderr
    assert alone.stdout == "Echo: just stdin\n"


def test_empty_input_is_bad_input(tmp_path):
    result = run_cli([], cwd=tmp_path, stdin="")
    assert result.returncode == 42
    assert "no prompt" in result.stderr


def test_usage_errors_exit_2_with_the_usage_line(tmp_path):
    result = run_cli(["-p", "x", "--output-format", "yaml"], cwd=tmp_path, in_process=False)
    assert result.returncode == 2
    assert "invalid choice: 'yaml'" in result.stderr and "usage:" in result.stderr


def test_the_turn_limit_exits_53(tmp_path):
    loop = {"function_calls": [{"name": "list_directory", "args": {"dir_path": "."}}]}
    with FakeGemini(script=[loop] * 5, api_key=API_KEY) as fake:
        result = run_cli(["-p", "loop", "--max-turns", "2"], cwd=tmp_path, fake=fake)
    assert result.returncode == 53
    assert "2 model turns" in result.stderr


def test_tools_stay_inside_the_workspace(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "secret.txt").write_text("TOP SECRET")
    script = [{"function_calls": [{"name": "read_file", "args": {"file_path": "../secret.txt"}}]}]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        result = run_cli(["-p", "read ../secret.txt", "--workspace", str(workspace)], cwd=tmp_path, fake=fake)
    assert result.returncode == 0, result.stderr
    (response,) = _function_responses(fake)
    assert response["response"]["error"]["code"] == "outside_workspace"
    assert "TOP SECRET" not in json.dumps(fake.requests)


def test_ctrl_c_cancels_the_turn_cleanly_and_exits_130(tmp_path):
    script = [{"text": "x" * 200, "chunks": 200, "chunk_delay": 0.1}]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_"))}
        env.update(GEMINI_API_KEY=API_KEY, GOOGLE_GEMINI_BASE_URL=fake.url)
        proc = subprocess.Popen(
            [sys.executable, "-m", "gemini_split", "-p", "long answer"], cwd=tmp_path, env=env,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        try:
            assert proc.stdout.read(1) == "x"  # streaming has begun
            proc.send_signal(signal.SIGINT)
            stdout, stderr = proc.communicate(timeout=10)
        finally:
            proc.kill()
    assert proc.returncode == 130
    assert "Cancelling" in stderr
    assert "Traceback" not in stderr
    assert len("x" + stdout.strip()) < 200


def test_resuming_a_session_started_in_another_directory_says_its_tools_now_run_here(tmp_path):
    project, other = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    other.mkdir()
    home = {"GEMINI_SPLIT_HOME": str(tmp_path / "home")}
    with FakeGemini(script=[{"text": "first"}, {"text": "second"}, {"text": "third"}], api_key=API_KEY) as fake:
        started = run_cli(["-p", "start here", "-o", "json"], cwd=project, fake=fake, env_extra=home)
        assert started.returncode == 0, started.stderr
        session = json.loads(started.stdout)["session_id"]
        same = run_cli(["-r", "latest", "-p", "go on"], cwd=project, fake=fake, env_extra=home)
        # Its id (latest and numbers count this project's sessions only):
        moved = run_cli(["-r", session, "-p", "and here?"], cwd=other, fake=fake, env_extra=home)
    assert same.returncode == 0 and same.stderr == "", same.stderr
    assert moved.returncode == 0 and moved.stdout == "third\n", moved.stderr
    assert moved.stderr == (f"gemini-split: this session was started in {project}; its tools now run here, "
                            f"in {other}\n")


def test_the_short_id_the_banner_shows_resumes_the_session(tmp_path):
    home = {"GEMINI_SPLIT_HOME": str(tmp_path / "home")}
    with FakeGemini(script=[{"text": "first"}, {"text": "second"}], api_key=API_KEY) as fake:
        first = run_cli(["-p", "remember 7", "-o", "json"], cwd=tmp_path, fake=fake, env_extra=home)
        session_id = json.loads(first.stdout)["session_id"]
        again = run_cli(["-r", session_id[:8], "-p", "which number?"], cwd=tmp_path, fake=fake, env_extra=home)
        contents = fake.requests[-1]["body"]["contents"]
    assert again.returncode == 0 and again.stdout == "second\n", again.stderr
    assert any("remember 7" in p.get("text", "") for c in contents for p in c["parts"])  # the same conversation


def test_with_json_output_a_missing_key_still_prints_the_json_error_object(tmp_path):
    with FakeGemini(script=[{"text": "never"}]) as fake:
        result = run_cli(["-p", "hi", "-o", "json"], cwd=tmp_path, fake=fake, drop=("GEMINI_API_KEY",),
                         in_process=False)
    assert result.returncode == 41
    out = json.loads(result.stdout)
    assert out["error"]["type"] == "auth" and out["error"]["code"] == 41
    assert "GEMINI_API_KEY" in out["error"]["message"] and "GEMINI_API_KEY" in result.stderr
    assert fake.requests == []


def test_stream_json_names_a_failed_tool_call_as_gemini_cli_does(tmp_path):
    script = [
        {"function_calls": [{"name": "read_file", "args": {"file_path": "missing.txt"}},
                            {"name": "no_such_tool", "args": {}}]},
        {"text": "Gone."},
    ]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        result = run_cli(["-p", "go", "-o", "stream-json"], cwd=tmp_path, fake=fake)
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    types = {e["tool_id"]: e["error"]["type"] for e in events if e["type"] == "tool_result"}
    names = {e["tool_id"]: e["tool_name"] for e in events if e["type"] == "tool_use"}
    assert {names[i]: t for i, t in types.items()} == {"read_file": "file_not_found",
                                                        "no_such_tool": "tool_not_registered"}


def test_a_persistent_429_waits_as_the_api_asks_shows_the_wait_and_ctrl_c_ends_it_at_once(tmp_path):
    """gemini-cli rides a rate limit out for minutes, honouring RetryInfo;
    so does gemini-split, saying how long it waits, and Ctrl-C does not
    wait for the retry."""
    busy = {"error": {"status": 429, "message": "Resource exhausted", "details": [
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "40s"}]}}
    with FakeGemini(script=[busy] * 3, api_key=API_KEY) as fake:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_"))}
        env.update(GEMINI_API_KEY=API_KEY, GOOGLE_GEMINI_BASE_URL=fake.url)
        proc = subprocess.Popen([sys.executable, "-m", "gemini_split", "-p", "hi"], cwd=tmp_path, env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            line = ""
            deadline = time.monotonic() + 30
            while "retry" not in line and time.monotonic() < deadline:
                line = proc.stderr.readline()
            # 40 s asked, at least that and up to 20 % more (as gemini-cli)
            waited = float(line.rsplit(" in ", 1)[1].rstrip("s\n"))
            assert "retry 2/10" in line and "429" in line and 40.0 <= waited <= 48.0, line
            interrupted = time.monotonic()
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=20)
        finally:
            proc.kill()
    assert time.monotonic() - interrupted < 5
    assert proc.returncode == 130, err
    assert len(fake.requests) == 1  # no retry was sent after Ctrl-C
