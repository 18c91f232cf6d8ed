"""``gemini-split daemon``'s arguments (the runner: :mod:`gemini_split.commands.run_daemon`)."""

from __future__ import annotations

import argparse
from typing import Any

from gemini_split.commands.parsers.serve import parse_duration


def add_parser(commands: Any) -> None:
    p = commands.add_parser(
        "daemon",
        description="Control the per-user local daemon: the agent loop kept running in the "
                    "background, reached over a Unix socket, so that each `-p` call starts as a thin "
                    "client. GEMINI_SERVER_MODE=local (or --server local) uses it and starts it when "
                    "needed; these commands are for looking at it and stopping it.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               "  export GEMINI_SERVER_MODE=local      every run uses the daemon (in ~/.bashrc)\n"
               "  gemini-split daemon status           is it running, which version, where\n"
               "  gemini-split daemon restart          e.g. after upgrading gemini-split\n"
               "  gemini-split daemon stop\n",
    )
    actions = p.add_subparsers(dest="daemon_action", metavar="ACTION", required=True)
    for name, text in (("start", "start the daemon unless it is running (and current)"),
                       ("restart", "stop the daemon if it runs, then start it"),
                       ("run", "run the daemon in the foreground (what start runs; for a service manager)")):
        action = actions.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
        action.add_argument("--idle-exit", type=_idle_exit, default=None, metavar="DURATION",
                            help="exit after this long without connections or running requests: 90s, "
                                 "30m, 12h, or 0 for never (default 30m)")
    actions.add_parser("stop", help="stop the daemon (running requests are cancelled)",
                       description="Stop the daemon: running requests are cancelled, its clients told why.")
    p.set_defaults(run="gemini_split.commands.run_daemon:run_daemon_command")
    actions.add_parser("status", help="say whether the daemon runs, its pid, version, socket and log",
                       description="Say whether the daemon runs (exit status 0) or not (1).")


def _idle_exit(text: str) -> float:
    if text.strip() in ("0", "0s", "never"):
        return 0.0
    return parse_duration(text)
