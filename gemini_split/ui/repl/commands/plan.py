"""``/plan [goal]`` and ``/plan copy``: gemini-cli 0.61's plan mode command.

``/plan`` switches the session to plan mode ("Switched to Plan Mode.") and
shows the plan last approved here, if any; ``/plan GOAL`` switches and
sends GOAL as a prompt at once; ``/plan copy`` copies the approved plan
to the clipboard. The plan is the file as it is now where this client can
read it (the tools run here), else as it was approved (a server's plan).
"""

from __future__ import annotations

from pathlib import Path

import trio
from rich.markdown import Markdown
from rich.text import Text

from gemini_split.tools.approval_mode import ApprovalMode
from gemini_split.tools.builtin.plan_mode import PlanReview
from gemini_split.ui.safe_text import visible

from ..command_context import CommandContext, CommandUsage
from .clipboard import copy_text

USAGE = "/plan [GOAL] | /plan copy"


async def plan_command(repl: CommandContext, args: list[str]) -> None:
    """``args``: nothing, ``["copy"]``, or the goal as typed (one string)."""
    if repl.settings.tools.plans is None and repl.settings.tools.run_on == "client":
        raise CommandUsage("Plan Mode is disabled in your settings (general.plan.enabled is false)")
    if args == ["copy"]:
        await _copy(repl)
        return
    if repl.approval_mode is not ApprovalMode.PLAN:
        repl.set_approval_mode(ApprovalMode.PLAN)
        repl.console.print(Text("Switched to Plan Mode.", style="cyan"))
    if args:
        await repl.run_turn(args[0])
        return
    plan = await _approved(repl)
    if plan is not None:
        repl.console.print(Text(f"Approved Plan: {visible(plan.name, newlines=False)}", style="cyan"))
        repl.console.print(Markdown(visible(plan.content)))


async def _copy(repl: CommandContext) -> None:
    plan = await _approved(repl)
    if plan is None:
        raise CommandUsage("No approved plan found to copy.")
    how = copy_text(plan.content, repl.env.stdout, repl.env.environ)
    repl.console.print(Text(f"Plan copied to clipboard ({visible(plan.name, newlines=False)}) {how}.",
                            style="green"))


async def _approved(repl: CommandContext) -> PlanReview | None:
    """The plan last approved here, as its file is now when this client
    can read it, else as it was approved."""
    plan = repl.asker.approved_plan
    if plan is None or repl.settings.tools.run_on != "client":
        return plan
    try:
        text = await trio.to_thread.run_sync(Path(plan.path).read_text, "utf-8")
    except (OSError, UnicodeDecodeError):
        return plan
    return PlanReview(path=plan.path, content=text)
