"""Stopping the processes a benchmark started (shared by the bench scripts)."""

from __future__ import annotations

import signal
import subprocess


def stop(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    """SIGTERM ``proc`` if it still runs, wait up to ``timeout`` seconds for
    it to end, then SIGKILL it; either way it is reaped before this returns."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
