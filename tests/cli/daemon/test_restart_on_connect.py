"""The local daemon dies after a call found it and before the call
connected (a crash, an OOM kill): the call starts a new daemon, once, and
goes on, instead of failing with "nobody accepts on it"."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
import trio

from gemini_split.app import resolve_client_settings
from gemini_split.commands.options_from_args import client_options
from gemini_split.cli import build_parser
from gemini_split.client.connect import open_client
from gemini_split.environment import Environment
from gemini_split.protocol import TextDelta

from .conftest import daemon_pids, info


def _fully_gone(pid: int, timeout: float = 15.0) -> None:
    """Not even a zombie holding its socket: the process is reaped."""
    deadline = time.monotonic() + timeout
    while Path(f"/proc/{pid}").exists():
        try:
            os.waitpid(pid, os.WNOHANG)  # started by this process: reap it
        except ChildProcessError:
            pass
        assert time.monotonic() < deadline, f"daemon {pid} did not go"
        time.sleep(0.02)


@pytest.mark.timeout(60)
async def test_a_daemon_that_died_after_it_was_found_is_started_again(environ, home, tmp_path):
    env = Environment(environ=environ, cwd=tmp_path)
    options = client_options(build_parser().parse_args(["-p", "after the crash"]))
    settings = await trio.to_thread.run_sync(resolve_client_settings, options, env)  # finds (starts) the daemon
    old = info(home)["pid"]
    os.kill(old, signal.SIGKILL)
    await trio.to_thread.run_sync(_fully_gone, old)
    text: list[str] = []

    async def on_event(event) -> None:
        if isinstance(event, TextDelta):
            text.append(event.content)

    async with open_client(settings, on_event=on_event) as client:
        outcome = await client.run_turn("after the crash")
    assert outcome.error is None and "".join(text) == "Echo: after the crash"
    new = info(home)["pid"]
    assert new != old and daemon_pids(home) == [new]
