"""``/restore``: the checkpoints of this workspace, and going back to one
(gemini-cli's checkpointing; :mod:`gemini_split.client.restoring`).

``/restore`` lists them; ``/restore ID`` shows which files will change
(naming any changed by hand since the checkpoint), asks, writes them back
(here, or on the server for a ``--tools server`` session), then rewinds
the conversation to that tool call and has it proposed again through the
normal approval (the ``rewind`` op's ``repropose_call_id``).
"""

from __future__ import annotations

from rich.text import Text

from gemini_split.tools.checkpoints import CheckpointError, for_settings
from gemini_split.client.protocol_client import RequestFailed
from gemini_split.client.restoring import (
    Entry,
    hand_edited_sentence,
    plan_lines,
    proposing_again,
    request_seq,
    source_for,
)
from gemini_split.ui.safe_text import visible

from ..command_context import CommandContext, CommandUsage


USAGE = "/restore [ID]"


def checkpoint_ids(repl: CommandContext) -> list[str]:
    """What Tab offers after ``/restore``: this client's checkpoints, newest
    first (a server's are not asked for on every key)."""
    if repl.settings.tools.run_on == "server":
        return []
    try:
        return [c.id for c in reversed(for_settings(repl.settings.tools).list())]
    except CheckpointError:
        return []


async def restore(repl: CommandContext, args: list[str]) -> None:
    if len(args) > 1:
        raise CommandUsage(USAGE)
    try:
        source = source_for(repl.settings.tools, repl.client)
        if not args:
            entries = await source.entries()
        else:
            plan = await source.plan(args[0])
    except CheckpointError as exc:
        raise CommandUsage(str(exc)) from None
    if not args:
        if not entries:
            repl.console.print(Text("No checkpoints yet: one is made before each file edit the agent makes.",
                                    style="dim"))
            return
        for entry in entries:
            repl.console.print(Text(visible(entry.line(), newlines=False)))
        repl.console.print(Text("/restore ID puts the files back as they were before that edit, and proposes "
                                "the edit again.", style="dim"))
        return
    if plan.changes:
        header = "\n".join([f"Restoring {plan.entry.id} changes:", *plan_lines(plan)])
        warning = hand_edited_sentence(plan)
        if warning:
            header += "\n" + warning
        answer = await repl.asker.read_choice(visible(header) + "\nRestore these files?",
                                              [("yes", "Restore the files and the conversation"),
                                               ("no", "Do nothing")], 1)
        if answer != "yes":
            repl.console.print(Text("Nothing was restored.", style="dim"))
            return
        try:
            await source.apply(plan)
        except CheckpointError as exc:
            raise CommandUsage(f"the files were not restored: {exc}") from None
        repl.console.print(Text(f"Restored {len(plan.changes)} file{'s' if len(plan.changes) != 1 else ''}.",
                                style="green"))
    else:
        repl.console.print(Text("The files are as they were at that checkpoint.", style="dim"))
    await _propose_again(repl, plan.entry)


async def _propose_again(repl: CommandContext, entry: Entry) -> None:
    """The conversation back at the checkpoint's call, proposed again: run
    and shown as a turn (its approval asked as any call's)."""
    client = repl.require_client()
    try:
        start = proposing_again(client, entry, await request_seq(client, entry))
    except (CheckpointError, RequestFailed) as exc:
        repl.console.print(Text(f"The conversation was not rewound: {visible(str(exc))}.", style="yellow"))
        return
    try:
        await repl.run_turn("", carry_context=False, start=start)
    except RequestFailed as exc:
        repl.console.print(Text(f"The conversation was not rewound: {visible(str(exc))}.", style="yellow"))
