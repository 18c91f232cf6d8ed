"""A private GEMINI_SPLIT_HOME (and so a private daemon) per test, and no
daemon left behind: every process running ``daemon run`` with the test's
home is killed at the end, whoever started it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

API_KEY = "daemon-test-key"


def daemon_pids(home: str) -> list[int]:
    """Live processes running ``gemini-split daemon run`` for ``home``."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
            state = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if b"daemon" in cmdline and b"run" in cmdline and state != b"Z" \
                and f"GEMINI_SPLIT_HOME={home}".encode() in environ:
            pids.append(int(entry))
    return pids


def info(home: str) -> dict:
    """The running daemon's ``daemon.json``."""
    return json.loads(Path(home, "daemon", "daemon.json").read_text())


def wait_gone(pid: int, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.waitpid(pid, os.WNOHANG)  # our own child: reap it
        except ChildProcessError:
            pass
        try:
            state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except OSError:
            return True
        if state == b"Z":
            return True
        time.sleep(0.02)
    return False


@pytest.fixture
def home():
    # Short: a Unix socket path has at most 107 bytes.
    path = tempfile.mkdtemp(prefix="gsd-")
    yield path
    for pid in daemon_pids(path):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        wait_gone(pid, 5)
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def fake():
    with FakeGemini(api_key=API_KEY) as server:
        yield server


@pytest.fixture
def environ(home, fake) -> dict[str, str]:
    """A caller's environment: the local daemon mode, a key for the fake
    Gemini server, the test's home, no runtime directory."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GEMINI_", "GOOGLE_")) and k not in ("XDG_RUNTIME_DIR", "CI")}
    env.update(GEMINI_API_KEY=API_KEY, GOOGLE_GEMINI_BASE_URL=fake.url, GEMINI_SPLIT_HOME=home,
               GEMINI_SERVER_MODE="local")
    return env


def run(argv: list[str], environ: dict[str, str], cwd: str | Path, timeout: float = 60,
        input: str | None = None) -> subprocess.CompletedProcess[str]:
    """``gemini-split ARGV`` in a real process (``input`` piped to it)."""
    return subprocess.run([sys.executable, "-m", "gemini_split", *argv], env=environ, cwd=cwd, input=input,
                          stdin=subprocess.DEVNULL if input is None else None, capture_output=True, text=True,
                          timeout=timeout)
