"""One-shot text output on a terminal: stderr shows a spinner until the
first token and a one-line tool status; on a pipe it shows neither. stdout
gets only the answer either way."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from tests.inprocess import cli
from .helpers import API_KEY, Sandbox

pytestmark = pytest.mark.timeout(60)

SCRIPT = [
    {"text": "Looking. ", "function_calls": [{"name": "read_file", "args": {"file_path": "a.txt"}}],
     "delay": 0.6},
    {"text": "Done.", "delay": 0.3},
]


def _run(box: Sandbox, fake: FakeGemini, stderr_tty: bool, *args: str) -> tuple[str, str]:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_"))},
           **box.environ(fake)}
    if not stderr_tty:  # a pipe: in this process (tests/inprocess.py), whose streams are no terminal
        done = cli(["-p", "go", *args], environ=env, cwd=box.project)
        return done.stdout, done.stderr
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "gemini_split", "-p", "go", *args], cwd=box.project,
                                env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=follower)
        os.close(follower)
        chunks = []
        while True:
            try:
                data = os.read(leader, 4096)
            except OSError:  # EIO: the child closed its end
                break
            if not data:
                break
            chunks.append(data)
        out = proc.stdout.read().decode()
        proc.wait(timeout=30)
        return out, b"".join(chunks).decode("utf-8", "replace")
    finally:
        os.close(leader)


@pytest.fixture
def box(tmp_path) -> Sandbox:
    box = Sandbox(tmp_path).setup()
    (box.project / "a.txt").write_text("alpha\n")
    return box


def test_a_terminal_stderr_shows_a_spinner_and_the_running_tool(box):
    with FakeGemini(script=SCRIPT, api_key=API_KEY) as fake:
        out, err = _run(box, fake, True)
    assert out == "Looking. \nDone.\n"
    assert "Thinking…" in err and "\x1b[2K" in err  # drawn, then cleared in place
    assert "Running read_file" in err


def test_a_piped_stderr_gets_no_spinner(box):
    with FakeGemini(script=SCRIPT, api_key=API_KEY) as fake:
        out, err = _run(box, fake, False)
    assert out == "Looking. \nDone.\n"
    assert "Thinking" not in err and "\x1b" not in err and "\r" not in err
    assert "→ read_file" in err


def test_screen_reader_mode_has_no_spinner(box):
    with FakeGemini(script=SCRIPT, api_key=API_KEY) as fake:
        out, err = _run(box, fake, True, "--screen-reader")
    assert out == "Looking. \nDone.\n" and "Thinking" not in err and "\x1b" not in err
