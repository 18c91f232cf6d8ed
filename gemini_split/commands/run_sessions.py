"""``--list-sessions`` and ``--delete-session N|ID``: the caller's sessions
of this project on the server (or in embedded mode, in the local session
store), through the protocol's ``list_sessions`` / ``delete_session``,
numbered as gemini-cli numbers them (:mod:`gemini_split.client.session_scope`)."""

from __future__ import annotations

import argparse
import time
import unicodedata

import trio

from gemini_split.app import embedded_service_for, hold_embedded, resolve_client_settings
from gemini_split.client.protocol_client import RequestFailed
from gemini_split.client.session_scope import NO_SESSIONS, is_number, listing_client, project_sessions
from gemini_split.commands.options_from_args import client_options
from gemini_split.environment import Environment
from gemini_split.errors import BadInput
from gemini_split.exit_status import ExitStatus
from gemini_split.transport import ConnectFailed, TransportError


def run_list_sessions(args: argparse.Namespace, env: Environment) -> ExitStatus:
    return _run(args, env, None)


def run_delete_session(args: argparse.Namespace, env: Environment) -> ExitStatus:
    return _run(args, env, args.delete_session)


def _run(args: argparse.Namespace, env: Environment, delete: str | None) -> ExitStatus:

    options = client_options(args)
    settings = resolve_client_settings(options, env)
    embedded = embedded_service_for(options, env, settings, model=False)  # the store only: no key needed

    async def main() -> ExitStatus:
        try:
            async with hold_embedded(settings, embedded) as held, listing_client(held) as client:
                sessions = await project_sessions(client, held)
                if delete is None:
                    print_sessions(sessions, env)
                    return ExitStatus.SUCCESS
                if not sessions and is_number(delete):  # gemini-cli's words and status
                    env.stdout.write("No sessions found for this project.\n")
                    env.stdout.flush()
                    return ExitStatus.SUCCESS
                chosen = _to_delete(sessions, delete)
                await client.delete_session(chosen.id if chosen is not None else delete)
        except RequestFailed as exc:
            env.warn(f"gemini-split: {exc} ({exc.code})")
            return ExitStatus.ERROR
        except (ConnectFailed, TransportError) as exc:
            env.warn(f"gemini-split: {exc}")
            return ExitStatus.ERROR
        if chosen is not None:  # gemini-cli's words
            env.stdout.write(f"Deleted session {delete}: {printable(chosen.title)} ({_ago(chosen.updated)})\n")
            env.stdout.flush()
        else:
            env.warn(f"Deleted session {delete}.")
        return ExitStatus.SUCCESS

    return trio.run(main)


def _to_delete(sessions, which: str):
    """The session ``--delete-session`` names by number (in this project's
    list, :mod:`gemini_split.client.session_scope`), or None: an id (or
    the start of one), sent as it is. Raises :class:`BadInput` for a number
    with no session, in gemini-cli's words."""
    if not is_number(which):
        return next((s for s in sessions if s.id == which), None)
    if not 1 <= int(which) <= len(sessions):
        raise BadInput(f'Invalid session identifier "{which}". Use --list-sessions to see available sessions.')
    return sessions[int(which) - 1]


def print_sessions(sessions, env: Environment) -> None:
    """gemini-cli's list: this project's sessions, oldest first, numbered
    (the numbers ``--resume N`` and ``--delete-session N`` take), each with
    its title, last update and id — and whether it is answering a prompt
    now and how many clients are attached to it, when so (the caller's own
    connection never is: it opens a session of its own)."""
    out = env.stdout
    if not sessions:
        out.write(f"{NO_SESSIONS}\n")
        out.flush()
        return
    out.write(f"\nAvailable sessions for this project ({len(sessions)}):\n")
    for i, s in enumerate(sessions, 1):
        title = printable(s.title) or "Empty conversation"
        title = title if len(title) <= 100 else title[:97] + "..."
        # A 1.4 server says whether it runs, a 1.5 one who is attached.
        now = ", ".join((["running"] if s.running else []) + ([f"{s.clients} attached"] if s.clients else []))
        out.write(f"  {i}. {title} ({_ago(s.updated)}) [{printable(s.id)}]{f' ({now})' if now else ''}\n")
    out.flush()


def _ago(ms: int) -> str:
    """As gemini-cli's formatRelativeTime: "Just now", "5 minutes ago", "2 days ago"."""
    seconds = max(0, time.time() - ms / 1000)
    for size, unit in ((86400, "day"), (3600, "hour"), (60, "minute")):
        if seconds >= size:
            n = int(seconds // size)
            return f"{n} {unit}{'s' * (n != 1)} ago"
    return "Just now"


def printable(text: str) -> str:
    """A title as it may reach a terminal: control characters (escape
    sequences included) shown as ``?``, never obeyed."""
    return "".join("?" if unicodedata.category(ch) in ("Cc", "Cf") else ch for ch in text)
