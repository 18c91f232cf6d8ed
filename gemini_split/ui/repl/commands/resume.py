"""The REPL's ``/resume`` without an argument: gemini-cli's session browser —
this project's sessions on the server, newest first, in a list that what
is typed narrows (a word of the first prompt, a date, an id), Enter resumes
the one picked.

``/resume ID|N|latest`` resumes one directly (``CommandContext.resume``);
gemini-cli's checkpoint sub-commands (``/resume save TAG``, ``list``,
``resume|load TAG``, ``delete TAG``, ``share [FILE]``) are ``/chat``'s, as
in gemini-cli; the caller sends them there.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rich.text import Text

from gemini_split.client.protocol_client import RequestFailed
from gemini_split.client.session_scope import NO_SESSIONS, project_sessions
from gemini_split.ui.safe_text import visible

from ..command_context import CommandContext, CommandUsage

if TYPE_CHECKING:
    from gemini_split.protocol.messages import SessionInfo

#: gemini-cli's checkpoint sub-commands of ``/resume`` (``/chat``'s).
CHECKPOINT_ACTIONS = ("list", "save", "resume", "load", "delete", "share", "checkpoints")


async def browse(repl: CommandContext) -> None:
    """The searchable list of this project's other sessions; the one
    picked is resumed (and redrawn)."""
    client = repl.require_client()
    try:
        sessions = await repl.interruptible(project_sessions(client, repl.settings), "Listing sessions…")
    except RequestFailed as exc:
        raise CommandUsage(f"/resume: {exc}") from None
    if sessions is None:
        return
    current = client.connected.session_id if client.connected else None
    numbered = [(n, s) for n, s in enumerate(sessions, 1) if s.id != current]
    repl.known_sessions = [s.id for _, s in numbered]
    if not numbered:
        repl.console.print(Text(NO_SESSIONS, style="dim"))
        return
    choices = [(s.id, _label(n, s)) for n, s in sorted(numbered, key=lambda p: p[1].updated, reverse=True)]
    picked = await repl.asker.read_search(
        f"Resume a session of this project ({len(choices)}; newest first; /resume N or ID resumes one directly)",
        choices)
    if picked in repl.known_sessions:
        await repl.resume(picked)


def _label(number: int, session: SessionInfo) -> str:
    """One line: its number, when, how long, its first prompt, its id."""
    updated = time.strftime("%Y-%m-%d %H:%M", time.localtime(session.updated / 1000))
    title = visible(session.title or "(no prompt yet)", newlines=False)
    title = title if len(title) <= 60 else title[:59] + "…"
    turns = session.turns
    return f"{number:>3}. {updated} · {turns} turn{'s' * (turns != 1)} · {title} · {session.id}"
