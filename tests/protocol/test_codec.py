"""The codec: every message round-trips; malformed input is named precisely.

Plain synchronous tests: the protocol core needs no event loop.
"""

from __future__ import annotations

import json

import msgspec
import pytest

from gemini_split.protocol import (
    CLIENT_MESSAGES,
    MESSAGE_TYPES,
    PROTOCOL_VERSION,
    SERVER_MESSAGES,
    Cancel,
    ClientMessage,
    Connected,
    Error,
    ErrorCode,
    Finished,
    GenerateContentRequest,
    Hello,
    LocalProtocolError,
    Message,
    RemoteProtocolError,
    ServerMessage,
    TextDelta,
    ToolDiscovery,
    ToolError,
    ToolExecutionResponse,
    ToolFailure,
    ToolSpec,
    Usage,
    check_version,
    decode,
    encode,
    from_json_object,
    is_stamped,
    messages,
)
from gemini_split.stamping import Stamper, stamp

STAMP = {"id": "m-1", "timestamp": 1700000000000}


def _envelope(kind: str, **fields) -> str:
    return json.dumps({"type": kind, **STAMP, **fields})


def _refused(text: str | bytes, **kwargs) -> RemoteProtocolError:
    with pytest.raises(RemoteProtocolError) as info:
        decode(text, **kwargs)
    return info.value


# --- the message classes --------------------------------------------------------


def test_every_message_type_is_registered_once_under_its_own_name():
    classes = CLIENT_MESSAGES + SERVER_MESSAGES
    assert len({c.TYPE for c in classes}) == len(classes)
    assert set(MESSAGE_TYPES) == {c.TYPE for c in classes}
    assert Hello.TYPE == "hello" and Hello().TYPE == "hello" and Message.TYPE == ""


def test_the_unions_are_derived_from_the_class_tree():
    """Adding a message is writing one tagged class: nothing else to list."""
    tagged = [v for v in vars(messages).values() if isinstance(v, type) and issubclass(v, Message) and v.TYPE]
    assert set(CLIENT_MESSAGES) == {c for c in tagged if issubclass(c, ClientMessage)}
    assert set(SERVER_MESSAGES) == {c for c in tagged if issubclass(c, ServerMessage)}
    assert Error in SERVER_MESSAGES and Error.SENDER == "either"


def test_messages_are_frozen():
    with pytest.raises(AttributeError):
        Cancel(request_id="r").request_id = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    "message",
    [
        Hello(**STAMP, client="t/1", capabilities=("client_tools",), token="secret-token"),
        ToolDiscovery(**STAMP, tools=(ToolSpec(name="read_file", description="reads", parameters={"type": "object"}),)),
        GenerateContentRequest(**STAMP, prompt="hi ✓\nline two", model="gemini-2.5-pro"),
        ToolExecutionResponse(**STAMP, request_id="c-1", result={"lines": [1, 2]}),
        ToolExecutionResponse(**STAMP, request_id="c-1", error=ToolFailure(code="not_found", message="nope", hint="list it")),
        Cancel(**STAMP, request_id="r-1"),
        Finished(**STAMP, request_id="r-1", seq=7, usage=Usage(prompt_tokens=3, output_tokens=4, total_tokens=7), turns=2),
        ToolError(**STAMP, request_id="r", call_id="c", tool="read_file", error=ToolFailure(code="x", message="y")),
    ],
    ids=lambda m: m.TYPE,
)
def test_messages_round_trip_exactly(message):
    text = encode(message)
    assert "\n" not in text  # one message per line on stdio
    assert decode(text) == message
    assert json.loads(text)["type"] == message.TYPE


def test_fields_at_their_default_are_left_out_of_the_wire_form():
    assert json.loads(encode(Cancel(**STAMP))) == {"type": "cancel", **STAMP}
    assert json.loads(encode(Finished(**STAMP, request_id="r"))) == {"type": "finished", **STAMP, "request_id": "r"}
    # ...and come back as their defaults.
    assert decode(encode(Finished(**STAMP, request_id="r"))).usage == Usage()


def test_the_protocol_version_is_always_on_the_wire():
    assert json.loads(encode(Hello(**STAMP)))["protocol_version"] == PROTOCOL_VERSION
    assert json.loads(encode(Connected(**STAMP, session_id="s")))["protocol_version"] == PROTOCOL_VERSION


def test_the_wire_form_puts_type_and_the_envelope_first():
    text = encode(TextDelta(**STAMP, seq=3, request_id="r", content="hi"))
    assert text == '{"type":"text_delta","id":"m-1","timestamp":1700000000000,"seq":3,"request_id":"r","content":"hi"}'


# --- stamping: no clock or randomness in protocol/ --------------------------------


