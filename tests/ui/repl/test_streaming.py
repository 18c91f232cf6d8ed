"""Issue 14 §5: a fast stream leaves every block on the screen once, code
copies as code.

The REPL's output is fed, as it arrives, to a terminal emulator (pyte) with
scrollback; frames of its screen are sampled while the answer streams. A
block drawn twice (a live region that lost track of what it printed) shows
up as a line present twice in a frame or in the scrollback.
"""

from __future__ import annotations

import re
import time
from collections import Counter

import pyte
import pytest

from .test_repl import PROMPT, ask, start_repl, workdir  # noqa: F401  (fixtures)

COLS, ROWS = 100, 30

pytestmark = pytest.mark.timeout(90)


def _answer(blocks: int) -> str:
    parts = ["# Report", ""]
    for i in range(blocks):
        parts += [f"Paragraph {i:02d} says something only it says, and goes on for a while so that it "
                  f"wraps across more than one line of the terminal at this width, number {i:02d}.", ""]
        if i % 4 == 1:
            parts += ["```python", f"def block_{i:02d}(x):", f"    value_{i:02d} = x + {i}",
                      "", f"    return value_{i:02d}", "```", ""]
        if i % 5 == 2:
            parts += [f"- item {i:02d} a", f"- item {i:02d} b", ""]
    parts.append("The end.")
    return "\n".join(parts)


def _lines(screen: pyte.HistoryScreen, *, scrollback: bool) -> list[str]:
    above = ["".join(line[x].data for x in range(COLS)) for line in screen.history.top] if scrollback else []
    return [line.rstrip() for line in [*above, *screen.display]]


UNIQUE = re.compile(r"Paragraph \d\d says|def block_\d\d|value_\d\d = x|item \d\d [ab]")


def _repeated(lines: list[str]) -> list[str]:
    seen = Counter(m.group() for line in lines for m in UNIQUE.finditer(line))
    return [key for key, count in seen.items() if count > 1]


def test_a_fast_stream_shows_each_block_once_and_code_without_padding(start_repl):  # noqa: F811
    text = _answer(24)
    repl = start_repl([{"text": text, "chunks": 400, "chunk_delay": 0.004}], rows=ROWS, cols=COLS)
    screen = pyte.HistoryScreen(COLS, ROWS, history=5000)
    stream = pyte.Stream(screen)
    fed = len(repl.raw)
    stream.feed(repl.raw)
    ask(repl, "report")
    frames = 0
    deadline = time.monotonic() + 60
    while "tokens: " not in repl.text[-400:]:
        assert time.monotonic() < deadline, "the answer did not finish"
        repl.drain(0.03)
        stream.feed(repl.raw[fed:])
        fed = len(repl.raw)
        frame = _lines(screen, scrollback=False)
        frames += 1
        assert not _repeated(frame), "a frame shows a block twice:\n" + "\n".join(frame)
    repl.expect(PROMPT)
    repl.drain(0.2)
    stream.feed(repl.raw[fed:])
    assert frames >= 5
    transcript = _lines(screen, scrollback=True)
    assert not _repeated(transcript), "\n".join(transcript)
    found = Counter(m.group() for line in transcript for m in UNIQUE.finditer(line))
    for i in range(24):
        assert found[f"Paragraph {i:02d} says"] == 1, i
    # Code copies as code: at the left margin, indentation kept, no padding.
    assert "def block_01(x):" in transcript
    assert "    value_01 = x + 1" in transcript
    assert "The end." in transcript
    raw_lines = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", repl.raw).split("\n")
    code = [line for line in raw_lines if "value_05 = x" in line]
    assert code and all(not line.rstrip("\r").endswith(" ") for line in code), code


def test_resizing_during_a_stream_and_at_the_prompt_leaves_no_stray_lines(start_repl):  # noqa: F811
    text = _answer(12)
    repl = start_repl([{"text": text, "chunks": 200, "chunk_delay": 0.01}], rows=ROWS, cols=COLS)
    screen = pyte.HistoryScreen(COLS, ROWS, history=5000)
    stream = pyte.Stream(screen)
    stream.feed(repl.raw)
    fed = len(repl.raw)
    ask(repl, "report")
    repl.expect(r"Paragraph 03 says")
    for cols in (80, 100):  # narrower, then back, while the answer streams
        repl.drain(0.1)
        stream.feed(repl.raw[fed:])
        fed = len(repl.raw)
        repl.resize(ROWS, cols)
        screen.resize(ROWS, cols)
    repl.expect(r"tokens: ")
    repl.expect(PROMPT)
    repl.resize(ROWS, 90)  # and at the prompt
    repl.drain(0.5)
    stream.feed(repl.raw[fed:])
    screen.resize(ROWS, 90)
    stream.feed("")
    display = [line.rstrip() for line in screen.display]
    toolbars = [line for line in display if " · approval " in line]
    assert len(toolbars) == 1, "\n".join(display)
    assert display[-1] == toolbars[0], "\n".join(display)  # the toolbar is the bottom line
    transcript = [*("".join(line[x].data for x in sorted(line)) for line in screen.history.top), *display]
    assert not _repeated(transcript), "\n".join(transcript)
    assert sum("The end." in line for line in transcript) == 1
