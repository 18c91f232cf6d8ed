"""``serve --state-dir`` end to end: real daemon processes, the fake Gemini
server behind them, the one-shot thin client in front."""

from __future__ import annotations

import hashlib
import json
import resource
import sqlite3
import subprocess
import sys

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from tests.e2e.test_serve_e2e import API_KEY, _env, client, daemon


def _rows(db, query):
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(query).fetchall()
    finally:
        conn.close()


@pytest.mark.timeout(90)
def test_a_turn_through_serve_is_stored_with_its_history_and_events(tmp_path):
    state = tmp_path / "state"
    with FakeGemini(script=[{"text": "Hello from the model.", "chunks": 4}], api_key=API_KEY) as fake, \
            daemon(tmp_path, fake, "--state-dir", str(state)) as (_, address):
        done = client(["--server", address, "-p", "say hello\nplease"], cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout == "Hello from the model.\n"
    db = state / "sessions.db"
    [(sid, owner, title, history, turns, running, token_hash)] = _rows(
        db, "SELECT id, owner, title, history, turns, running_request, token_hash FROM sessions")
    assert (owner, title, turns, running) == ("local", "say hello", 1, None)
    stored = json.loads(history)
    # The first turn opens with the client's session context (gemini-cli's <session_context> part).
    assert stored[0]["parts"][0]["text"].startswith("<session_context>")
    stored[0]["parts"] = stored[0]["parts"][1:]
    assert stored == [
        {"role": "user", "parts": [{"text": "say hello\nplease"}]},
        {"role": "model", "parts": [{"text": "Hello from the model."}]},
    ]
    assert len(token_hash) == 64
    events = _rows(db, f"SELECT seq, data FROM events WHERE session_id = '{sid}' ORDER BY seq")
    assert [seq for seq, _ in events] == list(range(1, len(events) + 1))
    texts = [json.loads(data) for _, data in events]
    assert "".join(e["content"] for e in texts if e["type"] == "text_delta") == "Hello from the model."
    assert [e for e in texts if e["type"] != "clients_changed"][-1]["type"] == "finished"


@pytest.mark.timeout(90)
def test_serve_keeps_sessions_under_gemini_split_home_by_default(tmp_path):
    home = tmp_path / "home"
    with FakeGemini(api_key=API_KEY) as fake, \
            daemon(tmp_path, fake, env_extra={"GEMINI_SPLIT_HOME": str(home)}) as (_, address):
        assert client(["--server", address, "-p", "hi"], cwd=tmp_path).returncode == 0
    assert len(_rows(home / "sessions" / "sessions.db", "SELECT id FROM sessions")) == 1


def _serve(tmp_path, *args, timeout=30):
    return subprocess.run(
        [sys.executable, "-m", "gemini_split", "serve", "--listen", "127.0.0.1:0", *args],
        cwd=tmp_path, env=_env(GEMINI_API_KEY=API_KEY), stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=timeout,
    )


@pytest.mark.timeout(90)
def test_a_corrupt_state_database_stops_serve_with_one_line_and_is_left_alone(tmp_path):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)  # a 0755 one would add its warning line
    db = state / "sessions.db"
    db.write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 64)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    done = _serve(tmp_path, "--state-dir", str(state))
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"gemini-split serve: {db}: "), done.stderr
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


@pytest.mark.timeout(90)
def test_a_second_serve_on_the_same_state_dir_is_refused(tmp_path):
    state = tmp_path / "state"
    with FakeGemini(api_key=API_KEY) as fake, daemon(tmp_path, fake, "--state-dir", str(state)) as (first, _):
        second = _serve(tmp_path, "--state-dir", str(state))
        assert second.returncode == 1
        assert second.stderr.strip() == (
            f"gemini-split serve: {state} is in use by another gemini-split serve (pid {first.pid}); "
            "stop it or give this one another --state-dir"
        )


@pytest.mark.timeout(90)
def test_a_full_disk_is_an_error_to_the_client_and_the_turn_still_completes(tmp_path):
    state = tmp_path / "state"
    text = "".join(f"line {i:05d} of a long answer\n" for i in range(20_000))  # ~600 kB of events
    limit = 256 * 1024

    def small_disk():  # in the daemon only: no file may grow past 256 KiB
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    with FakeGemini(script=[{"text": text, "chunks": 400}, {"text": "still here"}], api_key=API_KEY) as fake, \
            daemon(tmp_path, fake, "--state-dir", str(state), preexec_fn=small_disk) as (_, address):
        done = client(["--server", address, "-p", "long", "-o", "stream-json"], cwd=tmp_path)
        events = [json.loads(line) for line in done.stdout.splitlines()]
        again = client(["--server", address, "-p", "again"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    errors = [e for e in events if e.get("type") == "error"]
    assert errors and "the server could not save this session" in errors[0]["message"], events[-3:]
    assert "".join(e.get("content", "") for e in events if e.get("type") == "message"
                   and e.get("role") == "assistant") == text
    assert again.returncode == 0 and again.stdout == "still here\n", again.stderr


@pytest.mark.timeout(60)
def test_the_start_up_line_names_the_session_database(tmp_path):
    state = tmp_path / "state"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gemini_split", "serve", "--listen", "127.0.0.1:0", "--state-dir", str(state)],
        cwd=tmp_path, env=_env(GEMINI_API_KEY=API_KEY), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True)
    try:
        line = ""
        while "serving on" not in line:
            line = proc.stderr.readline()
            assert line, "serve ended before listening"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert f"store sqlite {state / 'sessions.db'})" in line, line
