"""The REPL's ``/permissions trust [DIR]`` (gemini-cli's): a folder's trust
level chosen from a menu and recorded in ``trustedFolders.json``
(:func:`gemini_split.userfiles.folder_trust.record_trust`, the file
gemini-cli reads too).

The menu is gemini-cli's "Modify Trust Level" dialog: the folder, its
current level (the rule recorded for it, or "Not Set"), a note when a
parent's rule (or ``GEMINI_CLI_TRUST_WORKSPACE``) decides instead, then
trust this folder / trust the parent folder / don't trust. A change to the
trust of the folder this session runs in applies when gemini-split starts
again, as in gemini-cli: the session's settings, context and commands were
read under the old decision.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from rich.text import Text

from gemini_split.errors import SettingsError
from gemini_split.ui.safe_text import visible
from gemini_split.userfiles.folder_trust import DO_NOT_TRUST, LEVELS, explicit_level, record_trust
from gemini_split.userfiles.settings import trust_rule

from ..command_context import CommandContext, CommandUsage

USAGE = "Usage: /permissions trust [<directory-path>]"
TRUSTED = ("TRUST_FOLDER", "TRUST_PARENT")


async def trust_command(repl: CommandContext, args: list[str]) -> None:
    """``/permissions trust [DIR]``; raises :class:`CommandUsage`."""
    if len(args) > 1:
        raise CommandUsage(USAGE)
    folder = _target(repl, args[0] if args else None)
    try:
        current = explicit_level(folder, repl.env)
        trusted_before = _trusted(folder, repl)
    except SettingsError as exc:
        raise CommandUsage(str(exc)) from None
    name, parent = folder.name or str(folder), folder.parent.name or str(folder.parent)
    header = [f"> Modify Trust Level\n\nFolder: {visible(str(folder), newlines=False)}\n"
              f"Current Level: {current or 'Not Set'}"]
    note = _note(repl, folder, current)
    if note:
        header.append(note)
    choices = [("TRUST_FOLDER", f"Trust this folder ({visible(name, newlines=False)})"),
               ("TRUST_PARENT", f"Trust parent folder ({visible(parent, newlines=False)})"),
               (DO_NOT_TRUST, "Don't trust")]
    start = LEVELS.index(current) if current in LEVELS else 0
    picked = await repl.asker.read_choice("\n".join(header), choices, start)
    if picked not in LEVELS:
        return
    try:
        path = record_trust(folder, picked, repl.env)
    except (SettingsError, OSError) as exc:
        repl.print_usage(f"Failed to save trust settings. Your changes may not persist. ({exc})")
        return
    said = {"TRUST_FOLDER": f"Trusted {folder}", "TRUST_PARENT": f"Trusted {folder.parent} and its folders",
            DO_NOT_TRUST: f"Not trusting {folder}"}[picked]
    repl.console.print(Text(f"{visible(said, newlines=False)} (recorded in {path}).", style="green"),
                       soft_wrap=True)
    if picked == DO_NOT_TRUST and _trusted(folder, repl):
        repl.print_usage("Note: This folder is still trusted because a parent folder is trusted."
                         if repl.env.environ.get("GEMINI_CLI_TRUST_WORKSPACE") != "true" else
                         "Note: This folder is still trusted for this run: GEMINI_CLI_TRUST_WORKSPACE=true.")
    if _same(folder, repl.env.cwd) and trusted_before != _trusted(folder, repl):
        repl.print_usage("To apply the trust changes, restart gemini-split (this session's settings, context "
                         "and commands were read under the old decision).")


def _target(repl: CommandContext, text: str | None) -> Path:
    """The folder named (``~`` and relative paths resolved), checked."""
    if text is None:
        return repl.env.cwd
    folder = Path(os.path.abspath(repl.env.cwd / Path(text).expanduser()))
    try:
        is_dir = stat.S_ISDIR(folder.stat().st_mode)
    except OSError as exc:
        raise CommandUsage(f"Error accessing path: {folder}. {exc.strerror or exc}") from None
    if not is_dir:
        raise CommandUsage(f"Path is not a directory: {folder}")
    return folder


def _trusted(folder: Path, repl: CommandContext) -> bool:
    flag = repl.env.environ.get("GEMINI_CLI_TRUST_WORKSPACE")
    if flag in ("true", "false"):
        return flag == "true"
    return trust_rule(folder, repl.env) in TRUSTED


def _note(repl: CommandContext, folder: Path, current: str | None) -> str | None:
    """gemini-cli's note when something other than this folder's rule decides."""
    if repl.env.environ.get("GEMINI_CLI_TRUST_WORKSPACE") in ("true", "false"):
        return ("Note: GEMINI_CLI_TRUST_WORKSPACE decides this folder's trust for this run, whatever level "
                "is recorded here.")
    if current is None and trust_rule(folder, repl.env) in TRUSTED:
        return ("Note: This folder behaves as a trusted folder because one of the parent folders is trusted. "
                "A level set here is this folder's own rule, and decides for it and the folders below.")
    return None


def _same(a: Path, b: Path) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)
