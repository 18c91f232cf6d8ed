"""The CLI shell stays light: ``--version``, ``--help`` and ``server list
--names`` (run by the shell completions on every Tab) import neither trio nor
the protocol nor any transport. Not timed: bench/cli_start.py measures the
speed; this checks the cause."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

HEAVY = ("trio", "gemini_split.protocol", "gemini_split.transport", "gemini_split_loopback",
         "gemini_split_websocket", "gemini_split_stdio", "google.genai", "httpx", "prompt_toolkit", "rich",
         "shtab")


def _imported_modules(args: list[str], tmp_path) -> set[str]:
    env = {**os.environ, "GEMINI_SPLIT_HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "gemini_split", *args], env=env,
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr[-2000:]
    return {line.rsplit("|", 1)[1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["server", "list", "--names"]], ids=" ".join)
def test_the_shell_imports_no_trio_protocol_or_transport(args, tmp_path):
    modules = _imported_modules(args, tmp_path)
    assert "gemini_split.cli" in modules  # the measurement saw our imports at all
    heavy = sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))
    assert heavy == [], f"gemini-split {' '.join(args)} imported {heavy}"


@pytest.mark.timeout(10)
def test_serves_help_states_the_stores_own_defaults():
    """commands/serve.py copies the store's defaults (importing the store would
    slow ``serve --help``): the copies must say what the store does."""
    from gemini_split.commands import serve
    from gemini_split.server import store

    assert serve.DEFAULT_SESSION_TTL == store.DEFAULT_SESSION_TTL
    assert serve.DEFAULT_REPLAY_CAPACITY == store.DEFAULT_REPLAY_CAPACITY
