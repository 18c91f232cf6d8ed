"""``gemini-split hooks``'s arguments (the runner: :mod:`gemini_split.commands.run_hooks`)."""

from __future__ import annotations

from typing import Any


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "hooks", help="the hooks of settings.json (gemini-cli's \"hooks\" section)",
        description="Hooks are your commands run at points of the agent loop (BeforeTool, AfterTool, "
                    "BeforeAgent, SessionStart…), on this machine. A project's hooks apply only in a "
                    "trusted folder.",
    )
    sub = parser.add_subparsers(dest="hooks_command", metavar="ACTION", required=True)
    sub.add_parser("list", help="each event's hooks: matcher, timeout, command and the file defining it")
    parser.set_defaults(run="gemini_split.commands.run_hooks:run_hooks_command")
