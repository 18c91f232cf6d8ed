"""Helpers: ``serve`` replicas on one Redis (real subprocesses)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager

from tests.e2e.test_serve_e2e import API_KEY, _env


@contextmanager
def replica(tmp_path, fake, redis_url, port, *args, name="replica", env_extra=None):
    """``gemini-split serve --store REDIS_URL`` on ``port``; yields the
    process (killed or stopped on the way out)."""
    log_path = tmp_path / f"{name}.log"
    log = open(log_path, "a")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gemini_split", "serve", "--listen", f"127.0.0.1:{port}", "--store", redis_url,
         *args],
        cwd=tmp_path, env=_env(GEMINI_API_KEY=API_KEY, GOOGLE_GEMINI_BASE_URL=fake.url, **(env_extra or {})),
        stdin=subprocess.DEVNULL, stdout=log, stderr=log,
    )
    try:
        deadline = time.monotonic() + 60  # a loaded machine starts Python slowly
        while time.monotonic() < deadline:
            assert proc.poll() is None, log_path.read_text()
            # Its own start-up line, not just something answering on the port:
            # another test's server may have been given the same free port.
            if "serving on" not in log_path.read_text():
                time.sleep(0.05)
                continue
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        else:
            raise AssertionError(f"{name} did not listen: {log_path.read_text()}")
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()
