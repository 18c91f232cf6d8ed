"""The model's ``ask_user`` questions, asked in the REPL as menus.

Each question is shown in a panel (its header as a tag, the question, the
placeholder as a hint), then asked the way approvals are
(:class:`~.approval_prompt.InlineAsker`: the turn's display paused, keys
typed ahead taken out of the terminal first so they can never answer, one
question on the screen at a time)::

    ? Database ─ Which database would you like to use?
    ❯ 1. PostgreSQL — Powerful, open source object-relational database system.
      2. SQLite — C-library that implements a SQL database engine.
      3. Other: type an answer

A choice question starts on its first option (several can be ticked when
it allows several, plus gemini-cli's "All of the above"); ``yesno`` offers
Yes and No; both end with "Other: type an answer". A ``text`` question
reads a line. Escape (or Ctrl-D) dismisses the questions — the model is
told the user did not answer; Ctrl-C dismisses them and cancels the turn.

Everything shown is what the model chose: made inert
(:func:`~.safe_text.visible`) and cut to bounds, so a question with escape
codes, a megabyte of text or thousands of lines cannot take the terminal.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.text import Text

from gemini_split.tools.builtin.ask_user import multi_answer
from gemini_split.protocol import AskUserQuestion
from gemini_split.ui.safe_text import clip_lines, visible


class Asker(Protocol):
    """What the questions are asked through: the REPL's
    :class:`~.approval_prompt.InlineAsker` (see there)."""

    console: Console
    read_choice: Callable[..., Awaitable[str]]
    read_text: Callable[[str], Awaitable[str | None]]
    drain: Callable[[], None]
    interrupt: Callable[[], None]


#: Characters of a header, a label and a description shown (then "…").
HEADER_CHARS = 40
LABEL_CHARS = 80
DESCRIPTION_CHARS = 160
#: Lines and characters of a question's text shown (head and tail, marked).
QUESTION_LINES = 20
QUESTION_CHARS = 1200
#: The menu's line that reads a typed answer instead (gemini-cli's "Other").
OTHER = "other"
ALL = "all"


def question_panel(question: AskUserQuestion, index: int, count: int) -> RenderableType:
    """One question, safe to show: control characters visible, long text
    cut with a marker saying how much was left out."""
    text = question.question
    cut = max(0, len(text) - QUESTION_CHARS)
    if cut:
        keep = QUESTION_CHARS // 2
        text = f"{text[:keep]}\n… {cut:,} more characters …\n{text[-keep:]}"
    lines, _hidden = clip_lines(visible(text).split("\n"), QUESTION_LINES, tail=2)
    parts: list[RenderableType] = [Text("\n".join(_short(line, QUESTION_CHARS) for line in lines), style="bold")]
    if question.placeholder:
        parts.append(Text(f"e.g. {_short(visible(question.placeholder, newlines=False), LABEL_CHARS)}",
                          style="dim"))
    header = _short(visible(question.header, newlines=False), HEADER_CHARS) or "Question"
    title = f"? {header}" + (f" ({index + 1}/{count})" if count > 1 else "")
    return Panel(Group(*parts), title=title, title_align="left", border_style="cyan", expand=False)


def menu_choices(question: AskUserQuestion) -> tuple[list[tuple[str, str]], frozenset[str]]:
    """The menu of a choice or yes/no question: ``(value, label)`` pairs
    and the values that can be ticked together (empty: one pick)."""
    if question.type == "yesno":
        options = [("Yes", ""), ("No", "")]
    else:
        options = [(o.label, o.description) for o in question.options]
    choices = []
    for i, (label, description) in enumerate(options):
        shown = _short(visible(label, newlines=False), LABEL_CHARS)
        if description:
            shown += f" — {_short(visible(description, newlines=False), DESCRIPTION_CHARS)}"
        choices.append((str(i), shown))
    multi = question.multi_select and question.type == "choice"
    if multi and len(options) > 1:
        choices.append((ALL, "All of the above"))
    choices.append((OTHER, "Other: type an answer"))
    return choices, frozenset(v for v, _ in choices if v != OTHER) if multi else frozenset()


async def ask_questions(asker: Asker, questions: tuple[AskUserQuestion, ...]) -> dict[str, str] | None:
    """Ask each question in turn; the answers by index, or None when the
    user dismissed them (Ctrl-C also cancels the turn)."""
    console = asker.console
    asker.drain()
    answers: dict[str, str] = {}
    for index, question in enumerate(questions):
        console.print(question_panel(question, index, len(questions)))
        answer = await _answer(asker, question)
        if answer is _INTERRUPTED:
            console.print(Text("✗ not answered; cancelling the turn", style="yellow"))
            asker.interrupt()
            return None
        if answer is None:
            console.print(Text("✗ dismissed: the model is told you did not answer", style="yellow"))
            return None
        if answer:
            answers[str(index)] = answer
    shown = Text("✓ answered", style="green")
    for key, answer in answers.items():
        header = _short(visible(questions[int(key)].header, newlines=False), HEADER_CHARS) or f"Q{key}"
        shown.append(f"\n  {header} → {_short(visible(answer), LABEL_CHARS * 4)}")
    console.print(shown)
    return answers


_INTERRUPTED = object()


async def _answer(asker: Asker, question: AskUserQuestion) -> str | object | None:
    """One question's answer ("" when left empty), None when dismissed,
    ``_INTERRUPTED`` on Ctrl-C."""
    if question.type == "text":
        return await asker.read_text("Your answer: ")
    choices, multi = menu_choices(question)
    header = _short(visible(question.header, newlines=False), HEADER_CHARS) or "Your answer"
    value = await asker.read_choice(f"{header}?", choices, 0, multi)
    if value == "interrupt":
        return _INTERRUPTED
    if value == "escape":
        return None
    picked = value.split("\n")
    labels = ["Yes", "No"] if question.type == "yesno" else [o.label for o in question.options]
    if ALL in picked:
        picked = [str(i) for i in range(len(labels))]
    other = ""
    if OTHER in picked:
        typed = await asker.read_text("Your answer: ")
        if typed is None:
            return None
        other = typed
    chosen = [labels[int(v)] for v in picked if v.isdigit() and int(v) < len(labels)]
    return multi_answer(chosen, other)


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
