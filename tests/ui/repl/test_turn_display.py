"""What a turn looks like in the REPL (under a pty, as a terminal shows
it): a tool result's preview counts lines as a person does, and text the
model wrote before a tool call is shown before the tool's line, apart from
the text after it."""

from __future__ import annotations

import pyte
import pytest

from .pty_driver import PtyProcess
from .test_repl import PROMPT, ask, start_repl, workdir  # noqa: F401 (fixtures)

pytestmark = pytest.mark.timeout(60)


def screen_lines(proc: PtyProcess, cols: int = 110, rows: int = 40) -> list[str]:
    """The emulated terminal's lines, those scrolled off its top first."""
    screen = pyte.HistoryScreen(cols, rows, history=10_000)
    pyte.Stream(screen).feed(proc.raw)
    above = ["".join(line[x].data for x in range(cols)) for line in screen.history.top]
    return [line.rstrip() for line in [*above, *screen.display]]


def test_a_one_line_file_read_is_previewed_as_one_line(start_repl, workdir):
    (workdir / "one.txt").write_text("just this line\n")
    (workdir / "three.txt").write_text("first\nsecond\nthird\n")
    repl = start_repl([
        {"function_calls": [{"name": "read_file", "args": {"file_path": "one.txt"}}]},
        {"function_calls": [{"name": "read_file", "args": {"file_path": "three.txt"}}]},
        {"text": "Read both."},
    ])
    ask(repl, "read them")
    repl.expect(r"Read both\.")
    repl.expect(PROMPT)
    screen = screen_lines(repl)
    one = next(line for line in screen if "just this line" in line)
    three = next(line for line in screen if "│ first" in line)
    assert one.rstrip().endswith("just this line"), "\n".join(screen)  # no "(+1 lines)"
    assert three.rstrip().endswith("first  (+2 more lines)"), "\n".join(screen)


def test_text_before_a_tool_call_is_printed_before_the_tool_line_and_apart_from_what_follows(start_repl):
    repl = start_repl([
        {"text": "I am calling a tool", "function_calls": [{"name": "read_file", "args": {"file_path": "notes.txt"}}]},
        {"text": "TOOL-RESULT says the notes."},
    ])
    ask(repl, "go")
    repl.expect(r"TOOL-RESULT says the notes\.")
    repl.expect(PROMPT)
    screen = screen_lines(repl)
    before = next(i for i, line in enumerate(screen) if "I am calling a tool" in line)
    tool = next(i for i, line in enumerate(screen) if "read_file(" in line)
    after = next(i for i, line in enumerate(screen) if "TOOL-RESULT" in line)
    assert before < tool < after, "\n".join(screen)
    assert "TOOL-RESULT" not in screen[before], "\n".join(screen)
