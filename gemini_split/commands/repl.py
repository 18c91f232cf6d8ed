"""``gemini-split`` with a terminal on stdin: the interactive REPL.

Resolves the client settings as one-shot does (flags, environment,
profiles), then runs :class:`gemini_split.ui.repl.Repl` under Trio.
prompt-toolkit and rich are imported here, never on the one-shot path.
"""

from __future__ import annotations

import argparse

import trio

from gemini_split.app import resolve_client_settings
from gemini_split.environment import Environment
from gemini_split.exit_status import ExitStatus



def run_repl(args: argparse.Namespace, env: Environment) -> ExitStatus:
    settings = resolve_client_settings(args, env, interactive=True)
    from gemini_split.ui.repl import Repl

    return trio.run(Repl(args, env, settings).run)
