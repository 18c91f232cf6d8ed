"""The codec under generated input: whatever a peer sends, ``decode`` either
returns a message or raises a ProtocolError with a stable code — never
anything else — and every message it accepts survives encode/decode."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gemini_split.protocol import (
    MESSAGE_TYPES,
    Cancel,
    ErrorCode,
    GenerateContentRequest,
    GetHistory,
    GetState,
    Hello,
    ProtocolError,
    ToolDecision,
    decode,
    encode,
)

# Hypothesis draws string constants from every local module loaded: late in a
# full run (everything imported) on a loaded machine, generation alone has taken
# over the global 25 s; the examples themselves take well under a second.
pytestmark = pytest.mark.timeout(120)

CODES = {code.value for code in ErrorCode}

#: Drawn, not stamped: a stamp's random id would make examples irreproducible.
ENVELOPE = {"id": st.text(min_size=1, max_size=12), "timestamp": st.integers(0, 2**53)}
text = st.text(max_size=40)
json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=12,
)

client_messages = st.one_of(
    st.builds(Hello, **ENVELOPE, client=text, capabilities=st.lists(text, max_size=3).map(tuple), token=st.none() | text),
    st.builds(GenerateContentRequest, **ENVELOPE, prompt=text, model=st.none() | text),
    st.builds(Cancel, **ENVELOPE, request_id=st.none() | text),
    st.builds(ToolDecision, **ENVELOPE, call_id=text, approved=st.booleans(), always=st.booleans()),
    st.builds(GetHistory, **ENVELOPE),
    st.builds(GetState, **ENVELOPE),
)


def _decode_or_refuse(data: str | bytes) -> None:
    try:
        message = decode(data, max_size=64 * 1024)
    except ProtocolError as exc:
        assert exc.code in CODES, exc.code
        assert isinstance(str(exc), str) and str(exc)
        return
    # What was accepted is a real message that encodes again.
    assert type(message).TYPE in MESSAGE_TYPES
    assert encode(decode(encode(message))) == encode(message)


@given(client_messages)
def test_every_valid_message_round_trips(message):
    assert decode(encode(message)) == message


@given(st.text(max_size=300) | st.binary(max_size=300))
def test_arbitrary_text_or_bytes_is_a_message_or_a_coded_error(data):
    _decode_or_refuse(data)


@given(
    st.sampled_from(sorted(MESSAGE_TYPES)) | text,
    st.dictionaries(st.sampled_from(["id", "timestamp", "prompt", "model", "request_id", "call_id",
                                     "approved", "tools", "result", "error", "protocol_version",
                                     "client", "token", "content", "seq"]) | text,
                    json_values, max_size=6),
)
def test_objects_with_any_type_and_fields_are_a_message_or_a_coded_error(kind, fields):
    _decode_or_refuse(json.dumps({"type": kind, **fields}))


@given(client_messages, st.data())
def test_mutated_encodings_are_a_message_or_a_coded_error(message, data):
    encoded = encode(message)
    mutation = data.draw(st.sampled_from(["cut", "flip", "insert", "retype", "nest"]))
    if mutation == "cut":
        encoded = encoded[: data.draw(st.integers(0, len(encoded)))]
    elif mutation == "flip":
        at = data.draw(st.integers(0, len(encoded) - 1))
        encoded = encoded[:at] + data.draw(st.characters()) + encoded[at + 1 :]
    elif mutation == "insert":
        at = data.draw(st.integers(0, len(encoded)))
        encoded = encoded[:at] + data.draw(st.text(min_size=1, max_size=8)) + encoded[at:]
    elif mutation == "retype":
        obj = json.loads(encoded)
        obj[data.draw(st.sampled_from(sorted(obj)))] = data.draw(json_values)
        encoded = json.dumps(obj)
    else:
        depth = data.draw(st.integers(1, 200))
        obj = json.loads(encoded)
        obj[data.draw(st.sampled_from(sorted(obj)))] = json.loads("[" * depth + "]" * depth)
        encoded = json.dumps(obj)
    _decode_or_refuse(encoded)