def test_a_message_is_built_unstamped_and_encode_refuses_to_send_it():
    message = GenerateContentRequest(prompt="hi")
    assert not is_stamped(message)
    with pytest.raises(LocalProtocolError) as info:
        encode(message)
    assert info.value.code is ErrorCode.MISSING_FIELD and info.value.field == "id"
    with pytest.raises(LocalProtocolError) as info:
        encode(GenerateContentRequest(id="x", prompt="hi"))
    assert info.value.field == "timestamp"


def test_the_sender_stamps_ids_and_milliseconds_once():
    stamper = Stamper(prefix="t", clock=lambda: 1700000000.1234)
    first = stamper(GenerateContentRequest(prompt="hi"))
    assert (first.id, first.timestamp) == ("t-1", 1700000000123)
    assert stamper(first) is first  # stamping twice changes nothing
    assert stamper(Cancel(id="mine")).id == "mine"
    assert stamper(Cancel()).id == "t-2"
    assert is_stamped(stamp(Cancel())) and stamp(Cancel()).id != stamp(Cancel()).id


def test_protocol_has_no_clock_and_no_randomness():
    import gemini_split.protocol as package
    from pathlib import Path

    sources = "".join(p.read_text() for p in Path(package.__file__).parent.glob("*.py"))
    for forbidden in ("import time", "import random", "import os", "import secrets", "uuid", "datetime"):
        assert forbidden not in sources, forbidden


# --- one test per error code ------------------------------------------------------


def test_invalid_json():
    error = _refused("{not json")
    assert error.code is ErrorCode.INVALID_JSON and "not valid JSON" in str(error)


def test_invalid_message_when_not_an_object_or_without_a_type():
    for text, words in [
        ('"a string"', "must be a JSON object, not a string"),
        ("[1, 2]", "must be a JSON object, not an array"),
        ('{"id": "1", "timestamp": 1}', "no 'type'"),
        ('{"type": 7, "id": "1", "timestamp": 1}', "no 'type'"),
    ]:
        error = _refused(text)
        assert error.code is ErrorCode.INVALID_MESSAGE, text
        assert words in str(error)


def test_unknown_type():
    error = _refused(_envelope("teleport"))
    assert error.code is ErrorCode.UNKNOWN_TYPE and error.field == "type"
    assert str(error) == "unknown message type 'teleport'"


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        (json.dumps({"type": "cancel", "timestamp": 1}), "id", "cancel is missing required field 'id'"),
        (json.dumps({"type": "cancel", "id": "x"}), "timestamp", "cancel is missing required field 'timestamp'"),
        (_envelope("generate_content_request"), "prompt", "generate_content_request is missing required field 'prompt'"),
        (_envelope("tool_discovery", tools=[{"name": "x"}]), "description",
         "tool_discovery.tools[0] is missing required field 'description'"),
    ],
)
def test_missing_field(text, field, words):
    error = _refused(text)
    assert error.code is ErrorCode.MISSING_FIELD
    assert (error.field, str(error)) == (field, words)


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        (_envelope("generate_content_request", prompt=42), "prompt",
         "generate_content_request.prompt must be a string, not a number"),
        (_envelope("tool_decision", call_id="c", approved="yes"), "approved",
         "tool_decision.approved must be true or false, not a string"),
        (_envelope("tool_discovery", tools="all"), "tools", "tool_discovery.tools must be an array, not a string"),
        (_envelope("tool_discovery", tools=[{"name": 1, "description": "d"}]), "name",
         "tool_discovery.tools[0].name must be a string, not a number"),
        (_envelope("hello", last_seq=True), "last_seq", "hello.last_seq must be an integer or null, not a boolean"),
        (_envelope("retrying", attempt=2, max_attempts=4, delay=True, error="503"), "delay",
         "retrying.delay must be a number, not a boolean"),
        (json.dumps({"type": "cancel", "id": 5, "timestamp": 1}), "id", "cancel.id must be a string, not a number"),
    ],
)
def test_invalid_field(text, field, words):
    error = _refused(text)
    assert error.code is ErrorCode.INVALID_FIELD
    assert (error.field, str(error)) == (field, words)


def test_unsupported_version():
    with pytest.raises(RemoteProtocolError) as info:
        check_version("2.0")
    assert info.value.code is ErrorCode.UNSUPPORTED_VERSION and info.value.field == "protocol_version"
    assert f"speaks {PROTOCOL_VERSION}" in str(info.value)


def test_message_too_large_is_refused_before_parsing():
    text = encode(GenerateContentRequest(**STAMP, prompt="x" * 5000))
    error = _refused(text, max_size=1000)
    assert error.code is ErrorCode.MESSAGE_TOO_LARGE
    assert "over the limit of 1000 bytes" in str(error)


def test_parsed_objects_are_checked_the_same_way():
    with pytest.raises(RemoteProtocolError) as info:
        from_json_object({"type": "generate_content_request", **STAMP, "prompt": 42})
    assert info.value.code is ErrorCode.INVALID_FIELD and info.value.field == "prompt"
    assert from_json_object({"type": "cancel", **STAMP}) == Cancel(**STAMP)


