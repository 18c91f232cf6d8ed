"""A plan presented for approval in the REPL (``exit_plan_mode``), as
gemini-cli's plan approval dialog asks it::

    ╭─ Plan: feature-x.md ───────────────────────────╮
    │ # Plan                                          │
    │ 1. …                                            │
    ╰─ ~/.gemini/tmp/…/plans/feature-x.md ────────────╯
    Approve this plan?
      1. Yes, automatically accept edits — Approves plan and allows tools to run automatically
      2. Yes, manually accept edits — Approves plan but requires confirmation for each tool
    ❯ 3. No, keep planning: type your feedback

The plan is the model's text, rendered as Markdown, made inert and cut to
the screen (the whole of it is in the file the frame names). As for every
question here, the menu starts on "No", keys typed ahead never answer it,
Escape dismisses it (the model is told the plan was not approved and it
is still in plan mode) and Ctrl-C dismisses it and cancels the turn.
"""

from __future__ import annotations

from typing import Protocol

from rich.console import Console, Group, RenderableType
from rich.markdown import Markdown
from rich.panel import Panel
from rich.text import Text

from gemini_split.tools.builtin.plan_mode import APPROVE_AUTO, APPROVE_MANUAL, PlanReview
from gemini_split.ui.safe_text import visible

from .questions import Asker

#: Lines of the plan shown at most (fewer on a small screen).
PLAN_LINES = 60
#: What the menu says of each approval (gemini-cli's descriptions).
_CHOICES = [
    ("auto", f"{APPROVE_AUTO} — Approves plan and allows tools to run automatically"),
    ("manual", f"{APPROVE_MANUAL} — Approves plan but requires confirmation for each tool"),
    ("feedback", "No, keep planning: type your feedback"),
]


class Reviewer(Asker, Protocol):
    """What the review is asked through (the REPL's ``InlineAsker``)."""


def plan_panel(review: PlanReview, height: int) -> RenderableType:
    """The plan, safe to show: control characters visible, at most
    ``height`` lines (then where the rest is)."""
    lines = visible(review.content).split("\n")
    shown = max(8, min(PLAN_LINES, height))
    hidden = max(0, len(lines) - shown)
    parts: list[RenderableType] = [Markdown("\n".join(lines[:shown]))]
    if hidden:
        parts.append(Text(f"… {hidden} more lines in the plan file", style="dim"))
    return Panel(Group(*parts), title=f"Plan: {visible(review.name, newlines=False)}", title_align="left",
                 subtitle=visible(review.path, newlines=False), subtitle_align="left", border_style="cyan")


async def review_plan(asker: Reviewer, review: PlanReview) -> str | None:
    """Ask for the plan's approval: gemini-cli's answer (an approval's
    label, or the feedback typed: "" for none), or None when dismissed."""
    console: Console = asker.console
    asker.drain()
    console.print(plan_panel(review, console.height - 10))
    value = await asker.read_choice("Approve this plan?", _CHOICES, len(_CHOICES) - 1, frozenset())
    if value == "interrupt":
        console.print(Text("✗ not approved; cancelling the turn", style="yellow"))
        asker.interrupt()
        return None
    if value == "auto" or value == "manual":
        mode = "auto_edit" if value == "auto" else "default"
        console.print(Text(f"✓ plan approved: approval mode {mode}", style="green"))
        return APPROVE_AUTO if value == "auto" else APPROVE_MANUAL
    if value == "feedback":
        typed = await asker.read_text("Your feedback: ")
        if typed is not None:
            console.print(Text("✗ not approved: your feedback goes to the model, which revises the plan",
                               style="yellow"))
            return typed
    console.print(Text("✗ dismissed: the plan is not approved; still in plan mode", style="yellow"))
    return None
