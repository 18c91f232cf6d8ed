"""Everything the program takes from the world it runs in.

Passed to ``main`` instead of reaching for ``sys`` and ``os`` directly, so
tests (and embedding programs) can run the real CLI with their own streams,
environment variables and working directory.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Mapping


@dataclass
class Environment:
    stdin: IO[str] = field(default_factory=lambda: sys.stdin)
    stdout: IO[str] = field(default_factory=lambda: sys.stdout)
    stderr: IO[str] = field(default_factory=lambda: sys.stderr)
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)
    cwd: Path = field(default_factory=Path.cwd)

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
