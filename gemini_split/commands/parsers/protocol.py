"""``gemini-split protocol``'s arguments (the runner: :mod:`gemini_split.commands.run_protocol`)."""

from __future__ import annotations

from typing import Any


def add_parser(commands: Any) -> None:
    p = commands.add_parser(
        "protocol",
        help="facts about the wire protocol (its JSON Schema)",
        description="Facts about the gemini-split wire protocol, for people writing a client or a server.",
    )
    sub = p.add_subparsers(dest="protocol_command", metavar="SUBCOMMAND", required=True)
    sub.add_parser(
        "schema",
        help="print the JSON Schema of every message",
        description="Print the JSON Schema (draft 2020-12) of every message a client or a server "
                    "sends, generated from the message classes. $defs/ClientToServer and "
                    "$defs/ServerToClient are the two directions.",
    )
    p.set_defaults(run="gemini_split.commands.run_protocol:run_protocol")
