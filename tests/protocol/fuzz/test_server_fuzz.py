"""A live server under generated frames and messages: every bad input gets an
error with a stable code or a proper close code, the log never shows a
traceback, and the server serves a new client after every example."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gemini_split.protocol import Cancel, GenerateContentRequest, GetHistory, GetState, Hello, ToolDecision, encode
from gemini_split.stamping import stamp
from tests.transport.websocket.rawframes import BINARY, CLOSE, CONTINUATION, PING, PONG, TEXT, close_payload, frame

from .live import LIMIT, Client, LiveServer, check_answers, check_still_serving

# Hypothesis draws string constants from every local module loaded: late in a
# full run (everything imported) on a loaded machine, generation alone has taken
# over the global 25 s; the examples themselves take well under a second.
pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def server():
    with LiveServer().running() as live:
        yield live


def _after_each(server: LiveServer, client: Client) -> None:
    try:
        client.finish()
        check_answers(client.frames())
    finally:
        client.close()
    assert server.log.tracebacks() == []
    check_still_serving(server.port)


frames = st.builds(
    lambda opcode, payload, fin, rsv, mask, lie: frame(opcode, payload, fin=fin, rsv=rsv, mask=mask, length=lie),
    opcode=st.sampled_from([TEXT, BINARY, CONTINUATION, PING, PONG, CLOSE]) | st.integers(0, 15),
    payload=st.binary(max_size=200) | st.text(max_size=100).map(str.encode),
    fin=st.booleans(),
    rsv=st.just(0) | st.integers(0, 7),
    mask=st.just(True) | st.booleans(),
    # A lying length either goes past the limit (refused on the header) or
    # is left out: a short lie would only make the server wait, correctly.
    lie=st.none() | st.integers(LIMIT + 1, 2**63 - 1),
)
close_frames = st.builds(
    lambda code, reason: frame(CLOSE, close_payload(code, reason)),
    st.integers(0, 65535), st.binary(max_size=20),
)


@given(st.lists(frames | close_frames, max_size=8))
def test_any_frames_get_answers_or_a_proper_close(server, sequence):
    client = Client(server.port)
    client.send(frame(TEXT, encode(stamp(Hello(client="fuzz"))).encode()) + b"".join(sequence) + frame(CLOSE, close_payload(1000)))
    _after_each(server, client)


#: Drawn, not stamped: a stamp's random id would make examples irreproducible.
ENVELOPE = {"id": st.text(min_size=1, max_size=12), "timestamp": st.integers(0, 2**53)}
text = st.text(max_size=30)
valid = st.one_of(
    st.builds(GenerateContentRequest, **ENVELOPE, prompt=text, model=st.none() | st.sampled_from(["gemini-2.5-flash", "../../x", "%2e%2e/x"])),
    st.builds(Cancel, **ENVELOPE, request_id=st.none() | text),
    st.builds(ToolDecision, **ENVELOPE, call_id=text, approved=st.booleans()),
    st.builds(GetHistory, **ENVELOPE),
    st.builds(GetState, **ENVELOPE),
    st.builds(Hello, **ENVELOPE, client=text),
).map(encode)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)


@st.composite
def mutated(draw) -> str:
    obj = json.loads(draw(valid))
    choice = draw(st.sampled_from(["retype", "drop", "unknown", "garbage", "cut"]))
    if choice == "retype":
        obj[draw(st.sampled_from(sorted(obj)))] = draw(json_values)
    elif choice == "drop":
        obj.pop(draw(st.sampled_from(sorted(obj))))
    elif choice == "unknown":
        obj["type"] = draw(text)
    elif choice == "garbage":
        return draw(st.text(max_size=60))
    text_form = json.dumps(obj)
    if choice == "cut":
        text_form = text_form[: draw(st.integers(0, len(text_form)))]
    return text_form


@given(st.booleans(), st.lists(valid | mutated(), max_size=6))
def test_any_messages_get_answers_with_stable_codes(server, say_hello, messages):
    client = Client(server.port)
    first = [encode(stamp(Hello(client="fuzz")))] if say_hello else []
    client.send(b"".join(frame(TEXT, m.encode()) for m in first + messages) + frame(CLOSE, close_payload(1000)))
    _after_each(server, client)


def test_a_client_that_leaves_right_after_hello_leaves_no_traceback(server):
    """Found by the fuzzer: `connected` sent to a client already gone raised
    out of the session's nursery as an exception group, and each such client
    wrote a traceback to the daemon's log (issue 13 §12)."""
    for _ in range(20):
        client = Client(server.port)
        client.send(frame(TEXT, encode(stamp(Hello(client="gone"))).encode()) + frame(CLOSE, close_payload(1000)))
        _after_each(server, client)
