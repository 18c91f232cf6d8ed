"""The conformance suite over the ``unix:`` transport: a socket in a private
temporary directory."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from gemini_split.testing.conformance import TransportCase, echo_handler
from gemini_split.transport import ServeOptions, default_registry


async def _start(nursery, options: ServeOptions) -> str:
    folder = Path(tempfile.mkdtemp(prefix="gemini-split-unix-"))  # mkdtemp: mode 0700
    atexit.register(shutil.rmtree, folder, ignore_errors=True)  # not left in /tmp
    transport = default_registry().get("unix")
    return await nursery.start(transport.serve, f"unix:{folder}/echo.sock", echo_handler, options)


CASES = [TransportCase("unix", _start, dead_address="unix:/nonexistent/gemini-split/echo.sock")]
