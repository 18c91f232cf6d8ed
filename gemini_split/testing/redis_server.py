"""A real ``redis-server`` on a free loopback port, for tests and benchmarks.

``RedisServer(directory)`` starts Debian's ``redis-server`` (found on
``PATH``) bound to 127.0.0.1 with its files in ``directory``, append-only
on with an fsync per write by default (a test kills it: what the store called
durable must survive that; ``fsync="everysec"`` is Redis's own default and
what docs/deployment.md runs — an fsync costs milliseconds per write on a
busy disk, which is what the benchmark's per-event latency must not
include), no RDB snapshots. Optional
``password`` turns on AUTH (``requirepass``). ``stop()`` kills it;
``start()`` again brings it back on the same port (a test of a replica that
loses Redis and gets it back).

The server dies with the process that started it, however that process
ends: it is started with ``PR_SET_PDEATHSIG`` = SIGKILL (Linux), so a test
worker killed with SIGKILL (a timeout, xdist giving up on it) leaves no
``redis-server`` behind. The signal comes when the *thread* that started it
ends, so :meth:`RedisServer.start` ties it only when called from the main
thread (tests and the benchmark do); from another thread it is not tied.

Needs no pytest: ``bench/replicas.py`` uses it too.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

#: Why Redis tests skip where there is no server (said loudly).
MISSING = ("redis-server is not installed: the Redis store and replica tests need it "
           "(apt-get install redis-server; .ci/run does this)")


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> Any:
    """A ``preexec_fn`` that makes the child get SIGKILL when this thread
    ends (None where that cannot be done: not Linux, not the main thread)."""
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


def available() -> bool:
    return shutil.which("redis-server") is not None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    def __init__(self, directory: Path, *, password: str | None = None, port: int | None = None,
                 fsync: str = "always"):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.password = password
        self.fsync = fsync
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def url_with_prefix(self) -> str:
        """``url`` with a key prefix no one else uses: tests sharing one
        server stay apart."""
        return f"{self.url}?prefix=t{uuid.uuid4().hex[:12]}:"

    def start(self, timeout: float = 10.0) -> RedisServer:
        args = ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--dir", str(self.directory),
                "--save", "", "--appendonly", "yes", "--appendfsync", self.fsync, "--daemonize", "no",
                "--protected-mode", "yes", "--logfile", str(self.directory / "redis.log")]
        if self.password:
            args += ["--requirepass", self.password]
        self.process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, preexec_fn=_die_with_parent())
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                log = (self.directory / "redis.log")
                raise RuntimeError(f"redis-server exited ({self.process.returncode}): "
                                   f"{log.read_text()[-800:] if log.exists() else ''}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    reply = s.recv(64)
                if reply.startswith((b"+PONG", b"-NOAUTH")):
                    return self
            except OSError:
                pass
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"redis-server did not answer on port {self.port} within {timeout:g}s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
