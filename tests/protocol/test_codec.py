"""The codec: every message round-trips; malformed input is named precisely.

Plain synchronous tests: the protocol core needs no event loop.
"""

from __future__ import annotations

import json

import pytest

from gemini_split.protocol import (
    CLIENT_MESSAGES,
    MESSAGE_TYPES,
    SERVER_MESSAGES,
    Cancel,
    ErrorCode,
    Finished,
    GenerateContentRequest,
    Hello,
    RemoteProtocolError,
    ToolDiscovery,
    ToolError,
    ToolExecutionResponse,
    ToolFailure,
    ToolSpec,
    Usage,
    check_version,
    decode,
    encode,
)


def _decode_obj(obj) -> object:
    return decode(json.dumps(obj))


def _envelope(kind: str, **fields) -> dict:
    return {"type": kind, "id": "m-1", "timestamp": 1700000000000, **fields}


def test_every_message_type_is_registered_once_under_its_own_name():
    classes = CLIENT_MESSAGES + SERVER_MESSAGES
    assert len({c.TYPE for c in classes}) == len(classes)
    assert set(MESSAGE_TYPES) == {c.TYPE for c in classes}


@pytest.mark.parametrize(
    "message",
    [
        Hello(client="t/1", capabilities=["client_tools"], token="secret-token"),
        ToolDiscovery(tools=[ToolSpec(name="read_file", description="reads", parameters={"type": "object"})]),
        GenerateContentRequest(prompt="hi ✓\nline two", model="gemini-2.5-pro"),
        ToolExecutionResponse(request_id="c-1", result={"lines": [1, 2]}),
        ToolExecutionResponse(request_id="c-1", error=ToolFailure(code="not_found", message="nope", hint="list it")),
        Cancel(request_id="r-1"),
        Finished(request_id="r-1", seq=7, usage=Usage(prompt_tokens=3, output_tokens=4, total_tokens=7), turns=2),
        ToolError(request_id="r", call_id="c", tool="read_file", error=ToolFailure(code="x", message="y")),
    ],
    ids=lambda m: m.TYPE,
)
def test_messages_round_trip_exactly(message):
    text = encode(message)
    assert "\n" not in text  # one message per line on stdio
    assert decode(text) == message
    assert json.loads(text)["type"] == message.TYPE


def test_none_fields_are_left_out_of_the_wire_form():
    obj = json.loads(encode(Cancel()))
    assert set(obj) == {"type", "id", "timestamp"}


@pytest.mark.parametrize(
    ("text", "code", "words"),
    [
        ("{not json", ErrorCode.INVALID_JSON, "not valid JSON"),
        ('"a string"', ErrorCode.INVALID_MESSAGE, "must be a JSON object, not a string"),
        ("[1, 2]", ErrorCode.INVALID_MESSAGE, "not an array"),
        ('{"id": "1", "timestamp": 1}', ErrorCode.INVALID_MESSAGE, "no 'type'"),
        (json.dumps(_envelope("teleport")), ErrorCode.UNKNOWN_TYPE, "unknown message type 'teleport'"),
        (json.dumps({"type": "cancel", "timestamp": 1}), ErrorCode.MISSING_FIELD, "'id'"),
        (json.dumps({"type": "cancel", "id": "x"}), ErrorCode.MISSING_FIELD, "'timestamp'"),
        (json.dumps(_envelope("generate_content_request")), ErrorCode.MISSING_FIELD, "missing required field 'prompt'"),
        (json.dumps(_envelope("generate_content_request", prompt=42)), ErrorCode.INVALID_FIELD, "prompt must be a string, not a number"),
        (json.dumps(_envelope("tool_decision", call_id="c", approved="yes")), ErrorCode.INVALID_FIELD, "approved must be true or false"),
        (json.dumps(_envelope("tool_discovery", tools=[{"name": "x"}])), ErrorCode.MISSING_FIELD, "tools[0] is missing required field 'description'"),
        (json.dumps(_envelope("tool_discovery", tools="all")), ErrorCode.INVALID_FIELD, "tools must be an array"),
        (json.dumps(_envelope("hello", last_seq=True)), ErrorCode.INVALID_FIELD, "last_seq must be an integer"),
    ],
)
def test_malformed_input_is_rejected_with_a_code_that_names_the_problem(text, code, words):
    with pytest.raises(RemoteProtocolError) as info:
        decode(text)
    assert info.value.code is code
    assert words in str(info.value)


def test_message_over_the_size_limit_is_rejected_before_parsing():
    text = encode(GenerateContentRequest(prompt="x" * 5000))
    with pytest.raises(RemoteProtocolError) as info:
        decode(text, max_size=1000)
    assert info.value.code is ErrorCode.MESSAGE_TOO_LARGE
    assert "over the limit of 1000 bytes" in str(info.value)


def test_unknown_fields_are_ignored_for_forward_compatibility():
    message = decode(json.dumps(_envelope("cancel", request_id="r", from_the_future=True)))
    assert message == Cancel(id="m-1", timestamp=1700000000000, request_id="r")


def test_integers_are_accepted_where_numbers_are_expected_but_not_booleans():
    ok = decode(json.dumps(_envelope("retrying", attempt=2, max_attempts=4, delay=1, error="503")))
    assert ok.delay == 1.0
    with pytest.raises(RemoteProtocolError):
        decode(json.dumps(_envelope("retrying", attempt=2, max_attempts=4, delay=True, error="503")))


@pytest.mark.parametrize("version", ["1.0", "1.7", "1"])
def test_same_major_version_is_accepted(version):
    check_version(version)


@pytest.mark.parametrize("version", ["2.0", "0.9", "", "banana"])
def test_other_major_versions_are_refused_clearly(version):
    with pytest.raises(RemoteProtocolError) as info:
        check_version(version)
    assert info.value.code is ErrorCode.UNSUPPORTED_VERSION
    assert "speaks 1.0" in str(info.value)
