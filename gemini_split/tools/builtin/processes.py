"""Tool processes never outlive the client that started them.

Every tool subprocess (a shell command, a ripgrep search) runs in its own
session and process group, and is started with :func:`open_tool_process`,
which registers that group here until :func:`release_tool_process` is called.
Three things then stop a registered group when the client goes away:

- the tool itself, when its call ends or is cancelled (its ``finally``);
- a SIGTERM or SIGHUP to the client (:func:`install_signal_cleanup`, which
  the CLI entry installs): the groups are killed, then the client dies of
  that signal as it would have;
- a **watchdog** process, for deaths nothing in the client can handle
  (SIGKILL, a crash, the OOM killer). It is a tiny Python process started
  with the first tool process, in its own session, reading the list of live
  groups from a pipe; when the pipe reaches end of file — the client is gone,
  however it died — it sends SIGTERM, then SIGKILL, to every group still
  listed, and exits.

Why not ``PR_SET_PDEATHSIG``: it fires when the *thread* that forked the
child exits, and Trio forks from worker threads that come and go; and it
reaches only the direct child, not what a shell starts in the background.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import subprocess

    import trio

_WATCHDOG = r"""
import os, signal, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
groups, buf = set(), b""
while True:
    try:
        data = os.read(0, 4096)
    except InterruptedError:
        continue
    except OSError:
        break
    if not data:
        break
    buf += data
    *lines, buf = buf.split(b"\n")
    for line in lines:
        if line[:1] == b"+":
            groups.add(int(line[1:]))
        elif line[:1] == b"-":
            groups.discard(int(line[1:]))
for sig in (signal.SIGTERM, signal.SIGKILL):
    for pgid in groups:
        try:
            os.killpg(pgid, sig)
        except OSError:
            pass
    if groups and sig == signal.SIGTERM:
        time.sleep(0.3)
"""

_lock = threading.Lock()
_groups: set[int] = set()
_watchdog: subprocess.Popen[bytes] | None = None
_watchdog_fd: int | None = None


def _tell_watchdog(line: str) -> None:
    """Send one ``+pgid`` / ``-pgid`` line, starting the watchdog first if
    needed. Best effort: without a watchdog the other two guards remain."""
    if _ensure_watchdog(skip=line) is not None:
        _write(line + "\n")


def _ensure_watchdog(skip: str = "") -> int | None:
    """The write end of the pipe to a live watchdog (started if needed, and
    told every registered group but ``skip``), or None. Call with _lock held."""
    global _watchdog, _watchdog_fd
    if sys.platform == "win32":
        return None
    if _watchdog_fd is None or (_watchdog is not None and _watchdog.poll() is not None):
        read_end, write_end = os.pipe()  # both close-on-exec: no tool inherits them
        try:
            _watchdog = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _WATCHDOG],
                stdin=read_end, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True, close_fds=True,
            )
        except OSError:
            os.close(write_end)
            return None
        finally:
            os.close(read_end)
        if _watchdog_fd is not None:
            os.close(_watchdog_fd)
        _watchdog_fd = write_end
        for pgid in _groups:
            if f"+{pgid}" != skip:
                _write(f"+{pgid}\n")
    return _watchdog_fd


def _write(text: str) -> None:
    assert _watchdog_fd is not None
    try:
        os.write(_watchdog_fd, text.encode())
    except OSError:
        pass


def register_group(pgid: int) -> None:
    """Kill group ``pgid`` if the client dies before :func:`release_group`."""
    with _lock:
        _groups.add(pgid)
        _tell_watchdog(f"+{pgid}")


def release_group(pgid: int) -> None:
    """The group is gone (or no longer ours to kill)."""
    with _lock:
        if pgid in _groups:
            _groups.discard(pgid)
            _tell_watchdog(f"-{pgid}")


def live_groups() -> set[int]:
    """The registered groups (for tests and diagnostics)."""
    with _lock:
        return set(_groups)


def kill_all_groups(sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` to every registered group. Safe in a signal handler."""
    for pgid in list(_groups):
        try:
            os.killpg(pgid, sig)
        except OSError:
            pass


async def open_tool_process(argv: Sequence[str], **options: Any) -> trio.Process:
    """``trio.lowlevel.open_process`` in a new session, registered so the
    group dies with the client. The caller must :func:`release_tool_process`
    once the group is stopped."""
    import trio

    with _lock:
        watchdog_fd = _ensure_watchdog()
    if watchdog_fd is not None and "preexec_fn" not in options:
        # The child registers itself, between fork and exec: whatever it
        # starts later is covered even if the client dies before
        # register_group below runs (the fd is close-on-exec: the command
        # never holds it).
        options["preexec_fn"] = functools.partial(_register_from_child, watchdog_fd)
    process = await trio.lowlevel.open_process(list(argv), start_new_session=True, **options)
    register_group(process.pid)
    return process


def _register_from_child(fd: int) -> None:
    """Runs in the forked child before exec (its pid is its group id)."""
    try:
        os.write(fd, b"+%d\n" % os.getpid())
    except OSError:
        pass


def release_tool_process(process: trio.Process) -> None:
    release_group(process.pid)


_installed = False


def install_signal_cleanup(signals: Sequence[int] = (signal.SIGTERM, signal.SIGHUP)) -> None:
    """On these signals, kill every tool process group, then die of the
    signal as the default action would (exit status 128+N). Call once, from
    the main thread, before anything else claims these signals; a handler
    installed later (``serve`` watches SIGTERM itself) takes precedence while
    it is in place."""
    global _installed
    if _installed or threading.current_thread() is not threading.main_thread():
        return
    _installed = True

    def handler(signum: int, frame: Any) -> None:
        kill_all_groups(signal.SIGKILL)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    for sig in signals:
        if signal.getsignal(sig) in (signal.SIG_DFL, None):
            signal.signal(sig, handler)
