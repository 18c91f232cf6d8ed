"""``--server 'stdio:…'`` and ``serve --stdio`` end to end: the real CLI as
client, a real ``gemini-split serve --stdio`` subprocess as server (in
another directory), the real google-genai client against the fake Gemini
server. What ``ssh box gemini-split serve --stdio`` users get."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time

from gemini_split.testing.fake_gemini import FakeGemini

from tests.inprocess import cli

API_KEY = "stdio-key"
SERVER = f"{shlex.quote(sys.executable)} -m gemini_split serve --stdio"


def _env(fake=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_"))}
    env["GEMINI_API_KEY"] = API_KEY
    if fake is not None:
        env["GOOGLE_GEMINI_BASE_URL"] = fake.url
    return env


def _server_in(directory) -> str:
    # `env -C` starts the server in another directory, like a remote box.
    return f"stdio:env -C {shlex.quote(str(directory))} {SERVER}"


def run_client(args, *, cwd, fake=None, timeout=60, in_process=True):
    """The client in this process (tests/inprocess.py; the stdio server is
    still the spawned command), or with ``in_process=False`` as a real
    subprocess."""
    if in_process:
        return cli(args, environ=_env(fake), cwd=cwd)
    return subprocess.run(
        [sys.executable, "-m", "gemini_split", *args], cwd=cwd, env=_env(fake),
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout,
    )


def test_text_streams_and_read_file_is_answered_by_the_client(tmp_path):
    client_dir, server_dir = tmp_path / "client", tmp_path / "server"
    client_dir.mkdir()
    server_dir.mkdir()
    (client_dir / "notes.txt").write_text("client-side notes\n")
    script = [
        {"text": "Reading. ", "function_calls": [{"name": "read_file", "args": {"file_path": "notes.txt"}}]},
        {"text": "The notes are client-side.", "chunks": 10},
    ]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        result = run_client(["--server", _server_in(server_dir), "-p", "read notes.txt", "-o", "json"],
                            cwd=client_dir, fake=fake, in_process=False)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["response"] == "The notes are client-side."  # the text after the last tool call, as gemini-cli
    responses = [p["functionResponse"] for r in fake.requests for c in r["body"]["contents"]
                 for p in c.get("parts", []) if "functionResponse" in p]
    assert responses[0]["response"] == {"output": "client-side notes\n"}


def test_every_output_format_works_over_stdio(tmp_path):
    with FakeGemini(api_key=API_KEY) as fake:  # echo mode
        text = run_client(["--server", _server_in(tmp_path), "-p", "hello"], cwd=tmp_path, fake=fake)
        stream = run_client(["--server", _server_in(tmp_path), "-p", "hello", "-o", "stream-json"], cwd=tmp_path, fake=fake)
    assert text.returncode == 0 and text.stdout == "Echo: hello\n"
    kinds = [json.loads(line)["type"] for line in stream.stdout.splitlines()]
    assert kinds[0] == "init" and kinds[-1] == "result"


def test_ctrl_c_cancels_the_remote_turn_and_the_server_process_is_gone(tmp_path):
    script = [{"text": "y" * 300, "chunks": 300, "chunk_delay": 0.05}]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gemini_split", "--server", _server_in(tmp_path), "-p", "long"],
            cwd=tmp_path, env=_env(fake), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        try:
            assert proc.stdout.read(1) == "y"
            proc.send_signal(signal.SIGINT)
            stdout, stderr = proc.communicate(timeout=15)
        finally:
            proc.kill()
        # The fake saw the model stream abandoned: the server really stopped it.
        requests = fake.wait_for_requests(lambda rs: bool(rs) and rs[0].get("completed") is False, timeout=5)
        assert requests[0].get("completed") is False
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    leftover = subprocess.run(["pgrep", "-f", f"env -C {tmp_path}"], capture_output=True, text=True)
    assert leftover.stdout.strip() == ""


def test_a_command_that_fails_or_does_not_exist_fails_fast_and_clearly(tmp_path):
    for address, words in [
        ("stdio:false", "exited with status 1"),
        ("stdio:no-such-command-xyz", "cannot start 'no-such-command-xyz'"),
        ("stdio:sh -c 'echo the real reason >&2; exit 3'", "the real reason"),
        ("stdio:sh -c 'echo not the protocol; echo why >&2; sleep 5'", "did not speak the gemini-split protocol"),
    ]:
        start = time.monotonic()
        result = run_client(["--server", address, "-p", "hi"], cwd=tmp_path, timeout=30)
        assert result.returncode == 1, (address, result.stderr)
        assert words in result.stderr, (address, result.stderr)
        assert "Traceback" not in result.stderr
        assert time.monotonic() - start < 10, address


def test_serve_stdio_writes_only_protocol_to_stdout_and_exits_when_stdin_closes(tmp_path):
    hello = json.dumps({"type": "hello", "id": "1", "timestamp": 1, "protocol_version": "1.0"})
    proc = subprocess.run(
        [sys.executable, "-m", "gemini_split", "serve", "--stdio", "-m", "scripted:/dev/null"],
        input="", capture_output=True, text=True, timeout=30, env=_env(), cwd=tmp_path,
    )
    # A broken script is a clear start-up error on stderr, nothing on stdout.
    assert proc.returncode != 0 and proc.stdout == ""
    (tmp_path / "s.json").write_text("[]")
    proc = subprocess.run(
        [sys.executable, "-m", "gemini_split", "serve", "--stdio", "-m", f"scripted:{tmp_path / 's.json'}"],
        input=hello + "\n" + "this is not json\n", capture_output=True, text=True, timeout=30, env=_env(), cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [m["type"] for m in lines] == ["connected", "error"]
    assert lines[1]["code"] == "invalid_json" and lines[1].get("fatal", False) is False  # false is the default, left out


def test_serve_stdio_exits_cleanly_on_sigterm(tmp_path):
    (tmp_path / "s.json").write_text("[]")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gemini_split", "serve", "--stdio", "-m", f"scripted:{tmp_path / 's.json'}"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=tmp_path,
    )
    try:
        proc.stdin.write(json.dumps({"type": "hello", "id": "1", "timestamp": 1}) + "\n")
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["type"] == "connected"
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 0, proc.stderr.read()