# --- hostile input (issue 13 §4, §12) ---------------------------------------------


def test_an_unknown_type_of_megabytes_is_quoted_by_a_short_prefix_only():
    error = _refused(_envelope("x" * 1_000_000))
    assert error.code is ErrorCode.UNKNOWN_TYPE
    assert len(str(error)) < 200 and "… (1000000 characters)" in str(error)


def test_no_error_message_grows_with_the_input():
    for text in [
        _envelope("generate_content_request", prompt=["y" * 1_000_000]),
        _envelope("tool_decision", call_id="c", approved="n" * 1_000_000),
        json.dumps({"type": "cancel", **STAMP, "request_id": {"k" * 1_000_000: 1}}),
        "{" + '"k":' * 10 + "x" * 1_000_000,
    ]:
        assert len(str(_refused(text))) < 300
    assert len(str(RemoteProtocolError(ErrorCode.INTERNAL, "z" * 1_000_000))) <= 1000


@pytest.mark.parametrize("depth", [5_000, 100_000])
def test_json_nested_thousands_deep_is_invalid_json_not_a_recursion_error(depth):
    for text in [
        _envelope("tool_execution_response", request_id="r")[:-1] + ', "result": ' + "[" * depth + "]" * depth + "}",
        '{"type": "cancel", "x": ' + "{\"a\": " * depth + "1" + "}" * depth + "}",
    ]:
        error = _refused(text)
        assert error.code is ErrorCode.INVALID_JSON and "nested too deeply" in str(error)


def test_a_lone_surrogate_is_invalid_json_whether_escaped_or_raw():
    escaped = _refused('{"type": "cancel", "id": "\\ud800", "timestamp": 1}')
    assert escaped.code is ErrorCode.INVALID_JSON and "surrogate" in str(escaped)
    at_the_end = _refused('{"type": "cancel", "timestamp": 1, "id": "\\ud800"}')
    assert at_the_end.code is ErrorCode.INVALID_JSON and "surrogate" in str(at_the_end)
    low = _refused('{"type": "cancel", "id": "\\udc00", "timestamp": 1}')
    assert low.code is ErrorCode.INVALID_JSON
    raw = _refused('{"type": "cancel", "id": "\ud800", "timestamp": 1}')
    assert raw.code is ErrorCode.INVALID_JSON
    pair = decode('{"type": "cancel", "id": "\\ud83d\\ude00", "timestamp": 1}')
    assert pair.id == "😀"


def test_bytes_that_are_not_utf8_are_invalid_json():
    assert _refused(b'{"type": "cancel", "id": "\xff", "timestamp": 1}').code is ErrorCode.INVALID_JSON


def test_a_lone_surrogate_we_send_goes_out_as_a_replacement_character():
    # A model's "\ud800" escape in function-call arguments, a surrogateescape'd byte in tool output.
    text = encode(ToolExecutionResponse(**STAMP, request_id="r\ud800", result={"out": "a\udcffb"}))
    text.encode("utf-8")  # what every transport does with it
    message = decode(text)
    assert (message.request_id, message.result) == ("r\ufffd", {"out": "a\ufffdb"})


def test_a_value_json_cannot_carry_is_a_local_error_not_a_crash():
    with pytest.raises(LocalProtocolError) as info:
        encode(ToolExecutionResponse(**STAMP, request_id="r", result=object()))
    assert info.value.code is ErrorCode.INVALID_FIELD


# --- compatibility ----------------------------------------------------------------


def test_unknown_fields_are_ignored_for_forward_compatibility():
    message = decode(_envelope("cancel", request_id="r", from_the_future=True))
    assert message == Cancel(**STAMP, request_id="r")


def test_integers_are_accepted_where_numbers_are_expected():
    assert decode(_envelope("retrying", attempt=2, max_attempts=4, delay=1, error="503")).delay == 1.0


def test_a_1_0_peer_sending_every_default_explicitly_is_understood():
    text = _envelope("tool_decision", call_id="c", approved=True, always=False)
    assert decode(text) == decode(_envelope("tool_decision", call_id="c", approved=True))


@pytest.mark.parametrize("version", ["1.0", "1.7", "1"])
def test_same_major_version_is_accepted(version):
    check_version(version)


@pytest.mark.parametrize("version", ["2.0", "0.9", "", "banana", 1])
def test_other_major_versions_are_refused_clearly(version):
    with pytest.raises(RemoteProtocolError) as info:
        check_version(version)
    assert info.value.code is ErrorCode.UNSUPPORTED_VERSION


def test_msgspec_structs_are_what_the_codec_speaks():
    assert issubclass(Hello, msgspec.Struct)
    assert msgspec.json.decode(encode(Cancel(**STAMP)), type=Cancel) == Cancel(**STAMP)
