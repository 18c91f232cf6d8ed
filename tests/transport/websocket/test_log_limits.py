"""A peer cannot flood the daemon's log (issue 13 §4): every line is bounded
and printable, and repeated refusals are written a few times, then summed up.

Before: 20 messages of 1 MB with an unknown type wrote 20 MB to the log, and
every wrong token wrote a line."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time

import trio

from gemini_split.protocol import Hello, encode
from gemini_split.stamping import stamp
from gemini_split.log_limits import MAX_MESSAGE_CHARS, limit_log_handler
from gemini_split.transport import AuthenticationFailed, ConnectOptions, get_transport

from .rawframes import RawWebSocket

TOKEN = "log-test-token-0123456789"


def _handler() -> tuple[logging.Handler, io.StringIO]:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    limit_log_handler(handler)
    return handler, out


def _record(message: str, *args, created: float, refusal: str | None = None) -> logging.LogRecord:
    record = logging.makeLogRecord({"name": "gemini_split.test", "levelno": logging.INFO, "levelname": "INFO",
                                    "msg": message, "args": args, "created": created})
    if refusal is not None:
        record.refusal = refusal
    return record


def test_a_huge_message_is_one_bounded_printable_line():
    handler, out = _handler()
    handler.handle(_record("bad message: %s", "x" * 1_000_000 + "\n2026 INFO forged line\x1b[2J", created=0))
    text = out.getvalue()
    assert text.count("\n") == 1 and len(text) < MAX_MESSAGE_CHARS + 100
    assert "more characters)" in text
    handler.handle(_record("quoted: %s", "a\nINFO forged\r\x1b[1A", created=0))
    assert out.getvalue().splitlines()[1] == "INFO quoted: a\\nINFO forged\\r\\x1b[1A"


def test_refusals_are_written_a_few_times_per_window_then_summed_up():
    handler, out = _handler()
    for i in range(1000):
        handler.handle(_record("refused a WebSocket from 10.0.0.%d (HTTP 401)", i % 250, created=i * 0.01, refusal="HTTP 401"))
        handler.handle(_record("bad message %d", i, created=i * 0.01, refusal="bad message"))
    handler.handle(_record("accepted a WebSocket", created=5))  # not a refusal: always written
    assert len(out.getvalue().splitlines()) == 11
    handler.handle(_record("session closed", created=61))  # the window is over
    lines = out.getvalue().splitlines()
    assert "WARNING … 995 more refused (HTTP 401) in the last 61 s" in lines
    assert "WARNING … 995 more refused (bad message) in the last 61 s" in lines
    assert lines[-1] == "INFO session closed"
    # A new window starts afresh.
    handler.handle(_record("refused again", created=62, refusal="HTTP 401"))
    assert out.getvalue().splitlines()[-1] == "INFO refused again"


def _daemon(tmp_path):
    script = tmp_path / "script.json"
    script.write_text("[]")
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tokens": {TOKEN: {"userId": "alice"}}}))
    log = (tmp_path / "serve.log").open("w+")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_"))}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gemini_split", "serve", "--listen", "127.0.0.1:0",
         "--model", f"scripted:{script}", "--auth-config", str(tokens)],
        cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
    )
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        match = re.search(r"serving on (ws://\S+)", (tmp_path / "serve.log").read_text())
        if match:
            return proc, match.group(1), tmp_path / "serve.log"
        assert proc.poll() is None, (tmp_path / "serve.log").read_text()
        time.sleep(0.05)
    raise AssertionError("the daemon did not start")


async def test_a_flood_of_bad_messages_and_tokens_leaves_a_small_log(tmp_path):
    proc, address, log_path = _daemon(tmp_path)
    try:
        with trio.fail_after(20):
            transport = get_transport(address)
            stream = await transport.open_connection(address, ConnectOptions(token=TOKEN))
            await stream.send(encode(stamp(Hello(client="log-test"))))
            assert json.loads(await stream.receive())["type"] == "connected"
            for i in range(20):
                await stream.send(json.dumps({"type": "x" * 1_000_000, "id": str(i), "timestamp": 1}))
                assert json.loads(await stream.receive())["type"] == "error"
            await stream.aclose()
            port = int(address.rsplit(":", 1)[1])
            for i in range(60):  # from 127.0.0.2..: not throttled, every one reaches auth
                raw = RawWebSocket(await trio.open_tcp_stream("127.0.0.1", port, local_address=f"127.0.0.{2 + i}"))
                assert await raw.handshake(b"Authorization: Bearer wrong-%d\r\n" % i) == 401
                await raw.aclose()
            try:
                await transport.open_connection(address, ConnectOptions(token="wrong"))
            except AuthenticationFailed:
                pass
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
    log = log_path.read_text()
    assert len(log) < 40_000, f"{len(log):,} characters of log"
    assert "Traceback" not in log
    assert log.count("bad message") <= 5
    assert log.count("(HTTP 401)") <= 5
