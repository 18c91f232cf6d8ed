"""``gemini-split`` with a terminal on stdin: the interactive REPL.

Resolves the client settings as one-shot does (flags, environment,
profiles), then runs :class:`gemini_split.ui.repl.Repl` under Trio.
prompt-toolkit and rich are imported here, never on the one-shot path.
"""

from __future__ import annotations

import argparse

import trio

from gemini_split.app import embedded_service_for, resolve_client_settings
from gemini_split.commands.options import client_options
from gemini_split.environment import Environment
from gemini_split.exit_status import ExitStatus



def run_repl(args: argparse.Namespace, env: Environment) -> ExitStatus:
    options = client_options(args)
    settings = resolve_client_settings(options, env, interactive=True)
    embedded = embedded_service_for(options, env, settings)
    from gemini_split.ui.repl import Repl

    return trio.run(Repl(options, env, settings, embedded=embedded).run)
