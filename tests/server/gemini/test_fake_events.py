"""The fake Gemini server's fast streaming path writes the same bytes.

``sse_events`` writes most of a long answer from a template and the server
batches writes when a turn has no ``chunk_delay``; neither may change one
byte of the wire format other tests rely on: each chunk's JSON exactly as
``json.dumps`` writes it, one SSE event per HTTP chunk.
"""

from __future__ import annotations

import json
import socket

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gemini_split.testing.fake_gemini import FakeGemini, build_chunks, sse_body, sse_events, validate_turn

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Text that JSON escapes, or writes as is only because ensure_ascii is off.
text = st.text(alphabet=st.sampled_from(list('ab é"\\\n\r\t\x00\x1f\u2028😀<>/')), max_size=30)
args = st.dictionaries(st.text(max_size=4), st.one_of(text, st.integers(), st.booleans(), st.none()), max_size=3)
call = st.fixed_dictionaries({"name": st.sampled_from(["read_file", "x"]), "args": args},
                             optional={"id": st.text(max_size=4)})
turn = st.fixed_dictionaries({}, optional={
    "text": text,
    "chunks": st.integers(1, 12),
    "thought": text,
    "function_calls": st.lists(call, min_size=1, max_size=2),
    "finish_reason": st.sampled_from(["MAX_TOKENS", "SAFETY"]),
    "usage": st.fixed_dictionaries({}, optional={"promptTokenCount": st.integers(0, 99),
                                                 "total_token_count": st.integers(0, 99)}),
    "grounding": st.just({"sources": [{"title": "t", "uri": "https://example.com"}],
                          "supports": [{"end_index": 1, "sources": [0]}], "queries": ["q"]}),
})
raw_turn = st.fixed_dictionaries({"raw": st.lists(st.dictionaries(st.text(max_size=4), text, max_size=2),
                                                  min_size=1, max_size=3)})
body = st.fixed_dictionaries(
    {"contents": st.lists(st.fixed_dictionaries({"role": st.just("user"), "parts": st.just([{"text": "hi"}])}),
                          min_size=1, max_size=2)},
    optional={"tools": st.just([{"googleSearch": {}}])},
)


def plain_events(turn: dict | None, body: dict, model: str, response_id: str) -> list[bytes]:
    """Each chunk encoded the plain way: ``json.dumps`` of the whole chunk."""
    return [b"data: " + json.dumps(chunk, ensure_ascii=False).encode("utf-8") + b"\r\n\r\n"
            for chunk in build_chunks(turn, body, model, response_id)]


@pytest.mark.timeout(120)  # a few hundred examples on a loaded machine
@SETTINGS
@given(st.one_of(turn, raw_turn, st.none()), body, st.sampled_from(["gemini-2.5-flash", 'we"ird\u00e9']),
       st.text(max_size=5))
def test_the_fast_events_are_the_plain_encoding_byte_for_byte(turn, body, model, response_id):
    if turn is not None:
        try:
            validate_turn(turn)
        except ValueError:
            return
    assert list(sse_events(turn, body, model, response_id)) == plain_events(turn, body, model, response_id)


@pytest.mark.timeout(120)
@SETTINGS
@given(st.one_of(turn, raw_turn, st.none()), body, st.sampled_from(["gemini-2.5-flash", 'we"ird\u00e9']),
       st.text(alphabet=st.sampled_from(list('ab"\\\x7fé😀-0')), max_size=6))
def test_the_whole_body_at_once_is_the_plain_events_framed_byte_for_byte(turn, body, model, response_id):
    """Also a response id with the cache's mark byte, quotes or non-ASCII,
    and texts holding the mark (then nothing is cached)."""
    if turn is not None:
        try:
            validate_turn(turn)
        except ValueError:
            return
    expected = plain_events(turn, body, model, response_id)
    for _ in range(2):  # the second time from the cache
        data, count = sse_body(turn, body, model, response_id)
        assert data == b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in expected) and count == len(expected)


@pytest.mark.timeout(30)
def test_a_text_holding_the_cache_mark_is_written_right():
    turn = {"text": "a\x7f\x7fb" * 10, "chunks": 10}
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    data, count = sse_body(turn, body, "m", "id")
    expected = plain_events(turn, body, "m", "id")
    assert data == b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in expected) and count == 10


def _raw_stream(url: str, n: int) -> bytes:
    """The whole HTTP response to a ``streamGenerateContent`` request, as
    bytes read off the socket (no client library to hide the framing)."""
    host, port = url.removeprefix("http://").split(":")
    request_body = json.dumps({"contents": [{"role": "user", "parts": [{"text": "go"}]}]}).encode()
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"POST /v1beta/models/m:streamGenerateContent?alt=sse HTTP/1.1\r\nHost: x\r\n"
                     b"Connection: close\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(request_body), request_body))
        data = bytearray()
        while chunk := sock.recv(1 << 16):
            data += chunk
    return bytes(data)


@pytest.mark.timeout(30)
def test_a_long_answer_without_delay_is_one_event_per_http_chunk_and_counted():
    n = 3000  # several write batches
    turn = {"text": "".join(f"w{i} " for i in range(n)), "chunks": n}
    with FakeGemini([turn]) as fake:
        raw = _raw_stream(fake.url, n)
        (record,) = fake.wait_for_requests(lambda rs: rs and rs[0]["completed"])
    head, _, body = raw.partition(b"\r\n\r\n")
    assert b"Transfer-Encoding: chunked" in head
    events = []
    while True:
        size_line, _, body = body.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        events.append(body[:size])
        assert body[size:size + 2] == b"\r\n"
        body = body[size + 2:]
    assert body == b"\r\n"
    request = {"contents": [{"role": "user", "parts": [{"text": "go"}]}]}
    assert events == plain_events(turn, request, "m", "fake-1")
    assert record["chunks_sent"] == n


@pytest.mark.timeout(30)
def test_abort_after_still_cuts_a_batched_stream_after_that_many_events():
    turn = {"text": "x" * 500, "chunks": 500, "abort_after": 321}
    with FakeGemini([turn]) as fake:
        raw = _raw_stream(fake.url, 500)
        (record,) = fake.wait_for_requests(lambda rs: rs and rs[0]["chunks_sent"] == 321)
    assert raw.count(b"data: ") == 321
    assert not raw.endswith(b"0\r\n\r\n")
    assert record["completed"] is False
