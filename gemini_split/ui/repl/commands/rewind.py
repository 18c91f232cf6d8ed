"""The REPL's ``/rewind`` (and Esc twice on an empty prompt), as gemini-cli's.

The earlier prompts, newest at the bottom, each with the number of files
the agent's edit tools changed in its step; then, for the one picked,
"Rewind conversation and revert code changes", "Rewind conversation",
"Revert code changes" or "Do nothing" — the file choices hidden when no
file changed since. Before files are put back they are listed with what
will happen to each; a file changed by hand since the agent's edit is
named and asked about, one question each. After a conversation rewind the
REPL redraws the conversation as it now is (every attached client does, on
``rewound``: :meth:`Repl.redraw_rewound`) and puts the rewound prompt back
in the input, as gemini-cli does.

A session whose tools run on the server has its files put back there, with
its conversation (``rewind.revert_files``): "Revert code changes" alone is
not offered, and a file changed since is skipped and named by the server.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text

from gemini_split.client.failures import RequestFailed
from gemini_split.client.rewinding import Step, files_since, rewind, runs_on_server, steps
from gemini_split.errors import BadInput
from gemini_split.protocol import Rewind
from gemini_split.ui.safe_text import visible

from ..command_context import CommandContext


#: Characters of a prompt shown in the list.
PROMPT_SHOWN = 70
BOTH, CONVERSATION, FILES, NOTHING = "both", "conversation", "files", "nothing"
OPTIONS = {
    BOTH: "Rewind conversation and revert code changes",
    CONVERSATION: "Rewind conversation",
    FILES: "Revert code changes",
    NOTHING: "Do nothing (esc)",
}


def _one_line(prompt: str, limit: int = PROMPT_SHOWN) -> str:
    line = visible(" ".join(prompt.split()), newlines=False)
    return line if len(line) <= limit else line[:limit - 1] + "…"


def _files(n: int) -> str:
    return f"{n} file{'s' if n != 1 else ''} changed"


async def rewind_menu(repl: CommandContext) -> None:
    """``/rewind``: pick a prompt, then what to take back (see the module)."""
    client = repl.require_client()
    old = client.conn.too_old_for(Rewind)
    if old is not None:
        repl.print_usage(f"This server does not support rewinding (protocol {old.peer}; {old.since} can).")
        return
    found = await repl.interruptible(steps(client))
    if found is None:
        return
    if not found:
        repl.console.print(Text("Nothing to rewind to: this session has no prompt yet.", style="dim"))
        return
    choices = [(str(s.number), f"{_one_line(s.point.prompt)}" + (f"  · {_files(s.files)}" if s.files else ""))
               for s in found]
    picked = await repl.asker.read_choice("Rewind: the conversation goes back to just before the prompt you pick",
                                          choices, len(choices) - 1)
    if not picked.isdigit():
        return
    step = found[int(picked) - 1]
    try:
        planned = files_since(client, found, step)
    except BadInput as exc:  # edits made in another workspace: the conversation alone can go back
        repl.console.print(Text(f"Files: {visible(str(exc), newlines=False)}", style="yellow"))
        planned = []
    on_server = runs_on_server(client)
    changed = sum(s.files for s in found[step.number - 1:]) if on_server else len(planned)
    if changed:
        _show_planned(repl, planned, changed, on_server)
    options = [BOTH, CONVERSATION, FILES, NOTHING] if changed else [CONVERSATION, NOTHING]
    if on_server and FILES in options:
        options.remove(FILES)
    action = await repl.asker.read_choice(f"Before prompt {step.number}: {_one_line(step.point.prompt, 50)}",
                                          [(o, OPTIONS[o]) for o in options], 0)
    if action not in (BOTH, CONVERSATION, FILES):
        return
    overwrite: set[str] = set()
    if action in (BOTH, FILES) and not on_server:
        for item in planned:
            if item.conflict and item.action != "skip":
                answer = await repl.asker.read_choice(
                    f"{visible(item.path, newlines=False)} changed since the agent's edit. Put it back anyway?",
                    [("keep", "No, keep it as it is now"), ("overwrite", "Yes, put it back")], 0)
                if answer == "overwrite":
                    overwrite.add(item.path)
    repl.rewinding_here = True
    try:
        done = await rewind(client, step, conversation=action in (BOTH, CONVERSATION), files=action in (BOTH, FILES),
                            planned=planned, overwrite=frozenset(overwrite))
    except RequestFailed as exc:
        repl.print_usage(f"Not rewound: {exc}")
        return
    finally:
        repl.rewinding_here = False
    for item in done.files:
        style = "green" if item.action in ("restored", "deleted") else "yellow"
        what = {"restored": "put back", "deleted": "deleted (the agent created it)"}.get(item.action, "left as it is")
        repl.console.print(Text(f"  {visible(item.path, newlines=False)}: {what}"
                                + (f" — {visible(item.reason)}" if item.reason else ""), style=style))
    if action == FILES:
        repl.console.print(Text("File changes reverted. The model does not know: tell it if it matters.",
                                style="green"))
    elif done.rewound is not None:
        await repl.redraw_rewound(done.rewound)
        # As gemini-cli: the rewound prompt waits in the input, to edit or send again.
        repl.keep_prompt(step.point.prompt)


def _show_planned(repl: CommandContext, planned: list[Any], changed: int, on_server: bool) -> None:
    if on_server:
        repl.console.print(Text(f"Since then the agent's edit tools changed {changed} file"
                                f"{'s' if changed != 1 else ''} on the server.", style="dim"))
        return
    repl.console.print(Text("Reverting code changes would:", style="dim"))
    for item in planned:
        what = {"restore": "put back its content from before", "delete": "delete it (the agent created it)",
                "skip": f"leave it ({item.reason})"}[item.action]
        conflict = " — changed since the agent's edit: you will be asked" if item.conflict and item.action != "skip" \
            else ""
        repl.console.print(Text(f"  {visible(item.path, newlines=False)}: {what}{conflict}", style="dim"))
    repl.console.print(Text("Rewinding does not affect files edited by hand or by shell commands.", style="dim"))


__all__ = ["rewind_menu", "Step"]
