"""``gemini-split pair``'s arguments (the runner: :mod:`gemini_split.commands.run_pair`)."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "pair", help="sign a browser in to a serve --web server: a one-time link and QR code",
        description="Ask the server (--server ADDR|PROFILE; it must run serve --web) for a one-time link that "
                    "signs one browser in as you: open it (or scan the QR code) within 10 minutes; it works "
                    "once. --list shows your paired browsers, --revoke ID (or all) signs them out at once.",
    )
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--list", action="store_true", dest="pair_list", help="your paired browsers")
    what.add_argument("--revoke", metavar="ID|all", dest="pair_revoke",
                      help="sign a paired browser out (all: every one); its open pages are disconnected")
    parser.add_argument("--no-qr", action="store_true", help="print the link only, no QR code")
    # As after `attach`: given here or before `pair`, the one here wins.
    keep = argparse.SUPPRESS
    group = parser.add_argument_group("client options (also taken before 'pair')")
    group.add_argument("--server", metavar="ADDRESS|PROFILE", default=keep,
                       help="the serve --web server (a ws:// or wss:// address, or a profile)")
    group.add_argument("--token", default=keep, help="server token (default: $GEMINI_SERVER_TOKEN)")
    group.add_argument("--ca", metavar="FILE", default=keep, help="CA certificate to trust for wss://")
    group.add_argument("--insecure", action="store_true", default=keep,
                       help="do not verify the server's TLS certificate (testing only)")
    parser.set_defaults(run="gemini_split.commands.run_pair:run_pair_command")
