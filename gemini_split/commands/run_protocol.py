"""``gemini-split protocol …``: facts about the wire protocol.

``protocol schema`` prints the JSON Schema of every client and server
message, generated from the message classes (see docs/protocol.md).
"""

from __future__ import annotations

import argparse
import json

from gemini_split.environment import Environment
from gemini_split.exit_status import ExitStatus
from gemini_split.protocol.schema import json_schema


def run_protocol(args: argparse.Namespace, env: Environment) -> ExitStatus:

    env.stdout.write(json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n")
    env.stdout.flush()
    return ExitStatus.SUCCESS
