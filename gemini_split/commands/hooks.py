"""``gemini-split hooks list``: the hooks of settings.json, as they apply here."""

from __future__ import annotations

import argparse
from typing import Any

from gemini_split.environment import Environment
from gemini_split.exit_status import ExitStatus


def add_hooks_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "hooks", help="the hooks of settings.json (gemini-cli's \"hooks\" section)",
        description="Hooks are your commands run at points of the agent loop (BeforeTool, AfterTool, "
                    "BeforeAgent, SessionStart…), on this machine. A project's hooks apply only in a "
                    "trusted folder.",
    )
    sub = parser.add_subparsers(dest="hooks_command", metavar="ACTION", required=True)
    sub.add_parser("list", help="each event's hooks: matcher, timeout, command and the file defining it")


def run_hooks_command(args: argparse.Namespace, env: Environment) -> ExitStatus:
    from gemini_split.client.hooks import describe, load_hooks
    from gemini_split.settings import load_settings
    from gemini_split.ui.safe_text import visible

    loaded = load_settings(env, trust=True if getattr(args, "skip_trust", False) else None)
    for line in loaded.warnings:
        env.warn(line)
    hooks = load_hooks(loaded)
    for line in hooks.warnings:
        env.warn(line)
    for line in describe(hooks):
        print(visible(line), file=env.stdout)
    return ExitStatus.SUCCESS
