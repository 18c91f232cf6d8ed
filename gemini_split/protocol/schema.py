"""The protocol's JSON Schema, generated from the message classes by msgspec.

Published so a third party can implement a client or a server
(``gemini-split protocol schema``). One document (draft 2020-12): every
message under ``$defs`` by class name, ``ClientToServer`` and
``ServerToClient`` (the unions a client and a server send, each
discriminated by ``type``), and the document itself validates any message.
"""

from __future__ import annotations

import inspect
from typing import Any, Union

import msgspec

from .messages import CLIENT_MESSAGES, MESSAGE_TYPES, PROTOCOL_VERSION, SERVER_MESSAGES, Error

_ENVELOPE = ("type", "id", "timestamp")


def json_schema() -> dict[str, Any]:
    """The schema of every client and server message, as a JSON object."""
    client = Union[(*CLIENT_MESSAGES, Error)]  # type: ignore[valid-type]  # noqa: UP007
    server = Union[SERVER_MESSAGES]  # type: ignore[valid-type]  # noqa: UP007
    (client_schema, server_schema), components = msgspec.json.schema_components(
        [client, server], ref_template="#/$defs/{name}"
    )
    names = {cls.__name__ for cls in MESSAGE_TYPES.values()}
    for name, component in components.items():
        if "description" in component:  # a class docstring, made plain
            component["description"] = inspect.cleandoc(component["description"]).replace("``", "`")
        if name in names:
            # id and timestamp have no default in Python (the sender stamps
            # them) but every message on the wire carries them.
            rest = [f for f in component.get("required", []) if f not in _ENVELOPE]
            component["required"] = [*_ENVELOPE, *rest]
    # Tuples are JSON arrays: say so in the defaults too.
    schema = msgspec.to_builtins({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"gemini-split protocol {PROTOCOL_VERSION}",
        "description": "One JSON object per message (see docs/protocol.md). Fields at their "
                       "default may be left out; unknown fields are ignored.",
        "anyOf": [{"$ref": "#/$defs/ClientToServer"}, {"$ref": "#/$defs/ServerToClient"}],
        "$defs": {**components, "ClientToServer": client_schema, "ServerToClient": server_schema},
    })
    return schema  # type: ignore[no-any-return]
