"""Ctrl+G (or Ctrl+X) at the prompt: edit what is typed in an external editor, as
gemini-cli's ``input.openExternalEditor`` does.

The editor is ``general.preferredEditor`` (one of gemini-cli's names:
``vim``, ``neovim``, ``emacs``, ``vscode`` …), else ``$VISUAL``, else
``$EDITOR``, else ``vi``. The text goes through a private temporary file
(mode 0600, deleted afterwards); what the editor saves replaces the line,
its trailing newline dropped. An editor that fails (exit status not 0, or
not found) leaves the line as it was.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from collections.abc import Mapping

#: gemini-cli's ``general.preferredEditor`` names and the command each runs
#: (GUI editors told to wait until the file is closed).
EDITOR_COMMANDS: dict[str, list[str]] = {
    "vscode": ["code", "--wait"],
    "vscodium": ["codium", "--wait"],
    "windsurf": ["windsurf", "--wait"],
    "cursor": ["cursor", "--wait"],
    "zed": ["zed", "--wait"],
    "antigravity": ["agy", "--wait"],
    "sublimetext": ["subl", "--wait"],
    "lapce": ["lapce", "--wait"],
    "nova": ["nova", "--wait"],
    "bbedit": ["bbedit", "--wait"],
    "vim": ["vim"],
    "neovim": ["nvim"],
    "emacs": ["emacs"],
    "hx": ["hx"],
    "emacsclient": ["emacsclient"],
    "micro": ["micro"],
}


class EditorFailed(Exception):
    """The editor could not run or did not end well; the message says which and why."""


def editor_command(preferred: str | None, environ: Mapping[str, str]) -> list[str]:
    """The command (argv without the file) for ``preferred``, else
    ``$VISUAL``, ``$EDITOR``, ``vi``. Raises :class:`EditorFailed` for a
    ``preferred`` that is not one of :data:`EDITOR_COMMANDS`."""
    if preferred:
        if preferred not in EDITOR_COMMANDS:
            raise EditorFailed(f"general.preferredEditor {preferred!r} is not one of: "
                               + ", ".join(EDITOR_COMMANDS))
        return list(EDITOR_COMMANDS[preferred])
    for name in ("VISUAL", "EDITOR"):
        value = (environ.get(name) or "").strip()
        if value:
            try:
                words = shlex.split(value)
            except ValueError as exc:
                raise EditorFailed(f"${name} cannot be parsed: {exc}") from None
            if words:
                return words
    return ["vi"]


def edit_text(text: str, command: list[str], environ: Mapping[str, str]) -> str:
    """Run ``command FILE`` on a private copy of ``text`` and return what
    was saved (without its final newline). Blocks until the editor exits;
    call it where the terminal is the editor's (prompt-toolkit's
    ``run_in_terminal``). Raises :class:`EditorFailed`."""
    fd, path = tempfile.mkstemp(prefix="gemini-split-prompt-", suffix=".md")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        try:
            status = subprocess.call([*command, path], env=dict(environ))
        except OSError as exc:
            raise EditorFailed(f"cannot start {command[0]}: {exc.strerror or exc}") from None
        if status != 0:
            raise EditorFailed(f"{command[0]} exited with status {status}; the prompt is unchanged")
        with open(path, encoding="utf-8", errors="replace") as f:
            edited = f.read()
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    return edited[:-1] if edited.endswith("\n") else edited
