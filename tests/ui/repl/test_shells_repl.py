"""Issue 43 §5: ``/shells`` (``/bashes``) in the real REPL under a pty — the
commands the model left running in the background, their output, and
stopping one (its whole process group)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from .test_repl import PROMPT, ask, start_repl, workdir  # noqa: F401 (fixtures)

pytestmark = pytest.mark.timeout(60)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie no longer does)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def _background(command: str) -> dict:
    return {"function_calls": [{"name": "run_shell_command",
                                "args": {"command": command, "is_background": True, "delay_ms": 100}}]}


def test_shells_lists_shows_output_and_kills_the_background_commands(start_repl, tmp_path):
    child = tmp_path / "child.pid"
    repl = start_repl([_background(f"echo started; sleep 300 & echo $! > {child}; wait"), {"text": "running"},
                       _background("echo quick; exit 3"), {"text": "done"}], "--approval-mode", "yolo")
    ask(repl, "/shells")
    repl.expect(r"No background tasks are currently active\.")
    ask(repl, "start the server")
    repl.expect(r"running")
    repl.expect(PROMPT)
    ask(repl, "and a quick one")
    repl.expect(r"done")
    repl.expect(PROMPT)
    ask(repl, "/bashes")
    match = repl.expect(r"1: echo started; sleep 300 & echo \$! > \S+; wait \(PID: (\d+)\) running")
    pid = int(match.group(1))
    repl.expect(r"2: echo quick; exit 3 \(PID: \d+\) \(Exit Code: 3\)")
    repl.expect(r"/shells output N shows one's output")
    repl.expect(PROMPT)
    ask(repl, "/shells output 2")
    repl.expect(r"2: echo quick; exit 3 \(PID: \d+\) — exited with code 3")
    repl.expect(r"quick")
    ask(repl, f"/shells output {pid} 5")
    repl.expect(r"started")
    repl.expect(PROMPT)
    sleeper = int(child.read_text())
    assert _alive(sleeper)
    ask(repl, "/shells kill 1")
    repl.expect(r"Killed 1: echo started; .* \(PID: \d+\): killed by signal 15")
    repl.expect(PROMPT)
    deadline = time.monotonic() + 5
    while _alive(sleeper) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(sleeper)  # the whole group: the sleep it started too
    ask(repl, "/shells")
    repl.expect(r"1: echo started.*\(killed by signal 15\)")
    ask(repl, "/shells kill all")
    repl.expect(r"No background tasks are currently active\.")
    ask(repl, "/shells output 9")
    repl.expect(r"no background shell 9 \(/shells lists them\)")
    ask(repl, "/shells frob")
    repl.expect(r"usage: /shells \[list\] \| output N \[LINES\] \| kill N\|all")
    repl.expect(PROMPT)
