"""``/restore``: the checkpoints of this workspace, and going back to one
(gemini-cli's checkpointing; :mod:`gemini_split.client.checkpoints`).

``/restore`` lists them; ``/restore ID`` shows which files will change
(naming any changed by hand since the checkpoint), asks, writes them back,
then rewinds the conversation to that tool call and has it proposed again
through the normal approval (the ``rewind`` op's ``repropose_call_id``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text

from gemini_split.client.checkpoints import (
    CheckpointError,
    describe,
    for_settings,
    hand_edited_sentence,
    plan_lines,
)

from .safe_text import visible

if TYPE_CHECKING:
    from .repl import Repl

USAGE = "/restore [ID]"


def checkpoint_ids(repl: Repl) -> list[str]:
    """What Tab offers after ``/restore``: the checkpoints' ids, newest first."""
    try:
        return [c.id for c in reversed(for_settings(repl.settings.tools).list())]
    except CheckpointError:
        return []


async def restore(repl: Repl, args: list[str]) -> None:
    from .slash_commands import CommandUsage

    if len(args) > 1:
        raise CommandUsage(USAGE)
    tools = repl.settings.tools
    if tools.run_on == "server":
        raise CommandUsage("/restore: this session's tools run on the server; its checkpoints are there "
                           "(gemini-split restore --help)")
    try:
        checkpoints = for_settings(tools)
    except CheckpointError as exc:
        raise CommandUsage(str(exc)) from None
    if not args:
        found = checkpoints.list()
        if not found:
            repl.console.print(Text("No checkpoints yet: one is made before each file edit the agent makes.",
                                    style="dim"))
            return
        for checkpoint in found:
            repl.console.print(Text(visible(describe(checkpoint), newlines=False)))
        repl.console.print(Text("/restore ID puts the files back as they were before that edit, and proposes "
                                "the edit again.", style="dim"))
        return
    try:
        plan = await checkpoints.plan(args[0])
    except CheckpointError as exc:
        raise CommandUsage(str(exc)) from None
    root = tools.workspace
    if plan.changes:
        header = "\n".join([f"Restoring {plan.checkpoint.id} changes:", *plan_lines(plan, root)])
        warning = hand_edited_sentence(plan, root)
        if warning:
            header += "\n" + warning
        answer = await repl.asker.read_choice(visible(header) + "\nRestore these files?",
                                              [("yes", "Restore the files and the conversation"),
                                               ("no", "Do nothing")], 1)
        if answer != "yes":
            repl.console.print(Text("Nothing was restored.", style="dim"))
            return
        try:
            await checkpoints.restore(plan)
        except CheckpointError as exc:
            raise CommandUsage(f"the files were not restored: {exc}") from None
        repl.console.print(Text(f"Restored {len(plan.changes)} file{'s' if len(plan.changes) != 1 else ''}.",
                                style="green"))
    else:
        repl.console.print(Text("The files are as they were at that checkpoint.", style="dim"))
    await repropose(repl, plan.checkpoint)


async def repropose(repl: Repl, checkpoint: Any) -> None:
    """Rewind the conversation to the checkpoint's tool call and have it
    proposed again (the ``rewind`` op with ``repropose_call_id``)."""
    client = repl.require_client()
    session = client.connected.session_id if client.connected is not None else None
    why = None
    if checkpoint.session_id != session:
        why = f"the checkpoint is of another session ({checkpoint.session_id})"
    elif checkpoint.request_seq is None:
        why = "the checkpoint does not say which request made the call"
    elif not hasattr(repl, "run_repropose"):
        why = "this client cannot rewind a conversation"
    if why is not None:
        repl.console.print(Text(f"The conversation was not rewound: {why}.", style="yellow"))
        return
    await repl.run_repropose(checkpoint.request_seq, checkpoint.tool_call.call_id)
