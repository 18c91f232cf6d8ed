"""Issue 13 §1: escape sequences in model-chosen text must not hide what an
approval approves.

The REPL runs under a pseudo-terminal; everything it writes is fed to a
terminal emulator (pyte), and the assertions are about what that emulated
screen shows — what a person would see — not about the bytes.
"""

from __future__ import annotations

import pyte
import pytest

from gemini_split.ui.safe_text import clip_lines, collapse_blank_runs, command_warnings, has_controls, visible

from .pty_driver import ENTER, PtyProcess
from .test_repl import PROMPT, ask, start_repl, workdir  # noqa: F401  (fixtures)

pytestmark = pytest.mark.timeout(60)

ROWS, COLS = 40, 110

ATTACKS = {
    "erase-line": "true ; touch FLAG ; true \x1b[2K\x1b[1Gecho hello",
    "cursor-up": "true ; touch FLAG ; true\n\x1b[1A\x1b[2Kecho hello",
    "conceal": "\x1b[8mtrue ; touch FLAG ; true\x1b[0m\recho hello",
    "sixty-newlines": "true ; touch FLAG ; true" + "\n" * 60 + "echo hello",
    "bidi": "echo hello \u202e; touch FLAG ; true",
}


def screen_of(proc: PtyProcess, *, scrollback: bool = False) -> list[str]:
    """The emulated terminal's screen after everything the program wrote
    (with the lines scrolled off its top when ``scrollback``)."""
    screen = pyte.HistoryScreen(COLS, ROWS, history=10_000)
    pyte.Stream(screen).feed(proc.raw)
    above = ["".join(line[x].data for x in range(COLS)) for line in screen.history.top] if scrollback else []
    return [line.rstrip() for line in [*above, *screen.display]]


# --- the sanitiser ---------------------------------------------------------------


def test_visible_shows_every_control_character_and_keeps_text():
    assert visible("a\x1b[2Kb") == "a␛[2Kb"
    assert visible("x\ry") == "x␍y"
    assert visible("line\r\nnext") == "line\nnext"
    assert visible("\x00\x07\x08\x7f") == "␀␇␈␡"
    assert visible("\x9b31m") == "\\x9b31m"
    assert visible("evil\u202etxt.exe") == "evil\\u202etxt.exe"
    assert visible("zero\u200bwidth") == "zero\\u200bwidth"
    assert visible("a\tb\nc") == "a\tb\nc"
    assert visible("a\nb", newlines=False) == "a␤b"
    assert visible("héllo — ✓ 日本") == "héllo — ✓ 日本"
    assert has_controls("\x1b") and not has_controls("plain\ttext\r\n")


def test_command_warnings_flag_what_the_first_line_hides():
    assert command_warnings("git status") == []
    warnings = " ".join(command_warnings(ATTACKS["sixty-newlines"]))
    assert "61 lines" in warnings and "59 blank lines" in warnings
    assert "control character" in " ".join(command_warnings(ATTACKS["erase-line"]))
    assert "spaces" in " ".join(command_warnings("echo hi" + " " * 200 + "; rm -rf ~"))


def test_collapse_and_clip_say_what_they_leave_out():
    assert collapse_blank_runs("a\n\n\n\n\nb") == "a\n\n⋮ (4 blank lines)\nb"
    assert collapse_blank_runs("a\n\nb") == "a\n\nb"
    shown, hidden = clip_lines([str(i) for i in range(100)], 10)
    assert hidden == 91 and shown[0] == "0" and shown[-1] == "99" and "91 more lines" in shown[6]


# --- through a terminal emulator -----------------------------------------------------


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_an_approval_shows_the_whole_command_whatever_it_contains(start_repl, workdir, attack):  # noqa: F811
    command = ATTACKS[attack]
    repl = start_repl([{"function_calls": [{"name": "run_shell_command", "args": {"command": command}}]},
                       {"text": "done"}])
    ask(repl, "run it")
    repl.expect(r"Allow (run_shell_command|write_file)")
    repl.drain(0.3)
    screen = "\n".join(screen_of(repl))
    assert "touch FLAG" in screen, screen
    assert "echo hello" in screen
    assert "⚠ This command" in screen, screen
    if attack != "sixty-newlines":
        assert "control character" in screen
    else:
        assert "59 blank lines" in screen
    repl.send(ENTER)  # the menu starts on "No"
    repl.expect(r"refused")
    repl.expect(PROMPT)
    assert not (workdir / "FLAG").exists()


def test_model_text_thoughts_and_tool_output_cannot_drive_the_terminal(start_repl, workdir):  # noqa: F811
    (workdir / "evil.txt").write_text("before\x1b[2J\x1b[Hwiped\n")
    repl = start_repl([
        {"thought": "think \x1b[8mhidden-thought", "function_calls": [
            {"name": "read_file", "args": {"file_path": "evil.txt"}}]},
        {"text": "Answer \x1b[8mconcealed\x1b[0m and \x1b[1A\x1b[2Kerased"},
    ])
    ask(repl, "go")
    repl.expect(r"erased")
    repl.expect(PROMPT)
    repl.drain(0.2)
    screen = "\n".join(screen_of(repl, scrollback=True))
    assert "Answer ␛[8mconcealed␛[0m and ␛[1A␛[2Kerased" in screen, screen
    assert "␛[8mhidden-thought" in screen
    assert "read_file(file_path='evil.txt')" in screen
    # Nothing was wiped: the banner is still on the screen.
    assert "/help for commands" in screen


def test_a_write_that_runs_code_later_is_named_in_the_question(start_repl, workdir):  # noqa: F811
    (workdir / ".git" / "hooks").mkdir(parents=True)
    repl = start_repl([{"function_calls": [{"name": "write_file", "args": {
        "file_path": ".git/hooks/pre-commit", "content": "#!/bin/sh\ntouch FLAG\n"}}]}, {"text": "ok"}],
        "--approval-mode", "auto_edit")
    ask(repl, "add a hook")
    repl.expect(r"Allow write_file: \.git/hooks/pre-commit\?")
    repl.drain(0.3)
    screen = "\n".join(screen_of(repl))
    assert "⚠ This edits a file inside .git" in screen, screen
    assert "+touch FLAG" in screen
    repl.send(ENTER)
    repl.expect(r"refused")
    assert not (workdir / ".git" / "hooks" / "pre-commit").exists()
