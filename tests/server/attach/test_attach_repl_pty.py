"""``gemini-split attach`` in the REPL under a real terminal (issue 11 §4):
another client's prompt and answer arriving while this REPL's prompt is open
are printed above it, and the prompt — with what the user was typing — is
drawn again, whole, below them. The screen is what a terminal emulator
(pyte) shows, as a person would see it."""

from __future__ import annotations

import sys

import pyte
import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from tests.ui.repl.pty_driver import ENTER, PtyProcess
from tests.ui.repl.test_repl import PROMPT, _environ
from tests.e2e.test_serve_e2e import API_KEY, client, daemon

pytestmark = pytest.mark.timeout(90)

ROWS, COLS = 30, 100


def screen_of(proc: PtyProcess) -> list[str]:
    """The emulated terminal's lines, those scrolled off its top first."""
    screen = pyte.HistoryScreen(COLS, ROWS, history=10_000)
    pyte.Stream(screen).feed(proc.raw)
    above = ["".join(line[x].data for x in range(COLS)) for line in screen.history.top]
    return [line.rstrip() for line in [*above, *screen.display]]


def test_another_clients_turn_prints_above_the_open_prompt_and_the_typed_line_survives(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    script = [{"text": "First answer."}, {"text": "The phone's answer."}, {"text": "Laptop heard."}]
    with FakeGemini(script=script, api_key=API_KEY) as fake, \
            daemon(tmp_path, fake, "--state-dir", str(tmp_path / "state")) as (_, address):
        first = client(["--server", address, "-p", "first question"], cwd=work, in_process=False)
        assert first.returncode == 0, first.stderr
        # The client's options after 'attach', as people type them.
        repl = PtyProcess([sys.executable, "-m", "gemini_split", "attach", "latest", "--server", address,
                           "--label", "laptop"],
                          env=_environ(tmp_path, NO_COLOR="1"), cwd=str(work), rows=ROWS, cols=COLS)
        try:
            repl.expect(r"First answer\.", timeout=30)  # the last turn, replayed
            repl.expect(PROMPT)
            repl.type("half a tho")  # typing, not sent
            repl.drain(0.3)
            other = client(["--server", address, "--resume", "latest", "-p", "phone question"], cwd=work,
                           in_process=False)
            assert other.returncode == 0, other.stderr
            repl.expect(r"phone question")
            repl.expect(r"The phone's answer\.")
            repl.expect(r"› half a tho")  # drawn again below
            repl.drain(0.5)
            screen = screen_of(repl)
            asked = next(i for i, line in enumerate(screen) if "phone question" in line)
            answered = next(i for i, line in enumerate(screen) if "The phone's answer." in line)
            prompt = max(i for i, line in enumerate(screen) if line.startswith(PROMPT))
            assert asked < answered < prompt, "\n".join(screen)
            # Nothing printed into the line being typed, nor the line into the output.
            assert screen[prompt] == f"{PROMPT}half a tho", "\n".join(screen)
            assert not any("half a tho" in line for line in screen[:prompt]), "\n".join(screen)
            repl.type("ught")
            repl.send(ENTER)
            repl.expect(r"Laptop heard\.")
            repl.expect(PROMPT)
            repl.send("\x04")  # Ctrl-D leaves
            assert repl.wait(timeout=20) == 0
        finally:
            repl.close()
        sent = [r for r in fake.requests if "half a thought" in str(r)]
    assert sent, "the typed line reached the model whole"


def test_an_idle_repl_streams_another_clients_answer_line_by_line_in_order_while_it_runs(tmp_path):
    """Issue 46 §2: the other client's answer is shown as it streams (a whole
    line at a time above the open prompt), not all at once when it ends."""
    import subprocess

    from tests.e2e.test_serve_e2e import _env

    work = tmp_path / "work"
    work.mkdir()
    lines = "".join(f"streamed line {i:02d}\n" for i in range(12))
    script = [{"text": "First answer."}, {"text": lines, "chunks": 12, "chunk_delay": 0.5}]
    with FakeGemini(script=script, api_key=API_KEY) as fake, \
            daemon(tmp_path, fake, "--state-dir", str(tmp_path / "state")) as (_, address):
        first = client(["--server", address, "-p", "first question"], cwd=work, in_process=False)
        assert first.returncode == 0, first.stderr
        repl = PtyProcess([sys.executable, "-m", "gemini_split", "attach", "latest", "--server", address,
                           "--label", "laptop"],
                          env=_environ(tmp_path, NO_COLOR="1"), cwd=str(work), rows=ROWS, cols=COLS)
        other = None
        try:
            repl.expect(r"First answer\.", timeout=30)
            repl.expect(PROMPT)
            other = subprocess.Popen([sys.executable, "-m", "gemini_split", "--server", address, "--resume", "latest",
                                      "-p", "stream for me"], cwd=work, env=_env(), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
            repl.expect(r"streamed line 01", timeout=30)
            assert other.poll() is None, "the line came only after the other client's turn ended"
            repl.expect(r"streamed line 11", timeout=30)
            assert other.wait(timeout=30) == 0
            repl.drain(0.5)
            screen = [line for line in screen_of(repl) if "streamed line" in line]
            assert screen == [f"streamed line {i:02d}" for i in range(12)], screen
            repl.send("\x04")
            assert repl.wait(timeout=20) == 0
        finally:
            if other is not None and other.poll() is None:
                other.kill()
            repl.close()
