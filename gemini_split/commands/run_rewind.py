"""``gemini-split --resume ID --rewind-to N [--revert-files]``: ``/rewind``
without the REPL, for scripts.

Rewinds the session's conversation to before its N-th prompt (1: the
first); with ``--revert-files`` also puts back the files the agent's edit
tools changed since then, asking nothing (the flag is the answer): a file
changed by hand since the agent's edit is left as it is and named on
stderr. Nothing is run. Exit statuses: 0 done (files skipped are warned
about), 42 when N is not one of the session's prompts, 1 when the server
refuses (``busy``, ``unknown_session``…) or cannot rewind (older than
protocol 1.4), or the connection fails.
"""

from __future__ import annotations

import argparse

import trio

from gemini_split.app import embedded_service_for, hold_embedded, resolve_client_settings
from gemini_split.client.session_scope import open_resumed_client
from gemini_split.client.failures import RequestFailed
from gemini_split.client.rewinding import files_since, rewind, runs_on_server, steps
from gemini_split.commands.options_from_args import client_options
from gemini_split.environment import Environment
from gemini_split.errors import BadInput
from gemini_split.exit_status import ExitStatus, exit_status_for
from gemini_split.transport import ConnectFailed, TransportError
from gemini_split.ui.safe_text import visible


def run_rewind(args: argparse.Namespace, env: Environment) -> ExitStatus:
    options = client_options(args)
    settings = resolve_client_settings(options, env)
    embedded = embedded_service_for(options, env, settings)
    number, revert = args.rewind_to, args.revert_files

    async def main() -> ExitStatus:
        try:
            async with hold_embedded(settings, embedded) as held, \
                    open_resumed_client(held, lambda line: env.warn(f"gemini-split: {line}")) as client:
                assert client.connected is not None
                session = client.connected.session_id
                found = await steps(client)
                if not 1 <= number <= len(found):
                    env.warn(f"gemini-split: --rewind-to {number}: session {session} has "
                             + (f"{len(found)} prompt{'s' if len(found) != 1 else ''} (1–{len(found)})"
                                if found else "no prompt to rewind to"))
                    return ExitStatus.BAD_INPUT
                step = found[number - 1]
                planned = files_since(client, found, step) if revert else []
                done = await rewind(client, step, conversation=True, files=revert, planned=planned)
        except BadInput as exc:  # the edits were made in another workspace (edit_journal.RevertElsewhere)
            env.warn(f"gemini-split: --revert-files: {exc}; nothing was rewound")
            return ExitStatus.BAD_INPUT
        except RequestFailed as exc:
            env.warn(f"gemini-split: {exc} ({exc.code})")
            return exit_status_for(exc)
        except (ConnectFailed, TransportError) as exc:
            env.warn(f"gemini-split: {exc}")
            return exit_status_for(exc)
        left = done.rewound.points if done.rewound is not None else number - 1
        env.warn(f"Rewound session {session} to before prompt {number} "
                 f"({_short(step.point.prompt)}); {left} prompt{'s' if left != 1 else ''} left.")
        if revert and not done.files:
            env.warn("No file to put back: the agent's edit tools changed none since then"
                     + ("." if not runs_on_server(client) else " (on the server)."))
        for item in done.files:
            line = {"restored": "restored", "deleted": "deleted (the agent created it)"}.get(item.action, "skipped")
            env.warn(f"  {visible(item.path, newlines=False)}: {line}" + (f" — {item.reason}" if item.reason else ""))
        return ExitStatus.SUCCESS

    return trio.run(main)


def _short(prompt: str) -> str:
    line = visible(" ".join(prompt.split()), newlines=False)
    return '"' + (line if len(line) <= 80 else line[:79] + "…") + '"'
