"""``gemini-split protocol schema``: the published JSON Schema accepts every
documented message and refuses what a receiver would refuse."""

from __future__ import annotations

import json
from io import StringIO

import jsonschema
import pytest

from gemini_split.cli import main
from gemini_split.environment import Environment
from gemini_split.exit_status import ExitStatus
from gemini_split.protocol import CLIENT_MESSAGES, MESSAGE_TYPES, PROTOCOL_VERSION, SERVER_MESSAGES

from tests.test_docs import _examples


@pytest.fixture(scope="module")
def schema() -> dict:
    out = StringIO()
    assert main(["protocol", "schema"], Environment(stdout=out, stderr=StringIO())) == ExitStatus.SUCCESS
    printed = json.loads(out.getvalue())
    jsonschema.Draft202012Validator.check_schema(printed)
    return printed


def _validator(schema: dict, direction: str | None = None) -> jsonschema.Draft202012Validator:
    if direction:
        schema = {**schema, "anyOf": [{"$ref": f"#/$defs/{direction}"}]}
    return jsonschema.Draft202012Validator(schema)


def test_the_schema_names_the_protocol_version_and_every_message(schema):
    assert schema["title"] == f"gemini-split protocol {PROTOCOL_VERSION}"
    assert {cls.__name__ for cls in MESSAGE_TYPES.values()} <= set(schema["$defs"])


def test_every_documented_example_validates_against_the_printed_schema(schema):
    validator = _validator(schema)
    examples = _examples()
    assert len(examples) >= len(MESSAGE_TYPES)
    for text in examples:
        validator.validate(json.loads(text))


def test_each_direction_accepts_only_what_its_side_sends(schema):
    to_server, to_client = _validator(schema, "ClientToServer"), _validator(schema, "ServerToClient")
    for text in _examples():
        message = json.loads(text)
        sender = MESSAGE_TYPES[message["type"]]
        assert to_server.is_valid(message) == (sender in CLIENT_MESSAGES or sender.SENDER == "either"), text
        assert to_client.is_valid(message) == (sender in SERVER_MESSAGES), text


@pytest.mark.parametrize(
    "message",
    [
        {"type": "cancel", "timestamp": 1},  # no id
        {"type": "cancel", "id": "x"},  # no timestamp
        {"type": "teleport", "id": "x", "timestamp": 1},
        {"type": "generate_content_request", "id": "x", "timestamp": 1},  # no prompt
        {"type": "generate_content_request", "id": "x", "timestamp": 1, "prompt": 42},
        {"type": "tool_discovery", "id": "x", "timestamp": 1, "tools": [{"name": "x"}]},
    ],
)
def test_the_schema_refuses_what_the_decoder_refuses(schema, message):
    assert not _validator(schema).is_valid(message)
