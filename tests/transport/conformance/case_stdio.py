"""The stdio case: each connection spawns ``python -m gemini_split.testing.conformance``
and talks to it over its stdin/stdout. The server options travel as the echo
server's command-line arguments."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from gemini_split.testing.conformance import TransportCase
from gemini_split.transport import ConnectOptions, ServeOptions

_ROOT = Path(__file__).resolve().parents[3]


async def _start(nursery, options: ServeOptions) -> str:
    # Nothing to start here: every open_connection spawns its own server.
    argv = [
        sys.executable, "-m", "gemini_split.testing.conformance",
        "--max-message-size", str(options.max_message_size),
    ]
    return "stdio:" + shlex.join(argv)


def _connect_options() -> ConnectOptions:
    return ConnectOptions(extra={"cwd": str(_ROOT)})


CASES = [TransportCase("stdio", _start, _connect_options, dead_address="stdio:false")]
