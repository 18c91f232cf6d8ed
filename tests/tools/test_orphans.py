"""A shell command the model started never outlives the client, whether the
client is embedded or thin and whether it dies of SIGTERM, SIGHUP or SIGKILL
(issue 13 §5): real client processes, a real ``sleep``, real signals."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from contextlib import ExitStack

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from tests.e2e.test_serve_e2e import API_KEY, _env, daemon

pytestmark = [
    pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs /proc"),
    pytest.mark.timeout(90),  # real client (and daemon) processes: slow to start on a loaded machine
]


def _sleepers(marker: str) -> list[int]:
    """Live (non-zombie) ``sleep`` processes whose command line holds ``marker``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{name}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if cmdline.startswith(b"sleep\x00") and marker.encode() in cmdline and state not in (b"Z", b"X"):
            found.append(int(name))
    return found


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["embedded", "thin"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL], ids=lambda s: s.name)
def test_no_tool_process_survives_the_client(tmp_path, mode, sig):
    seconds = f"{300 + secrets.randbelow(10**6) / 10**6:.6f}"  # a marker no other process has
    # 'sleep N; true' makes bash fork sleep as a grandchild of the client,
    # and '& wait' puts another one in the background.
    command = f"sleep {seconds} & sleep {seconds}; true"
    script = [{"function_calls": [{"name": "run_shell_command", "args": {"command": command}}]}, {"text": "done"}]
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with ExitStack() as stack:
        fake = stack.enter_context(FakeGemini(script=script, api_key=API_KEY))
        argv = [sys.executable, "-m", "gemini_split", "-p", "sleep", "--approval-mode", "yolo"]
        env = _env(GEMINI_API_KEY=API_KEY, GOOGLE_GEMINI_BASE_URL=fake.url)
        if mode == "thin":
            _, address = stack.enter_context(daemon(tmp_path, fake))
            argv += ["--server", address]
            env = _env()
        # A hang-up the test's own parent ignores (a run under nohup) would
        # be ignored by the client too, as it should: the client starts with
        # the hang-up at its default, as under a terminal.
        client = subprocess.Popen(argv, cwd=workspace, env=env, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))
        try:
            try:
                _wait_for(lambda: len(_sleepers(seconds)) == 2, 60, "the tool's sleeps never started")
            except AssertionError:
                client.kill()
                raise AssertionError(f"the tool's sleeps never started: {client.communicate()[1]!r}") from None
            client.send_signal(sig)
            client.wait(timeout=10)
            _wait_for(lambda: not _sleepers(seconds), 10, f"a tool process outlived the client ({sig.name})")
        finally:
            if client.poll() is None:
                client.kill()
            for pid in _sleepers(seconds):
                os.kill(pid, signal.SIGKILL)
    assert client.returncode == -sig
