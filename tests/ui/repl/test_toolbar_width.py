"""The toolbar fits the terminal: with another client attached and the
connection being re-established, "reconnecting (attempt N)…" and
"attached 2" come first and are read whole at 120 and at 80 columns; the
hints, then the least important fields, are what is left out."""

from __future__ import annotations

import subprocess
import sys
import time

import pyte
import pytest

from gemini_split.testing.fake_gemini import FakeGemini
from gemini_split.ui.repl.loop import fit_toolbar

from tests.e2e.test_serve_e2e import API_KEY, _env, daemon
from .pty_driver import ENTER, PtyProcess
from .test_repl import PROMPT, _environ

ROWS = 24


def _toolbar_row(proc: PtyProcess, cols: int, wanted: str, timeout: float = 20) -> str:
    """The screen's toolbar row (the last line) once it shows ``wanted``."""
    deadline = time.monotonic() + timeout
    row = ""
    while time.monotonic() < deadline:
        proc.drain(0.2)
        screen = pyte.Screen(cols, ROWS)
        pyte.Stream(screen).feed(proc.raw)
        row = screen.display[-1]
        if wanted in row:
            return row
    raise AssertionError(f"the toolbar never showed {wanted!r}; it shows {row!r}")


@pytest.mark.timeout(90)
@pytest.mark.parametrize("cols", [120, 80])
def test_reconnecting_and_attached_are_read_whole_at_120_and_80_columns(tmp_path, cols):
    work = tmp_path / "work"
    work.mkdir()
    with FakeGemini(script=[{"text": "First answer."}], api_key=API_KEY) as fake, \
            daemon(tmp_path, fake, "--state-dir", str(tmp_path / "state")) as (server, address):
        repl = PtyProcess([sys.executable, "-m", "gemini_split", "--server", address, "--reconnect-timeout", "60"],
                          env=_environ(tmp_path, NO_COLOR="1"), cwd=str(work), rows=ROWS, cols=cols)
        watcher = None
        try:
            repl.expect(PROMPT, timeout=30)
            repl.type("hello")
            repl.send(ENTER)
            repl.expect(r"First answer\.", timeout=30)
            repl.expect(PROMPT)
            watcher = subprocess.Popen(
                [sys.executable, "-m", "gemini_split", "attach", "latest", "--watch", "--server", address,
                 "-o", "stream-json"], cwd=work, env=_env(), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            row = _toolbar_row(repl, cols, "attached 2")
            assert row.startswith(" attached 2 · server ws://"), row
            assert "approval default" in row
            if cols == 120:
                assert "model gemini" in row, row  # room for every field, not the hints
            else:
                assert "model" not in row, row  # the least important field left out
            server.kill()
            server.wait(10)
            row = _toolbar_row(repl, cols, "reconnecting (attempt ")
            assert row.startswith(" reconnecting (attempt "), row
            assert "… · attached 2 · " in row and "approval default" in row, row
            assert len(row.rstrip()) <= cols
        finally:
            if watcher is not None:
                watcher.kill()
                watcher.wait(10)
            repl.close()


def test_fit_toolbar_leaves_out_hints_then_the_lowest_rank_then_cuts_what_is_left():
    fields = [("note ", "abc", 9), ("model ", "m" * 10, 1), ("mode ", "x", 5)]

    def text(width: int) -> str:
        return "".join(part for _, part in fit_toolbar(fields, "hints", width))

    assert text(200) == " note abc · model mmmmmmmmmm · mode x  │ hints "
    assert text(38) == " note abc · model mmmmmmmmmm · mode x"
    assert text(30) == " note abc · mode x"
    assert text(10) == " note abc"
    assert text(8) == " note a…"
