"""Sessions outlive connections, end to end: a real ``serve`` daemon, the
fake Gemini server behind it, the fault-injecting proxy in front, and real
clients (the in-process ProtocolClient, or the CLI in a subprocess)."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from contextlib import contextmanager

import pytest
import trio

from gemini_split.tools.approval_mode import ApprovalMode
from gemini_split.client.connect import ClientSettings, Endpoint, ToolSettings, open_client
from gemini_split.protocol import Error, Finished, TextDelta
from gemini_split.testing.fake_gemini import FakeGemini

from tests.faultproxy import FaultProxy
from tests.inprocess import cli
from tests.e2e.test_serve_e2e import API_KEY, _env


def client(args, *, cwd, timeout=60, in_process=True):
    """The CLI with no API key: in this process (tests/inprocess.py), or with
    ``in_process=False`` in its own process (it owns its signals there). The
    real-process runs here: the client reconnecting through a cut
    (``test_a_one_shot_prompt_through_serve_survives_a_cut_mid_stream``) and
    the client whose server is killed under it (the SIGKILL test)."""
    if in_process:
        return cli(args, environ=_env(), cwd=cwd)
    return subprocess.run([sys.executable, "-m", "gemini_split", *args], cwd=cwd, env=_env(),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)

ALICE, BOB = "alice-token-0123456789", "bob-token-9876543210"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve(tmp_path, fake, state, port, *args, name="serve"):
    """``gemini-split serve`` on a fixed port (so a restart is found at the
    same address); yields the process."""
    log_path = tmp_path / f"{name}.log"
    start = log_path.stat().st_size if log_path.exists() else 0
    log = open(log_path, "a")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gemini_split", "serve", "--listen", f"127.0.0.1:{port}", "--state-dir", str(state),
         *args],
        cwd=tmp_path, env=_env(GEMINI_API_KEY=API_KEY, GOOGLE_GEMINI_BASE_URL=fake.url),
        stdin=subprocess.DEVNULL, stdout=log, stderr=log,
    )
    try:
        deadline = time.monotonic() + 60  # a loaded machine starts Python slowly
        while True:
            assert proc.poll() is None, log_path.read_text()
            # Its own start-up line, not just something answering on the
            # port: another test's server may have been given the same free
            # port, and a connect to a port in the ephemeral range with
            # nobody listening can even succeed on itself (TCP self-connect).
            if b"serving on" not in log_path.read_bytes()[start:]:
                assert time.monotonic() < deadline, f"serve did not start within 60 s: {log_path.read_text()}"
                time.sleep(0.05)
                continue
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, f"serve did not listen on {port} within 60 s"
                time.sleep(0.05)
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        log.close()


def _turn_text(i: int) -> str:
    return "".join(f"turn {i:03d} line {j:02d} of the answer\n" for j in range(12))


@pytest.mark.timeout(240)
async def test_two_hundred_streamed_turns_survive_twenty_cuts_with_exact_output(tmp_path):
    """The proxy cuts the connection 20 times at random (seeded) points:
    mid-delta, mid-tool-call, between turns. The client reconnects by itself;
    what it shows equals the model's script exactly, each event once, in seq
    order."""
    turns = 200
    script = []
    for i in range(turns):
        if i % 10 == 3:  # a tool call now and then: a cut may land on it
            script.append({"function_calls": [{"name": "list_directory", "args": {"dir_path": "."}}]})
        script.append({"text": _turn_text(i), "chunks": 12, "chunk_delay": 0.002})
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.txt").write_text("a\n")
    port = _free_port()
    seen: list[int] = []
    texts: dict[str, list[str]] = {}

    async def on_event(event) -> None:
        if event.seq is not None:
            assert not seen or event.seq > seen[-1], f"seq {event.seq} after {seen[-1]}"
            seen.append(event.seq)
        if isinstance(event, TextDelta):
            texts.setdefault(event.request_id, []).append(event.content)

    with FakeGemini(script=script, api_key=API_KEY) as fake, serve(tmp_path, fake, tmp_path / "state", port):
        async with trio.open_nursery() as nursery:
            proxy = FaultProxy("127.0.0.1", port)
            proxy_port = await nursery.start(proxy.serve)
            per_turn = 12 * 40 + 600  # bytes a turn sends, roughly (enough to spread the cuts)
            points = proxy.random_cuts(seed=10, count=20, total_bytes=turns * per_turn, start=2000)
            settings = ClientSettings(
                endpoint=Endpoint(server=f"ws://127.0.0.1:{proxy_port}", reconnect_timeout=30),
                tools=ToolSettings(workspace=workspace, approval_mode=ApprovalMode.YOLO),
            )
            async with open_client(settings, on_event=on_event) as c:
                for i in range(turns):
                    outcome = await c.run_turn(f"prompt {i}")
                    assert outcome.error is None, (i, outcome.error)
                    assert "".join(texts.get(outcome.request_id, [])) == _turn_text(i), i
            nursery.cancel_scope.cancel()
    assert len(proxy.cuts_made) >= 15, (points, proxy.downstream_bytes)
    assert proxy.connections == len(proxy.cuts_made) + 1


#: What the kill may also have lost of the running request, besides the
#: events not yet written (a crash loses the batch being gathered): nothing
#: more; its "running" mark, written beside the request and later during a
#: rush; or its start too (the client saw request_started; the store never did).
LOST = ["events", "running mark", "start"]


def _lose(db, lost: str) -> None:
    """Leave the store as a kill can, for ``lost`` (see :data:`LOST`)."""
    if lost == "events":
        return
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE sessions SET running_request = NULL")
        if lost == "start":
            (started,) = conn.execute("SELECT max(seq) FROM events WHERE type = 'request_started'").fetchone()
            conn.execute("DELETE FROM events WHERE seq >= ?", (started,))
            conn.execute("UPDATE sessions SET last_seq = (SELECT max(seq) FROM events)")
    conn.close()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("lost", LOST)
def test_sigkill_mid_turn_then_restart_resume_latest_continues_with_the_earlier_turns(tmp_path, lost):
    state = tmp_path / "state"
    port = _free_port()
    address = f"ws://127.0.0.1:{port}"
    script = [
        {"text": "The first answer."},
        {"text": "x" * 2000, "chunks": 400, "chunk_delay": 0.02},  # killed in the middle of this
        {"text": "The third answer."},
    ]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        with serve(tmp_path, fake, state, port) as proc:
            first = client(["--server", address, "-p", "first question"], cwd=tmp_path)
            assert first.returncode == 0 and first.stdout == "The first answer.\n", first.stderr
            second = subprocess.Popen(
                [sys.executable, "-m", "gemini_split", "--server", address, "--resume", "latest", "-p",
                 "second question", "--reconnect-timeout", "60"],
                cwd=tmp_path, env=_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True,
            )
            assert second.stdout.read(5) == "xxxxx"
            proc.kill()
            proc.wait()
        _lose(state / "sessions.db", lost)
        with serve(tmp_path, fake, state, port, name="restarted"):
            out, err = second.communicate(timeout=60)
            assert second.returncode == 1
            assert "reconnecting" in err and "interrupted" in err, err
            assert "the answer goes on" not in err, err  # it did not: only what is true is said
            # Said by the server when its store knew the request, else by the client.
            assert ("before it had stored it" in err) == (lost == "start"), err
            assert "Traceback" not in err
            third = client(["--server", address, "--resume", "latest", "-p", "third question"], cwd=tmp_path)
            assert third.returncode == 0 and third.stdout == "The third answer.\n", third.stderr
            sent = fake.requests[-1]["body"]["contents"]
    # The first turn opens with the client's session context (gemini-cli's <session_context> part).
    assert sent[0]["parts"][0]["text"].startswith("<session_context>")
    sent[0]["parts"] = sent[0]["parts"][1:]
    texts = [(c["role"], "".join(p.get("text", "") for p in c["parts"])) for c in sent]
    assert texts == [
        ("user", "first question"), ("model", "The first answer."),
        ("user", "third question"),
    ], texts
    assert len(fake.requests) == 3  # the interrupted request was not re-run


@pytest.mark.timeout(90)
async def test_a_one_shot_prompt_through_serve_survives_a_cut_mid_stream(tmp_path):
    text = "".join(f"line {i:03d} of a streamed answer\n" for i in range(200))
    port = _free_port()
    with FakeGemini(script=[{"text": text, "chunks": 200, "chunk_delay": 0.005}], api_key=API_KEY) as fake, \
            serve(tmp_path, fake, tmp_path / "state", port):
        async with trio.open_nursery() as nursery:
            proxy = FaultProxy("127.0.0.1", port)
            proxy_port = await nursery.start(proxy.serve)
            proxy.cut_at(3000)
            done = await trio.to_thread.run_sync(lambda: client(
                ["--server", f"ws://127.0.0.1:{proxy_port}", "-p", "stream please"], cwd=tmp_path,
                in_process=False))
            nursery.cancel_scope.cancel()
    assert done.returncode == 0, done.stderr
    assert done.stdout == text
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2 and "reconnecting" in lines[0] and "reconnected" in lines[1], done.stderr
    assert lines[1].endswith("; the answer goes on"), done.stderr
    assert proxy.cuts_made == [2999]


@pytest.mark.timeout(90)
def test_another_users_token_cannot_list_resume_or_delete_a_session(tmp_path):
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({"tokens": {ALICE: {"userId": "alice"}, BOB: {"userId": "bob"}}}))
    port = _free_port()
    address = f"ws://127.0.0.1:{port}"
    with FakeGemini(api_key=API_KEY) as fake, \
            serve(tmp_path, fake, tmp_path / "state", port, "--auth-config", str(auth)):
        made = client(["--server", address, "--token", ALICE, "-p", "alice's secret plan", "-o", "json"], cwd=tmp_path)
        assert made.returncode == 0, made.stderr
        sid = json.loads(made.stdout)["session_id"]
        alice_list = client(["--server", address, "--token", ALICE, "--list-sessions"], cwd=tmp_path)
        bob_list = client(["--server", address, "--token", BOB, "--list-sessions"], cwd=tmp_path)
        bob_resume = client(["--server", address, "--token", BOB, "--resume", sid, "-p", "hi"], cwd=tmp_path)
        bob_latest = client(["--server", address, "--token", BOB, "--resume", "latest", "-p", "hi"], cwd=tmp_path)
        bob_delete = client(["--server", address, "--token", BOB, "--delete-session", sid], cwd=tmp_path)
        nobody = client(["--server", address, "--token", BOB, "--resume", "s-0000000000000000", "-p", "hi"],
                        cwd=tmp_path)
        alice_again = client(["--server", address, "--token", ALICE, "--list-sessions"], cwd=tmp_path)
    assert alice_list.returncode == 0 and sid in alice_list.stdout and "alice's secret plan" in alice_list.stdout
    assert bob_list.returncode == 0 and sid not in bob_list.stdout and "secret" not in bob_list.stdout
    for refused in (bob_resume, bob_delete, nobody):
        assert refused.returncode == 1, refused.stderr
        assert "unknown_session" in refused.stderr or "no session" in refused.stderr
    # the same answer whether the session is someone else's or does not exist
    assert bob_resume.stderr.replace(sid, "ID") == nobody.stderr.replace("s-0000000000000000", "ID")
    # gemini-cli's -r latest with no earlier session: a warning, and a new session
    assert bob_latest.returncode == 0 and "No previous sessions found for this project." in bob_latest.stderr
    assert "secret" not in bob_latest.stdout
    assert sid in alice_again.stdout
