"""Copying text to the user's clipboard, for ``/copy``.

A local clipboard tool is used when there is one and a display to reach
(``pbcopy`` on macOS; ``wl-copy`` under Wayland; ``xclip`` or ``xsel``
under X11). Otherwise — over ssh, in a container, on a console — the text
goes to the terminal itself as an OSC 52 sequence, which most terminals
(and tmux with ``set -g set-clipboard on``) put in the clipboard of the machine
the user sits at.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import sys
from collections.abc import Mapping
from typing import IO


def _tools(environ: Mapping[str, str]) -> list[list[str]]:
    tools = []
    if sys.platform == "darwin":
        tools.append(["pbcopy"])
    if environ.get("WAYLAND_DISPLAY"):
        tools.append(["wl-copy"])
    if environ.get("DISPLAY"):
        tools += [["xclip", "-selection", "clipboard"], ["xsel", "--clipboard", "--input"]]
    return tools


def copy_text(text: str, terminal: IO[str], environ: Mapping[str, str]) -> str:
    """Put ``text`` in the clipboard; returns how, for the user ("with
    xclip", "through the terminal (OSC 52)")."""
    for argv in _tools(environ):
        if shutil.which(argv[0]) is None:
            continue
        try:
            subprocess.run(argv, input=text.encode(), check=True, timeout=5,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            return f"with {argv[0]}"
        except (OSError, subprocess.SubprocessError):
            continue
    payload = base64.b64encode(text.encode()).decode()
    sequence = f"\x1b]52;c;{payload}\x07"
    terminal.write(sequence)
    terminal.flush()
    return "through the terminal (OSC 52; if nothing arrives, your terminal does not allow it)"
