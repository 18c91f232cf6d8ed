"""Log lines stay bounded for errors raised inside libraries (issue 35 §8).

Before: at the file-descriptor limit Trio's ``serve_listeners`` logged an
``EMFILE`` error with an 8-line traceback every 0.1 s (324 of them); every
non-protobuf gRPC message logged grpcio's traceback; a client ``error`` with
``fatal: true`` made the server log a ``LocalProtocolError`` traceback for
each event it then tried to send. docs/deployment.md promises one printable
line per message and at most 5 lines per kind per minute."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
import trio

from gemini_split.log_limits import limit_log_handler
from gemini_split.protocol import Hello, encode
from gemini_split.server.config import ServerConfig
from gemini_split.server.model.scripted import ScriptedModel
from gemini_split.server.service import AgentService
from gemini_split.stamping import stamp
from gemini_split.transport import ConnectionBroken, ConnectionClosed, ConnectOptions, ServeOptions, get_transport


@pytest.fixture
def program_log():
    """The program's log handler (as ``cli`` sets it up) on the root logger,
    at INFO; yields what it wrote."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    limit_log_handler(handler)
    root = logging.getLogger()
    saved = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield out
    finally:
        root.removeHandler(handler)
        root.setLevel(saved)


def test_a_librarys_exception_is_one_line_and_repeats_are_summed_up(program_log):
    library = logging.getLogger("grpc._common")
    for i in range(100):
        try:
            raise ValueError(f"Error parsing message {i}\nwith a second line")
        except ValueError:
            library.exception("Exception deserializing message!")
    ours = logging.getLogger("gemini_split.test")
    try:
        raise RuntimeError("our own bug")
    except RuntimeError:
        ours.exception("a bug of ours keeps its traceback")
    lines = program_log.getvalue().splitlines()
    library_lines = [line for line in lines if "grpc._common" in line]
    assert library_lines[0] == ("ERROR grpc._common: Exception deserializing message! "
                                "(ValueError: Error parsing message 0\\nwith a second line)")
    assert len(library_lines) == 5
    assert "Traceback" in program_log.getvalue()  # ours only:
    assert program_log.getvalue().count("Traceback") == 1 and "our own bug" in program_log.getvalue()


@pytest.mark.timeout(60)  # a serve process starts and is held at its limit for 3 s; loaded machines are slow
def test_at_the_file_descriptor_limit_the_log_stays_bounded_and_the_server_serves_again(tmp_path):
    script = tmp_path / "script.json"
    script.write_text("[]")
    log_path = tmp_path / "serve.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_"))}
    env["GEMINI_SPLIT_HOME"] = str(tmp_path / "home")

    def lower_the_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gemini_split", "serve", "--listen", "127.0.0.1:0", "--state-dir", ":memory:",
             "--model", f"scripted:{script}"],
            cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
            preexec_fn=lower_the_limit,
        )
    clients: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 30
        while not (match := re.search(r"serving on ws://127.0.0.1:(\d+)", log_path.read_text())):
            assert proc.poll() is None and time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.05)
        port = int(match.group(1))
        # 150 connections that say nothing: the server runs out of descriptors
        # and stays out for 3 s (trio's loop: ~30 tracebacks meanwhile).
        for _ in range(150):
            clients.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        time.sleep(3)
        assert len(os.listdir(f"/proc/{proc.pid}/fd")) >= 60  # it really was at the limit
        for client in clients:
            client.close()
        clients.clear()
        deadline = time.monotonic() + 10
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as answer:
                    assert answer.status == 200
                    break
            except OSError:
                assert time.monotonic() < deadline, "the server did not serve again"
                time.sleep(0.1)
    finally:
        for client in clients:
            client.close()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
    text = log_path.read_text()
    assert "Traceback" not in text
    assert len(text.splitlines()) <= 10 and len(text) < 5000, text
    assert "cannot accept connections on 127.0.0.1" in text and "EMFILE" in text
    assert "accepting connections on 127.0.0.1" in text and "again" in text


@pytest.mark.parametrize("busy", [False, True], ids=["idle", "mid-answer"])
async def test_a_fatal_client_error_ends_the_connection_and_logs_no_traceback(program_log, busy):
    answer = {"text": "a" * 200, "chunks": 100, "chunk_delay": 0.01}
    service = AgentService(ScriptedModel([answer]), ServerConfig(model="scripted"))
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        address = await nursery.start(get_transport("ws://x").serve, "ws://127.0.0.1:0",
                                      service.handle_connection, ServeOptions())
        stream = await get_transport(address).open_connection(address, ConnectOptions())
        await stream.send(encode(stamp(Hello(client="fatal-test"))))
        assert json.loads(await stream.receive())["type"] == "connected"
        if busy:
            await stream.send(json.dumps({"type": "generate_content_request", "id": "r1", "timestamp": 1,
                                          "prompt": "talk"}))
            assert json.loads(await stream.receive())["type"] == "request_started"
        await stream.send(json.dumps({"type": "get_state", "id": "g1", "timestamp": 1}))
        await stream.send(json.dumps({"type": "error", "id": "e1", "timestamp": 1, "code": "internal",
                                      "message": "client gives up", "fatal": True}))
        after = []
        with trio.fail_after(5):  # the server closes; it does not wait for the client
            try:
                while True:
                    after.append(json.loads(await stream.receive())["type"])
            except (ConnectionBroken, ConnectionClosed):
                pass
        await trio.sleep(0.3)  # what the session still produces must not reach the log
        nursery.cancel_scope.cancel()
    assert after in ([], ["state"]) or set(after) <= {"state", "text_delta"}
    log = program_log.getvalue()
    assert "Traceback" not in log and "not sending" not in log
    assert "client reported internal: client gives up (fatal: the connection ends)" in log
