"""The REPL's choice menu (``prompt_input.read_choice``) as a terminal
shows it: a real prompt-toolkit application reading keys from a pipe and
drawing on a VT100 output 40 columns wide."""

from __future__ import annotations

import io
import re

import pytest
import trio
from prompt_toolkit.data_structures import Size
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output.vt100 import Vt100_Output

from gemini_split.ui.repl.prompt_input import read_choice

pytestmark = pytest.mark.timeout(30)

_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Za-z0-9]|\x1b[=>]|[\r\x07]")


async def test_a_line_longer_than_the_terminal_is_wrapped_not_cut():
    label = "Yes, allow always: run_shell_command git push --force origin main && echo the-end-of-it"
    screen = io.StringIO()
    output = Vt100_Output(screen, lambda: Size(rows=24, columns=40), term="xterm")
    with create_pipe_input() as keys:
        keys.send_text("2")
        chosen = await read_choice("Allow?", [("once", "Yes, once"), ("always", label)], default=0,
                                   input=keys, output=output)
    assert chosen == "always"
    shown = _ESCAPES.sub("", screen.getvalue()).replace("\n", "")
    # Every word of the long line reached the screen, its end included.
    assert "the-end-of-it" in shown


async def test_the_searchable_list_narrows_as_you_type_and_enter_picks_the_line_under_the_cursor():
    from gemini_split.ui.repl.prompt_input import read_search

    choices = [("a", "2024-01-02 · pick a colour"), ("b", "2024-01-03 · pick a drink"), ("c", "2024-01-04 · cook")]
    screen = io.StringIO()
    output = Vt100_Output(screen, lambda: Size(rows=24, columns=60), term="xterm")
    picked = []
    with create_pipe_input() as keys:
        async with trio.open_nursery() as nursery:
            async def search() -> None:
                picked.append(await read_search("Which?", choices, input=keys, output=output))

            nursery.start_soon(search)
            keys.send_text("PICK")  # any case
            # The narrowed list is drawn before the next key (keys sent at
            # once may be read before any redraw).
            with trio.fail_after(10):
                while "2 of 3" not in _ESCAPES.sub("", screen.getvalue()):
                    await trio.sleep(0.02)
            keys.send_text("\x1b[B\r")  # down to the second match
    assert picked == ["b"]
    assert "Search: " in _ESCAPES.sub("", screen.getvalue())
    with create_pipe_input() as keys:
        keys.send_text("zzz\r\x1b")  # Enter on nothing keeps searching; Escape dismisses
        assert await read_search("Which?", choices, input=keys, output=output) == "escape"


async def test_the_plain_searchable_list_takes_words_then_a_number():
    from gemini_split.ui.repl.prompt_input import PlainLineReader

    choices = [("a", "pick a colour"), ("b", "pick a drink"), ("c", "cook")]
    err = io.StringIO()
    reader = PlainLineReader(io.StringIO("drink\n1\n"), err)
    assert await reader.read_search("Which?", choices) == "b"
    assert "(1 of 3)" in err.getvalue()
    assert await PlainLineReader(io.StringIO("\n"), io.StringIO()).read_search("Which?", choices) == "escape"
