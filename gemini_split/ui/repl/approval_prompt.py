"""Approval questions asked inline, answered by a deliberate choice.

The REPL gives the tool executor an :class:`InlineAsker`. When a tool call
needs approval, the running turn's live display is paused, keys typed ahead
are taken out of the terminal (they go back into the next prompt, never to
the question), the exact action is shown (:func:`approval_panel`), and a
menu asks::

    Allow run_shell_command: echo hello?
    ❯ 1. Yes, allow once
      2. Yes, and allow `echo …` commands for the rest of this session
      3. No
      4. No, and tell the model what to do instead

It starts on "No"; the arrow keys and Enter pick, a number key picks at
once; letters do nothing. Escape refuses; Ctrl-C refuses and cancels the
whole turn. "Tell the model" reads a line that goes to the model with the
refusal. Questions are asked one at a time even when the model calls
several tools at once. Every "always" answer is kept as a :class:`Grant`,
listed and revoked by ``/permissions``.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import trio
from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.text import Text

from gemini_split.tools.approval import Answer, ApprovalPolicy, ApprovalRequest
from gemini_split.tools.base import ToolFailed
from gemini_split.tools.builtin.plan_mode import APPROVED_MODES, PlanReview
from gemini_split.protocol import AskUserQuestion
from gemini_split.ui.safe_text import clip_lines, collapse_blank_runs, command_warnings, visible

from .plan_review import review_plan
from .questions import ask_questions

if TYPE_CHECKING:
    from gemini_split.ui.render import TurnView

#: Lines of a diff shown in an approval question (then "Show all").
DIFF_LINES = 20
#: Characters of one line shown before it is cut in the middle.
LINE_CHARS = 600
#: Characters of the command or path repeated in the question line.
SUBJECT_CHARS = 60

#: ``await read_choice(header, choices, default, multi=None)`` (see
#: :func:`gemini_split.ui.repl.prompt_input.read_choice`).
ChoiceReader = Callable[..., Awaitable[str]]
#: ``read_text(question, secret=False)``: a line, or None.
TextReader = Callable[..., Awaitable["str | None"]]

SHELL_TOOL = "run_shell_command"


@dataclass(frozen=True)
class Grant:
    """What one "always" answer allowed for the rest of the session: a
    tool outright, or shell commands starting with ``roots``."""

    tool: str
    roots: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.roots:
            return ", ".join(f"`{visible(r, newlines=False)} …`" for r in self.roots) + " shell commands"
        return f"every {visible(self.tool, newlines=False)} call"

    def revoke(self, policy: ApprovalPolicy) -> None:
        """Take it back from ``policy`` (what ``--allowed-tools`` allowed stays)."""
        policy.forget(self.tool, self.roots)


def grant_for(request: ApprovalRequest) -> Grant | None:
    """The grant an "always" answer to ``request`` would make, or None when
    "always" cannot be offered (a command the splitter cannot reduce to
    its root commands)."""
    scope = request.always_scope
    if not scope:
        return None
    roots = tuple(re.findall(rf"{SHELL_TOOL}\(([^)]*)\)", scope))
    if request.tool.name == SHELL_TOOL:
        return Grant(SHELL_TOOL, roots) if roots else None
    return Grant(request.tool.name)


class InlineAsker:
    """An :class:`~gemini_split.tools.approval.Asker` for the REPL.

    ``read_choice(header, choices, default)`` shows a menu and returns the
    chosen value (or ``"interrupt"`` / ``"escape"``); ``read_text(question)``
    reads a line; ``drain()`` takes keys typed ahead out of the terminal
    (the REPL keeps them for its next prompt); ``view()`` is the running
    turn's view, paused while asking; ``interrupt()`` starts cancelling the
    turn (without waiting: this call runs inside the turn's tool scope,
    which the cancel cancels)."""

    def __init__(
        self,
        console: Console,
        read_choice: ChoiceReader,
        read_text: TextReader,
        view: Callable[[], TurnView | None],
        interrupt: Callable[[], None],
        drain: Callable[[], None] = lambda: None,
        hold_prompt: Callable[[], AbstractAsyncContextManager[None]] | None = None,
        read_search: ChoiceReader | None = None,
    ):
        self.console = console
        self.read_choice = read_choice
        self.read_text = read_text
        #: ``read_search(header, choices)``: a list narrowed by what is typed
        #: (``/resume``); the plain menu when none is given.
        self.read_search = read_search or (lambda header, choices: read_choice(header, choices, 0))
        self.view = view
        self.interrupt = interrupt
        self.drain = drain
        #: Closes the REPL's line prompt while a question shows (its text
        #: kept), opened again after: one reader of the keys at a time.
        self.hold_prompt = hold_prompt or _nothing_to_hold
        #: "Always" answers of this session, oldest first (``/permissions``).
        self.grants: list[Grant] = []
        #: The last plan approved here (``/plan`` shows it, ``/plan copy`` copies it).
        self.approved_plan: PlanReview | None = None
        self._lock = trio.Lock()

    async def ask(self, request: ApprovalRequest) -> Answer:
        """Ask about ``request``. Cancelled (the call ended, or was decided
        elsewhere), the menu goes away and nothing typed into it is used."""
        async with self._lock, self.hold_prompt():
            view = self.view()
            if view is not None:
                view.pause()
            try:
                return await self._ask(request)
            finally:
                if view is not None:
                    view.resume()

    async def ask_user(self, call_id: str, questions: tuple[AskUserQuestion, ...]) -> dict[str, str] | None:
        """The model's ``ask_user`` questions (:mod:`.questions`), asked
        like an approval: one question on the screen at a time, keys typed
        ahead kept for the next prompt. Cancelled, the menu goes away and
        nothing typed into it is used."""
        async with self._lock, self.hold_prompt():
            view = self.view()
            if view is not None:
                view.pause()
            try:
                return await ask_questions(self, questions)
            finally:
                if view is not None:
                    view.resume()

    async def approve_plan(self, call_id: str, review: PlanReview) -> str | None:
        """A plan for approval (``exit_plan_mode``, :mod:`.plan_review`),
        asked like an approval; an approved one is kept for ``/plan``."""
        async with self._lock, self.hold_prompt():
            view = self.view()
            if view is not None:
                view.pause()
            try:
                answer = await review_plan(self, review)
            finally:
                if view is not None:
                    view.resume()
        if answer in APPROVED_MODES:
            self.approved_plan = review
        return answer

    def withdrawn(self, tool: str, reason: str) -> None:
        """A question asked here ended without an answer from here: say so
        (the menu has gone already)."""
        self.console.print(Text(f"· no longer asking about {visible(tool, newlines=False)}: {reason}",
                                style="yellow"))

    async def _ask(self, request: ApprovalRequest) -> Answer:
        self.drain()
        grant = grant_for(request)
        full = False
        while True:
            panel, hidden = approval_panel(request, height=self.console.height, full=full)
            self.console.print(panel)
            choices = [("yes", "Yes, allow once")]
            if grant is not None:
                choices.append(("always", f"Yes, and allow {grant.describe()} for the rest of this session"))
            choices += [("no", "No"), ("tell", "No, and tell the model what to do instead")]
            if hidden:
                choices.append(("show", "Show all of it, then ask again"))
            default = [value for value, _ in choices].index("no")
            value = await self.read_choice(question_line(request), choices, default)
            if value != "show":
                break
            full = True
        if value == "interrupt":
            self.console.print(Text("✗ refused; cancelling the turn", style="yellow"))
            self.interrupt()
            return Answer.NO
        if value == "tell":
            words = await self.read_text("Tell the model what to do instead: ")
            if words and words.strip():
                self.console.print(Text("✗ refused; your words go to the model with the refusal", style="yellow"))
                raise ToolFailed("refused", f"the user declined to run {request.tool.name} and said: "
                                 f"{words.strip()}", "do what the user said instead")
        answer = {"yes": Answer.YES, "always": Answer.ALWAYS}.get(value, Answer.NO)
        if answer is Answer.ALWAYS and grant is not None:
            if grant not in self.grants:
                self.grants.append(grant)
            said = (f"✓ allowed, and {grant.describe()} will not ask again this session "
                    "(/permissions lists and revokes)")
        else:
            said = "✓ allowed" if answer is Answer.YES else "✗ refused"
        self.console.print(Text(said, style="green" if answer is not Answer.NO else "yellow"))
        return answer


@asynccontextmanager
async def _nothing_to_hold() -> AsyncIterator[None]:
    yield


def question_line(request: ApprovalRequest) -> str:
    """``Allow TOOL: SUBJECT?`` with the command or path (one line, control
    characters visible, marked when cut)."""
    subject = request.args.get("command") if request.tool.name == SHELL_TOOL else None
    if not isinstance(subject, str):
        for key in ("file_path", "dir_path", "url", "path"):
            if isinstance(request.args.get(key), str):
                subject = request.args[key]
                break
    name = visible(request.tool.name, newlines=False)
    # (1.4) A sub-agent's call says which agent asks.
    who = f"[sub-agent {visible(request.agent, newlines=False)}] " if request.agent else ""
    if not isinstance(subject, str):
        return f"{who}Allow {name}?"
    shown = visible(subject.strip(), newlines=False)
    if len(shown) > SUBJECT_CHARS:
        shown = shown[:SUBJECT_CHARS - 1] + "… (cut: see above)"
    return f"{who}Allow {name}: {shown}?"


def approval_panel(request: ApprovalRequest, *, height: int = 40, full: bool = False) -> tuple[RenderableType, int]:
    """What the user is asked to approve, made safe to show, and how many
    lines were left out or cut short (0 when ``full`` or all fit).

    Every control character is visible, runs of blank lines are collapsed,
    long lines and texts are cut to a head and a tail with a marker saying
    how much is left out, a diff is capped at :data:`DIFF_LINES` and
    coloured, and a warning line flags a command with control characters,
    many lines or padding. Why the policy asks (e.g. a write to a file that
    runs code later) is shown under it."""
    parts: list[RenderableType] = []
    command = request.args.get("command") if request.tool.name == SHELL_TOOL else None
    if isinstance(command, str):
        for warning in command_warnings(command):
            parts.append(Text(f"⚠ This command {warning}.", style="bold red"))
    later = request.executes_later
    if later:
        parts.append(Text(f"⚠ This edits {visible(later)}.", style="bold red"))
    lines = collapse_blank_runs(visible(request.description)).split("\n")
    cut = 0 if full else sum(len(line) > LINE_CHARS for line in lines)
    if cut:
        lines = [_cut(line) for line in lines]
    is_diff = any(line.startswith("@@") for line in lines)
    limit = DIFF_LINES + 1 if is_diff else max(12, height - 16)
    shown, hidden = (lines, 0) if full else clip_lines(lines, limit, tail=1 if is_diff else None)
    body = Text()
    for i, line in enumerate(shown):
        if i:
            body.append("\n")
        body.append(line, style=_diff_style(line) if is_diff else None)
    parts.append(body)
    if request.reason:
        parts.append(Text(f"Asking because {visible(request.reason)}", style="bold yellow"))
    if request.note:
        parts.append(Text(visible(request.note), style="yellow"))
    title = f"{visible(request.tool.name, newlines=False)} wants to run ({request.tool.kind.value})"
    if request.agent:
        title = f"sub-agent {visible(request.agent, newlines=False)}: {title}"
    panel = Panel(Group(*parts), title=title, title_align="left", border_style="yellow", expand=False)
    return panel, hidden + cut


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
