"""A listening ``serve`` runs on the C library's allocator (issue 45 item 8):
it re-executes itself once with ``PYTHONMALLOC=malloc`` so that the memory a
burst of sessions took can go back to the system (gemini_split/memory.py).
The operator's own ``PYTHONMALLOC`` stands, a ``serve --stdio`` (one
connection, one process) does not pay for it, and what the server starts
sees the operator's environment."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from contextlib import contextmanager

import pytest

from gemini_split.cli import REEXEC_MARK, serve_on_system_malloc

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/PID/environ")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_", "PYTHONMALLOC"))}
    env.update(extra)
    return env


@contextmanager
def _serve(tmp_path, env):
    script = tmp_path / "script.json"
    script.write_text("[]")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gemini_split", "serve", "--listen", "127.0.0.1:0", "-m", f"scripted:{script}",
         "--state-dir", str(tmp_path / "state")],
        cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line or re.search(r"serving on ws://", line):
                break
        assert proc.poll() is None, proc.stderr.read()
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _started_with(pid: int) -> dict[str, str]:
    """The environment the process's program was started with (its last exec)."""
    with open(f"/proc/{pid}/environ", "rb") as f:
        pairs = [item.decode().partition("=") for item in f.read().split(b"\0") if item]
    return {name: value for name, _, value in pairs}


def test_a_listening_serve_runs_on_malloc_in_the_same_process(tmp_path):
    with _serve(tmp_path, _env()) as proc:
        started = _started_with(proc.pid)  # the pid Popen gave: exec, not a second process
    assert started.get("PYTHONMALLOC") == "malloc"


def test_the_operators_pythonmalloc_stands(tmp_path):
    with _serve(tmp_path, _env(PYTHONMALLOC="pymalloc")) as proc:
        started = _started_with(proc.pid)
    assert started.get("PYTHONMALLOC") == "pymalloc" and REEXEC_MARK not in started


def test_the_re_executed_serve_gives_its_children_the_operators_environment(monkeypatch):
    """In the process started by the re-exec, the variable and the mark go
    (tools, hooks and MCP servers it starts run on their own allocator), and
    it does not exec again."""
    monkeypatch.setenv("PYTHONMALLOC", "malloc")
    monkeypatch.setenv(REEXEC_MARK, "1")
    serve_on_system_malloc()  # would replace this test process if it exec'd
    assert "PYTHONMALLOC" not in os.environ and REEXEC_MARK not in os.environ


def test_serve_stdio_does_not_re_execute(tmp_path):
    """One connection, one process: it starts once (often per client, over
    ssh) and exits with its client, so the re-exec would only cost."""
    script = tmp_path / "script.json"
    script.write_text("[]")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gemini_split", "serve", "--stdio", "-m", f"scripted:{script}",
         "--state-dir", str(tmp_path / "state")],
        cwd=tmp_path, env=_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True)
    try:
        proc.stdin.write('{"type": "hello", "id": "1", "timestamp": 1}\n')
        proc.stdin.flush()
        reply = proc.stdout.readline()  # it has started and answered
        started = _started_with(proc.pid)
    finally:
        proc.kill()
        proc.wait()
    assert '"connected"' in reply
    assert "PYTHONMALLOC" not in started and REEXEC_MARK not in started
