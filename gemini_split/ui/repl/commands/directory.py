"""``/directory add PATH[,PATH…]`` and ``/directory show`` (also ``/dir``):
gemini-cli's workspace directories, added mid-session exactly as
``--include-directories`` adds them at start (issue 31 item 5).

An added directory, at once:

- confines and frees the file tools as an included directory does (the
  executor's :class:`~gemini_split.tools.workspace.Workspace` gets it as a
  root; sandboxed commands get it read-write from their next run);
- joins what the model is told: the session context (the workspace
  directories in the server's system instruction, and GEMINI.md files from
  it when ``context.loadMemoryFromIncludeDirectories`` is on, as gemini-cli
  refreshes them on add) goes with the next request, which is the first the
  model reads;
- is offered by ``@path`` completion (``@/abs/dir/…`` or ``@../dir/…``).

Refused, each with its reason, changing nothing: a path that does not
exist or is not a directory; one a ``trustedFolders.json`` rule marks
``DO_NOT_TRUST``; a folder no rule covers unless the user says yes (gemini-cli
asks too); ``--tools server`` sessions (the tools run on the server, in its
workspace: a path of this machine means nothing there); and a restrictive
sandbox profile (``SEATBELT_PROFILE=restrictive-…`` or ``strict-…`` with a
sandbox on), in gemini-cli's words.
"""

from __future__ import annotations

import os
from pathlib import Path

from rich.text import Text

from gemini_split.app import attach_context
from gemini_split.tools.workspace import Workspace
from gemini_split.ui.safe_text import visible

from ..command_context import CommandContext


USAGE = "/directory add PATH[,PATH…] | show"
RESTRICTIVE = ("The /directory add command is not supported in restrictive sandbox profiles. "
               "Please use --include-directories when starting the session instead.")


class DirectoryRefused(Exception):
    """The command cannot run; the message says why."""


def workspace_dirs(repl: CommandContext) -> list[Path]:
    """The workspace directories: the workspace, then the included ones."""
    tools = repl.settings.tools
    return [tools.workspace, *tools.include_dirs]


async def directory_command(repl: CommandContext, args: list[str]) -> None:
    if args == ["show"] and repl.settings.tools.run_on == "server":
        repl.console.print(Text("The tools run on the server (--tools server), in the workspace it gives this "
                                "session: no directory of this machine is in it."))
        return
    if args == ["show"]:
        lines = "\n".join(f"- {visible(str(d), newlines=False)}" for d in workspace_dirs(repl))
        repl.console.print(Text(f"Current workspace directories:\n{lines}"), soft_wrap=True)
        return
    if not args or args[0] != "add":
        raise DirectoryRefused(f"usage: {USAGE}")
    tools = repl.settings.tools
    if tools.run_on == "server":
        raise DirectoryRefused("/directory add adds directories of this machine for the tools it runs; with "
                               "--tools server the tools run on the server, in its own workspace")
    profile = repl.env.environ.get("SEATBELT_PROFILE", "")
    if tools.sandbox is not None and tools.sandbox.enabled and profile.startswith(("restrictive-", "strict-")):
        raise DirectoryRefused(RESTRICTIVE)
    written = [p.strip() for p in " ".join(args[1:]).split(",") if p.strip()]
    if not written:
        raise DirectoryRefused("Please provide at least one path to add.")
    current = workspace_dirs(repl)
    added: list[tuple[str, Path]] = []
    already: list[str] = []
    errors: list[str] = []
    for text in written:
        path = Path(os.path.expanduser(text))
        path = path if path.is_absolute() else repl.env.cwd / path
        if not path.exists():
            errors.append(f"Error adding '{text}': no such directory")
            continue
        if not path.is_dir():
            errors.append(f"Error adding '{text}': not a directory")
            continue
        real = Path(os.path.realpath(path))
        if real in current or any(real == r for _, r in added):
            already.append(text)
            continue
        refused = await _trust_refusal(repl, text, real)
        if refused:
            errors.append(refused)
            continue
        added.append((text, real))
    if already:
        repl.console.print(Text("The following directories are already in the workspace:\n- "
                                + "\n- ".join(visible(t, newlines=False) for t in already)))
    if added:
        _add(repl, [real for _, real in added])
        shown = "\n- ".join(visible(t, newlines=False) for t, _ in added)
        repl.console.print(Text(f"Successfully added GEMINI.md files from the following directories if there "
                                f"are:\n- {shown}", style="green"))
        repl.console.print(Text(f"Successfully added directories:\n- {shown}", style="green"))
    if errors:
        repl.console.print(Text("\n".join(visible(e, newlines=False) for e in errors), style="red"))


async def _trust_refusal(repl: CommandContext, text: str, real: Path) -> str | None:
    """Why ``real`` may not join the workspace as far as folder trust goes,
    or None: refused when a rule marks it ``DO_NOT_TRUST``; asked when no
    rule covers it and folder trust is on (the answer is not remembered)."""
    from gemini_split.userfiles.settings import trust_rule, workspace_dir_refusal

    loaded = repl.settings.loaded_settings
    if loaded is None or not loaded.merged.security.folder_trust.enabled:
        return None
    refusal = workspace_dir_refusal(real, repl.env, enabled=True)
    if refusal is not None:
        return f"Error adding '{text}': {refusal}"
    if repl.env.environ.get("GEMINI_CLI_TRUST_WORKSPACE") == "true" \
            or trust_rule(real, repl.env) in ("TRUST_FOLDER", "TRUST_PARENT"):
        return None
    choice = await repl.asker.read_choice(
        f"No folder trust rule covers {visible(str(real), newlines=False)}. Add it to the workspace? "
        "Its files become readable and writable by the tools.",
        [("add", "Yes, add it for this session"), ("no", "No")], 1)
    return None if choice == "add" else f"Not added: '{text}'"


def _add(repl: CommandContext, dirs: list[Path]) -> None:
    """Make ``dirs`` workspace directories of the session, everywhere at once."""
    settings = repl.settings.with_tools(include_dirs=(*repl.settings.tools.include_dirs, *dirs))
    repl.settings = settings
    attach_context(settings, repl.env, interactive=True)
    client = repl.client
    if client is not None:
        executor = client.executor
        old = executor.workspace
        executor.workspace = Workspace(old.root, (*old.roots[1:], *dirs), place=old.place)
        tracker = settings.context.tracker
        if tracker is not None:
            executor.after_run = tracker.after_run
