"""``--list-sessions`` and ``--delete-session ID``: the caller's sessions on
the server (or in embedded mode, in the local session store), through the
protocol's ``list_sessions`` / ``delete_session``."""

from __future__ import annotations

import argparse
import time
import unicodedata

import trio

from gemini_split.app import embedded_service_for, hold_embedded, resolve_client_settings
from gemini_split.client.connect import open_client
from gemini_split.client.protocol_client import RequestFailed
from gemini_split.commands.options import client_options
from gemini_split.environment import Environment
from gemini_split.exit_status import ExitStatus
from gemini_split.transport import ConnectFailed, TransportError


def run_list_sessions(args: argparse.Namespace, env: Environment) -> ExitStatus:
    return _run(args, env, None)


def run_delete_session(args: argparse.Namespace, env: Environment) -> ExitStatus:
    return _run(args, env, args.delete_session)


def _run(args: argparse.Namespace, env: Environment, delete: str | None) -> ExitStatus:

    options = client_options(args)
    settings = resolve_client_settings(options, env)
    embedded = embedded_service_for(options, env, settings)

    async def main() -> ExitStatus:
        try:
            async with hold_embedded(settings, embedded) as held, open_client(held) as client:
                if delete is not None:
                    await client.delete_session(delete)
                    env.warn(f"Deleted session {delete}.")
                    return ExitStatus.SUCCESS
                sessions = await client.list_sessions()
        except RequestFailed as exc:
            env.warn(f"gemini-split: {exc} ({exc.code})")
            return ExitStatus.ERROR
        except (ConnectFailed, TransportError) as exc:
            env.warn(f"gemini-split: {exc}")
            return ExitStatus.ERROR
        print_sessions(sessions, env)
        return ExitStatus.SUCCESS

    return trio.run(main)


def print_sessions(sessions, env: Environment) -> None:
    """Newest first: id, last update (local time), turns, title."""
    if not sessions:
        env.warn("No earlier sessions.")
        return
    out = env.stdout
    out.write(f"{'ID':<20} {'UPDATED':<16} {'TURNS':>5}  TITLE\n")
    for s in sessions:
        updated = time.strftime("%Y-%m-%d %H:%M", time.localtime(s.updated / 1000))
        out.write(f"{printable(s.id):<20} {updated:<16} {s.turns:>5}  {printable(s.title)}\n")
    out.flush()


def printable(text: str) -> str:
    """A title as it may reach a terminal: control characters (escape
    sequences included) shown as ``?``, never obeyed."""
    return "".join("?" if unicodedata.category(ch) in ("Cc", "Cf") else ch for ch in text)
