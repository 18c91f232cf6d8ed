"""Output printed above the open prompt (another client's prompt and
answer, ``LineReader.above``) while the user types, on a real pty: the
keys pressed meanwhile reach the prompt unchanged. (prompt-toolkit's
``run_in_terminal`` put the terminal in cooked mode while it printed: Enter
pressed then became Ctrl-J, a newline in the prompt, and the prompt was not
sent; the same happened now and then to a test typing at startup.)"""

from __future__ import annotations

import os
import pty
import threading
import time

import pytest
import trio
from prompt_toolkit.history import InMemoryHistory
from prompt_toolkit.input import create_input
from prompt_toolkit.output import create_output

from gemini_split.ui.repl.prompt_input import LineReader

pytestmark = pytest.mark.timeout(30)


async def test_enter_pressed_while_output_prints_above_the_prompt_sends_it():
    master, slave = pty.openpty()
    stdin = os.fdopen(slave, "r", closefd=False)
    stdout = os.fdopen(os.dup(slave), "w")
    screen: list[bytes] = []
    stop = threading.Event()

    def drain() -> None:  # the terminal's screen: read so that writes never block
        while not stop.is_set():
            try:
                data = os.read(master, 65536)
            except OSError:
                return
            screen.append(data)

    threading.Thread(target=drain, daemon=True).start()
    reader = LineReader(history=InMemoryHistory(), completer=None, toolbar=lambda: "",
                        input=create_input(stdin), output=create_output(stdout))
    sent: list[str | None] = []

    def show() -> None:
        os.write(master, b"sent\r")  # the user types and presses Enter now
        time.sleep(0.3)  # the terminal takes the keys in whatever mode it is in meanwhile
        print("another client's answer", file=stdout, flush=True)

    try:
        async with trio.open_nursery() as nursery:
            async def read() -> None:
                sent.append(await reader.read())

            nursery.start_soon(read)
            with trio.fail_after(10):
                while not reader._session.app.is_running:
                    await trio.sleep(0.01)
            await trio.sleep(0.2)  # the prompt drawn
            await reader.above(show)
            with trio.move_on_after(5):
                while not sent:
                    await trio.sleep(0.05)
            if not sent:
                nursery.cancel_scope.cancel()
    finally:
        stop.set()
        stdout.close()
        stdin.close()
        os.close(slave)
        os.close(master)
    shown = b"".join(screen).decode(errors="replace")
    assert sent == ["sent"], f"the prompt was not sent; the screen: {shown[-400:]!r}"
    assert "another client's answer" in shown
