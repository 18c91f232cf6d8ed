"""SseEvents splits a streamed body into the events google-genai does.

The same bytes, cut into the same blocks, go through google-genai's own
``HttpResponse._aiter_response_stream`` (an httpx2 response whose body
yields those blocks) and through :class:`SseEvents`; the events must be the
same (ours may be bytes on the fast path: compared decoded as google-genai
decodes). The fast path must really be taken for the usual stream.
"""

from __future__ import annotations

import httpx2
import pytest
from google.genai import _api_client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gemini_split.server.model.gemini import SseEvents

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

payload = st.text(alphabet=st.sampled_from(list('{}"\\ab:é\u2028\u0085 ')), max_size=12).map(str.encode)
line_end = st.sampled_from([b"\r\n", b"\n", b"\r"])
line = st.one_of(
    st.tuples(st.just(b"data: "), payload).map(b"".join),
    payload,                                   # a raw JSON line (an error body)
    st.just(b""),                              # a blank line ends an event
    st.sampled_from([b": comment", b"event: x", b"data:nospace", b"\xff\xfe broken utf-8"]),
)
usual_event = payload.map(lambda p: b"data: " + p + b"\r\n\r\n")
stream = st.one_of(
    st.lists(st.tuples(line, line_end).map(b"".join), max_size=12).map(b"".join),
    st.lists(usual_event, max_size=12).map(b"".join),
    st.tuples(st.lists(usual_event, max_size=6).map(b"".join), st.lists(st.tuples(line, line_end).map(b"".join),
                                                                          max_size=4).map(b"".join),
              st.lists(usual_event, max_size=6).map(b"".join)).map(b"".join),
)


def blocks_of(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    return [data[a:b] for a, b in zip(points, points[1:])]


async def google_events(blocks: list[bytes]) -> list[str]:
    async def body():
        for block in blocks:
            yield block

    response = httpx2.Response(200, content=body())
    reader = _api_client.HttpResponse(response.headers, response)
    return [event async for event in reader._aiter_response_stream()]


def our_events(blocks: list[bytes]) -> list[str]:
    events = SseEvents()
    out = [e for block in blocks for e in events.feed(block)] + events.close()
    return [e.decode("utf-8", errors="replace") if isinstance(e, bytes) else e for e in out]


@pytest.mark.timeout(120)
@SETTINGS
@given(stream, st.lists(st.integers(0, 500), max_size=5))
async def test_the_same_events_as_google_genai_for_any_stream_and_any_blocks(data, cuts):
    blocks = blocks_of(data, cuts)
    assert our_events(blocks) == await google_events(blocks)


@pytest.mark.timeout(10)
def test_the_usual_stream_takes_the_fast_path_across_block_boundaries():
    data = b"".join(b'data: {"n": %d}\r\n\r\n' % i for i in range(100))
    events = SseEvents()
    out = []
    for block in blocks_of(data, list(range(7, len(data), 61))):  # cut mid-line, mid-separator…
        out += events.feed(block)
    out += events.close()
    assert out == [b'{"n": %d}' % i for i in range(100)]  # bytes: no line splitting, no decoding


@pytest.mark.timeout(10)
def test_an_event_is_returned_as_soon_as_its_block_ends_it():
    for ending in (b"\r\n\r\n", b"\n\n", b"\r\r\n", b"\r\n\n"):  # (a last CR waits: it may start a CR LF)
        events = SseEvents()
        assert events.feed(b'data: {"a"') == []
        got = events.feed(b': 1}' + ending)
        assert [e.decode() if isinstance(e, bytes) else e for e in got] == ['{"a": 1}'], ending
        assert events.close() == []
