"""Everything the program takes from the world it runs in.

Passed to ``main`` instead of reaching for ``sys`` and ``os`` directly, so
tests (and embedding programs) can run the real CLI with their own streams,
environment variables and working directory.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

TYPE_CHECKING = False  # typing is not imported on `gemini-split --version`'s path
if TYPE_CHECKING:
    from typing import IO


class Environment:
    """The std streams, environment variables and working directory; each
    defaults to this process's own.

    A plain class, not a dataclass: ``cli`` imports it on every run, and
    ``dataclasses`` would pull ``inspect`` into ``gemini-split --version``."""

    def __init__(
        self,
        stdin: IO[str] | None = None,
        stdout: IO[str] | None = None,
        stderr: IO[str] | None = None,
        environ: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        *,
        owns_process: bool = False,
    ):
        self.stdin: IO[str] = sys.stdin if stdin is None else stdin
        self.stdout: IO[str] = sys.stdout if stdout is None else stdout
        self.stderr: IO[str] = sys.stderr if stderr is None else stderr
        self.environ: Mapping[str, str] = os.environ if environ is None else environ
        self.cwd: Path = Path.cwd() if cwd is None else cwd
        #: This run owns the process (the console script), not a program or
        #: test calling ``main``: it may change process-wide state such as
        #: the garbage collector's (:mod:`gemini_split.collector`).
        self.owns_process = owns_process
        #: Variables this run took from a ``.env`` file
        #: (:mod:`gemini_split.userfiles.env_files`), not from its parent.
        self.env_file_names: frozenset[str] = frozenset()

    def __repr__(self) -> str:
        return f"Environment(cwd={str(self.cwd)!r}, stdin={self.stdin!r}, stdout={self.stdout!r})"

    @property
    def stdin_isatty(self) -> bool:
        return _isatty(self.stdin)

    @property
    def stdout_isatty(self) -> bool:
        return _isatty(self.stdout)

    @property
    def stderr_isatty(self) -> bool:
        return _isatty(self.stderr)

    @property
    def config_dir(self) -> Path:
        """Where servers.json and history live: ``$GEMINI_SPLIT_HOME`` or
        ``~/.gemini``."""
        home = self.environ.get("GEMINI_SPLIT_HOME")
        if home:
            return Path(home)
        return Path(self.environ.get("HOME") or Path.home()) / ".gemini"

    def warn(self, text: str) -> None:
        """A line for the user on stderr (never on stdout: that is output)."""
        print(text, file=self.stderr, flush=True)


def _isatty(stream: IO[str] | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (ValueError, AttributeError):
        return False
