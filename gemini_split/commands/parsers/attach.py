"""``gemini-split attach``'s arguments (the runner: :mod:`gemini_split.commands.run_attach`)."""

from __future__ import annotations

import argparse
import re
import time
from datetime import datetime
from typing import Any

from gemini_split.tools.approval_mode import ApprovalMode

SINCE_HELP = ("replay the events after TIME: Unix milliseconds (1763726400000), a duration ago "
              "(90s, 10m, 2h, 1d) or an ISO-8601 date-time (2026-11-22T21:30, local time unless "
              "it names a zone)")

_AGO = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhd])$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_since(text: str, *, now: float | None = None) -> int:
    """``--since TIME`` as Unix milliseconds (see :data:`SINCE_HELP`)."""
    text = text.strip()
    now = time.time() if now is None else now
    if text.isdigit() and len(text) <= 16:
        return int(text)
    match = _AGO.match(text)
    if match:
        return max(0, int((now - float(match.group(1)) * _UNIT[match.group(2)]) * 1000))
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a time: give Unix milliseconds, a duration ago such as 10m, "
            "or an ISO-8601 date-time") from None
    return max(0, int(moment.timestamp() * 1000))


def _replay_limit(text: str) -> int:
    # Lazy: the protocol stays off the shell's path (gemini_split/lazy_imports.py).
    from gemini_split.protocol.messages import REPLAY_LIMIT_MAX

    if not text.isdigit() or int(text) > REPLAY_LIMIT_MAX:
        raise argparse.ArgumentTypeError(f"must be a whole number of turns from 0 to {REPLAY_LIMIT_MAX}")
    return int(text)


def add_parser(commands: Any) -> None:
    p = commands.add_parser(
        "attach",
        description="Join one of your sessions that is running elsewhere (another terminal, another\n"
                    "machine, a script): the REPL on it, with its last turn replayed. Every attached\n"
                    "client sees the same events; any of them may prompt or cancel. The client's\n"
                    "options (--server, --token, -m, …) may come before or after 'attach'.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               "  gemini-split --server ws://host:8080 attach latest        the REPL on this project's latest session\n"
               "  gemini-split attach s-5f1c… --watch --server ws://host:8080   follow it, read-only\n"
               "  gemini-split attach latest --watch -o stream-json --since 10m   events as JSON lines\n"
               "\n"
               "A server refuses an attach by id alone to a session with clients attached unless it\n"
               "allows it (serve --allow-attach-by-id; the default on loopback).",
    )
    p.add_argument("session", nargs="?", default="latest", metavar="SESSION_ID|latest",
                   help="the session to join: its id or any unambiguous beginning of it "
                        "(default: latest: this project's most recently used one with an answer)")
    p.add_argument("--watch", action="store_true",
                   help="watch read-only: follow the session live, never prompt (Ctrl-C leaves)")
    p.add_argument("--limit", type=_replay_limit, metavar="N",
                   help="replay the last N whole turns first (default 1; 0: none)")
    p.add_argument("--since", type=parse_since, metavar="TIME", help=SINCE_HELP)
    p.add_argument("--label", metavar="NAME",
                   help="how the other clients see this one (default: the host name)")
    p.add_argument("-o", "--output-format", dest="attach_output", choices=["text", "stream-json"],
                   default="text", help="text (default) or stream-json: one JSON line per session event")
    _add_client_options(p)
    p.set_defaults(run="gemini_split.commands.run_attach:run_attach")


def _add_client_options(p: argparse.ArgumentParser) -> None:
    """The client's options a user types after ``attach ID`` too. Their
    default is to leave what the main parser set (an option given before
    ``attach``, or its default) untouched; after ``attach`` wins."""
    keep = argparse.SUPPRESS
    group = p.add_argument_group("client options (also taken before 'attach'; see gemini-split --help)")
    group.add_argument("--server", metavar="ADDRESS|PROFILE", default=keep,
                       help="the server the session is on (default: this machine's session store)")
    group.add_argument("--token", default=keep, help="server token (default: $GEMINI_SERVER_TOKEN)")
    group.add_argument("--ca", metavar="FILE", default=keep, help="CA certificate to trust for wss:// and grpcs://")
    group.add_argument("--insecure", action="store_true", default=keep,
                       help="do not verify the server's TLS certificate (testing only)")
    group.add_argument("-m", "--model", default=keep, help="Gemini model for your prompts")
    group.add_argument("--approval-mode", choices=[m.value for m in ApprovalMode], default=keep,
                       help="what asks before it runs (default, auto_edit, yolo, plan)")
    group.add_argument("-y", "--yolo", action="store_true", default=keep, help="shortcut for --approval-mode yolo")
    group.add_argument("--workspace", metavar="DIR", default=keep,
                       help="directory the local tools may use (default: the current directory)")
    group.add_argument("-d", "--debug", action="store_true", default=keep, help="log details to stderr")
