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
from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.text import Text

from gemini_split.client.approval import Answer, ApprovalRequest

from .safe_text import clip_lines, collapse_blank_runs, command_warnings, visible

if TYPE_CHECKING:
    from .render import TurnView

#: Lines of a diff shown in an approval question.
DIFF_LINES = 20
#: Characters of one line shown before it is cut in the middle.
LINE_CHARS = 600

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
        self.console.print(approval_panel(request, height=self.console.height))
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


def approval_panel(request: ApprovalRequest, *, height: int = 40) -> RenderableType:
    """What the user is asked to approve, made safe to show: every control
    character visible, runs of blank lines collapsed, long texts cut to a
    head and a tail with a marker saying how much is left out, a diff
    capped at :data:`DIFF_LINES` and coloured, and a warning line for a
    command with control characters, many lines or padding. The reason the
    policy asks (e.g. a write that runs code later) is shown under it."""
    parts: list[RenderableType] = []
    command = request.args.get("command") if request.tool.name == "run_shell_command" else None
    if isinstance(command, str):
        for warning in command_warnings(command):
            parts.append(Text(f"⚠ This command {warning}.", style="bold red"))
    lines = collapse_blank_runs(visible(request.description)).split("\n")
    lines = [_cut(line) for line in lines]
    is_diff = any(line.startswith("@@") for line in lines)
    limit = DIFF_LINES + 1 if is_diff else max(12, height - 16)
    shown, hidden = clip_lines(lines, limit, what="lines")
    body = Text()
    for i, line in enumerate(shown):
        if i:
            body.append("\n")
        body.append(line, style=_diff_style(line) if is_diff else None)
    parts.append(body)
    if hidden and not is_diff:
        parts.append(Text(f"(cut: {hidden} of {len(lines)} lines not shown)", style="bold yellow"))
    if request.reason:
        parts.append(Text(f"Asking because: {visible(request.reason)}", style="bold yellow"))
    return Panel(Group(*parts), title=f"{visible(request.tool.name, newlines=False)} wants to run "
                 f"({request.tool.kind.value})", title_align="left", border_style="yellow", expand=False)


def _cut(line: str) -> str:
    if len(line) <= LINE_CHARS:
        return line
    keep = LINE_CHARS // 2
    return f"{line[:keep]} … {len(line) - 2 * keep} more characters … {line[-keep:]}"


def _diff_style(line: str) -> str | None:
    """Red and green on a colour terminal; under NO_COLOR the console drops
    the colour and bold (added) / dim (removed) still tell them apart."""
    if line.startswith(("+++", "---")):
        return "bold"
    if line.startswith("@@"):
        return "cyan"
    if line.startswith("+"):
        return "bold green"
    if line.startswith("-"):
        return "dim red"
    if line.startswith("… "):
        return "bold yellow"
    return None
