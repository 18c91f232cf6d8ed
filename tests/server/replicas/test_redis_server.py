"""The test helper's redis-server (gemini_split/testing/redis_server.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from gemini_split.testing import redis_server as rs

pytestmark = pytest.mark.skipif(not rs.available(), reason=rs.MISSING)

_STARTER = """
import sys, time
from gemini_split.testing.redis_server import RedisServer
server = RedisServer(sys.argv[1]).start()
print(server.process.pid, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"  # a zombie is dead
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_server_dies_with_a_sigkilled_parent(tmp_path):
    """A test worker killed with SIGKILL (nothing of it runs any more: no
    fixture teardown) leaves no redis-server running."""
    starter = subprocess.Popen([sys.executable, "-c", _STARTER, str(tmp_path / "r")], stdout=subprocess.PIPE,
                               text=True)
    redis_pid = None
    try:
        redis_pid = int(starter.stdout.readline())
        assert _alive(redis_pid)
        starter.send_signal(signal.SIGKILL)
        starter.wait(timeout=10)
        deadline = time.monotonic() + 10
        while _alive(redis_pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _alive(redis_pid), "redis-server outlived the process that started it"
    finally:
        if starter.poll() is None:
            starter.kill()
        if redis_pid is not None and _alive(redis_pid):
            os.kill(redis_pid, signal.SIGKILL)
        starter.stdout.close()
