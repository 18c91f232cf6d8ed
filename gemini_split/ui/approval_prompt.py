"""Approval questions asked inline, answered with one key.

The REPL gives the tool executor an :class:`InlineAsker`. When a tool call
needs approval, the running turn's live display is paused, the exact action
is shown, and one key answers: ``y`` yes, ``n`` no, ``a`` always (this tool,
for the rest of the session). Escape refuses; Ctrl-C refuses and cancels the
whole turn. Questions are asked one at a time even when the model calls
several tools at once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import trio
from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from gemini_split.client.approval import Answer, ApprovalRequest

if TYPE_CHECKING:
    from .render import TurnView

KEYS = {"y": "yes", "Y": "yes", "n": "no", "N": "no", "a": "always", "A": "always"}
QUESTION = "Allow? [y]es / [n]o / [a]lways for this session: "

KeyReader = Callable[[str, dict[str, str]], Awaitable[str]]


class InlineAsker:
    """An :class:`~gemini_split.client.approval.Asker` for the REPL.

    ``read_answer(question, keys)`` reads one key (prompt-toolkit in a worker
    thread, or a line when not on a terminal); ``view()`` is the running
    turn's view, paused while asking; ``interrupt()`` starts cancelling the
    turn (without waiting: this call runs inside the turn's tool scope,
    which the cancel cancels)."""

    def __init__(
        self,
        console: Console,
        read_answer: KeyReader,
        view: Callable[[], TurnView | None],
        interrupt: Callable[[], None],
    ):
        self.console = console
        self.read_answer = read_answer
        self.view = view
        self.interrupt = interrupt
        self._lock = trio.Lock()

    async def ask(self, request: ApprovalRequest) -> Answer:
        async with self._lock:
            view = self.view()
            if view is not None:
                view.pause()
            try:
                return await self._ask(request)
            finally:
                if view is not None:
                    view.resume()

    async def _ask(self, request: ApprovalRequest) -> Answer:
        kind = request.tool.kind.value
        body = Text(request.description)
        self.console.print(Panel(body, title=f"{request.tool.name} wants to run ({kind})",
                                 title_align="left", border_style="yellow", expand=False))
        key = await self.read_answer(QUESTION, KEYS)
        if key == "interrupt":
            self.console.print(Text("✗ refused; cancelling the turn", style="yellow"))
            self.interrupt()
            return Answer.NO
        answer = {"yes": Answer.YES, "always": Answer.ALWAYS}.get(key, Answer.NO)
        said = {
            Answer.YES: ("✓ allowed", "green"),
            Answer.ALWAYS: (f"✓ allowed, and {request.tool.name} will not ask again this session", "green"),
            Answer.NO: ("✗ refused", "yellow"),
        }[answer]
        self.console.print(Text(said[0], style=said[1]))
        return answer
