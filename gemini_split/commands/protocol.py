"""``gemini-split protocol …``: facts about the wire protocol.

``protocol schema`` prints the JSON Schema of every client and server
message, generated from the message classes (see docs/protocol.md).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from gemini_split.environment import Environment
from gemini_split.exit_status import ExitStatus


def add_protocol_parser(commands: Any) -> None:
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


def run_protocol(args: argparse.Namespace, env: Environment) -> ExitStatus:
    from gemini_split.protocol.schema import json_schema

    env.stdout.write(json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n")
    env.stdout.flush()
    return ExitStatus.SUCCESS
