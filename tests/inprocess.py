"""Run the real command line in this process: ``cli(argv, environ=…, cwd=…)``.

The same ``main(argv, env)`` the console script runs, with its streams,
environment and working directory given as an
:class:`~gemini_split.environment.Environment` instead of a process's, so a
one-shot run costs tens of milliseconds instead of a Python start-up and
every import (about 1.6 s under load). It returns what
``subprocess.run(..., capture_output=True, text=True)`` would, so a test can
switch between the two.

What needs a process of its own stays a subprocess: signals (Ctrl-C, SIGTERM),
a daemon, a pseudo-terminal, the console script itself. Each test module
keeps a few real-subprocess end-to-end tests besides these.
"""

from __future__ import annotations

import io
import subprocess
from collections.abc import Mapping
from pathlib import Path

from gemini_split.cli import main
from gemini_split.environment import Environment


class _Stdin(io.StringIO):
    """Piped input: never a terminal."""

    def isatty(self) -> bool:
        return False


def cli(argv: list[str], *, environ: Mapping[str, str], cwd: Path | str, stdin: str = "",
        timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    """``gemini-split ARGV`` in this process, with exactly ``environ`` as its
    environment (nothing inherited), ``cwd`` as its directory and ``stdin``
    piped in. ``timeout`` is accepted for symmetry with ``subprocess.run``;
    pytest-timeout bounds the run."""
    stdout, stderr = io.StringIO(), io.StringIO()
    env = Environment(stdin=_Stdin(stdin), stdout=stdout, stderr=stderr, environ=dict(environ), cwd=Path(cwd))
    status = main(list(argv), env)
    return subprocess.CompletedProcess(["gemini-split", *argv], int(status), stdout.getvalue(), stderr.getvalue())
