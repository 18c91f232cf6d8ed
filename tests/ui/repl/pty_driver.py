"""Run a program under a pseudo-terminal and talk to it like a person.

A small stand-in for pexpect (no extra dependency): ``pty.fork`` gives the
child a real controlling terminal, so prompt-toolkit sees a terminal, rich
draws live output, and ``\\x03`` becomes a SIGINT exactly as Ctrl-C does.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import termios
import time
from collections.abc import Sequence

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[=>78NOM]|[\x00-\x08\x0b-\x0c\x0e-\x1f]")

ENTER = "\r"
CTRL_C = "\x03"
CTRL_D = "\x04"
TAB = "\t"
ALT_ENTER = "\x1b\r"
ESC = "\x1b"
UP = "\x1b[A"
DOWN = "\x1b[B"


def plain(text: str) -> str:
    """``text`` without escape sequences and control characters."""
    return _ANSI.sub("", text)


class Timeout(AssertionError):
    pass


class PtyProcess:
    def __init__(self, argv: Sequence[str], *, env: dict[str, str], cwd: str, rows: int = 40, cols: int = 110):
        pid, fd = pty.fork()
        if pid == 0:  # the child
            try:
                os.chdir(cwd)
                os.execve(argv[0], list(argv), env)
            finally:
                os._exit(127)
        self.pid = pid
        self.fd = fd
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.raw = ""
        self._mark = 0  # expect() searches from here
        self.exit_status: int | None = None

    def resize(self, rows: int, cols: int) -> None:
        """Change the terminal's size, as a window manager does (the kernel
        sends the program SIGWINCH)."""
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    @property
    def text(self) -> str:
        """Everything the program wrote, escape sequences removed."""
        return plain(self.raw)

    def send(self, data: str) -> None:
        os.write(self.fd, data.encode())

    def type(self, text: str, delay: float = 0.02) -> None:
        """Type ``text`` a key at a time, as a person would (keeps
        completion menus and redraws in step)."""
        for ch in text:
            self.send(ch)
            time.sleep(delay)

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            return False
        if not data:
            return False
        text = data.decode("utf-8", "replace")
        # Answer cursor position requests as a terminal would (prompt-toolkit
        # asks, to know how much room there is below the prompt).
        for _ in range(text.count("\x1b[6n")):
            self.send("\x1b[1;1R")
        self.raw += text
        return True

    def expect(self, pattern: str, timeout: float = 10.0) -> re.Match[str]:
        """Wait until ``pattern`` (a regex) appears in the plain output after
        the previous match; return the match."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            text = self.text
            match = regex.search(text, self._mark)
            if match:
                self._mark = match.end()
                return match
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise Timeout(f"{pattern!r} did not appear within {timeout} s; the output since the last "
                              f"match was:\n{text[self._mark:][-3000:]}")
            if not self._read(min(remaining, 0.1)):
                match = regex.search(self.text, self._mark)
                if match:
                    self._mark = match.end()
                    return match
                raise Timeout(f"the program ended before {pattern!r} appeared; its output since the last "
                              f"match was:\n{self.text[self._mark:][-3000:]}")

    def drain(self, seconds: float) -> None:
        """Read for ``seconds``."""
        end = time.monotonic() + seconds
        while time.monotonic() < end and self._read(0.05):
            pass

    def wait(self, timeout: float = 10.0) -> int:
        """Wait for the program to exit; its exit status."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._read(0.05)
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.exit_status = os.waitstatus_to_exitcode(status)
                return self.exit_status
        raise Timeout(f"the program did not exit within {timeout} s; its last output:\n{self.text[-2000:]}")

    def close(self) -> None:
        if self.exit_status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        try:
            os.close(self.fd)
        except OSError:
            pass
