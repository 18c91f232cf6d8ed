"""MergingChunkedReader reads what h11's own ChunkedReader reads.

Two h11 client connections receive the same response bytes, split at the
same points: one with h11's reader, one with the merging reader. The body
bytes, the trailers and the end (EndOfMessage, or the same protocol error
after the same body bytes) must be the same; only the number of ``Data``
events may differ, and it does when several chunks are buffered.
"""

from __future__ import annotations

import h11
import pytest
from h11 import _readers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gemini_split.server.model import h11_chunks
from gemini_split.server.model.h11_chunks import MergingChunkedReader

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


def read(response: bytes, splits: list[int], reader: type) -> tuple[bytes, list, object, int]:
    """(body, trailers, end, Data events) of ``response`` fed in pieces
    cut at ``splits`` to a client connection reading chunks with ``reader``."""
    table = _readers.READERS[h11.SEND_BODY]
    saved = table["chunked"]
    table["chunked"] = reader
    try:
        conn = h11.Connection(h11.CLIENT)
        conn.send(h11.Request(method="GET", target="/", headers=[("Host", "x")]))
        conn.send(h11.EndOfMessage())
        body, trailers, end, datas = bytearray(), [], None, 0
        cuts = sorted({0, len(response), *(s % (len(response) + 1) for s in splits)})
        pieces = [response[a:b] for a, b in zip(cuts, cuts[1:])] + [b""]  # b"": the peer closed
        for piece in pieces:
            conn.receive_data(piece)
            while end is None:
                try:
                    event = conn.next_event()
                except h11.RemoteProtocolError as exc:
                    end = ("error", type(exc).__name__)
                    break
                if event is h11.NEED_DATA:
                    break
                if isinstance(event, h11.Data):
                    body += event.data
                    datas += 1
                elif isinstance(event, h11.EndOfMessage):
                    trailers = list(event.headers)
                    end = "end"
                elif isinstance(event, h11.ConnectionClosed):
                    end = "closed"
            if end is not None:
                break
        return bytes(body), trailers, end, datas
    finally:
        table["chunked"] = saved


def chunked(sizes: list[int], *, ext: bool, trailer: bool) -> bytes:
    out = bytearray()
    for i, size in enumerate(sizes):
        out += b"%x%s\r\n" % (size, b";x=1" if ext and i % 2 else b"")
        out += bytes((i + j) % 251 for j in range(size)) + b"\r\n"
    out += b"0\r\n" + (b"X-Trailer: yes\r\n" if trailer else b"") + b"\r\n"
    return bytes(out)


@pytest.mark.timeout(120)
@SETTINGS
@given(sizes=st.lists(st.integers(1, 300), max_size=30), ext=st.booleans(), trailer=st.booleans(),
       splits=st.lists(st.integers(0, 10_000), max_size=6),
       damage=st.one_of(st.none(), st.tuples(st.integers(0, 10_000), st.sampled_from([b"Z", b"\n", b"", b"0"]))),
       cut=st.one_of(st.none(), st.integers(0, 10_000)))
def test_the_same_body_trailers_and_errors_as_h11s_own_reader(sizes, ext, trailer, splits, damage, cut):
    body = chunked(sizes, ext=ext, trailer=trailer)
    if damage is not None:  # a byte replaced (or dropped): a malformed chunk somewhere
        at, byte = damage
        at %= len(body)
        body = body[:at] + byte + body[at + 1:]
    if cut is not None:  # the peer closes mid-body
        body = body[:cut % (len(body) + 1)]
    response = HEAD + body
    stock = read(response, splits, _readers.ChunkedReader)
    merged = read(response, splits, MergingChunkedReader)
    assert merged[:3] == stock[:3]
    assert merged[3] <= stock[3]


@pytest.mark.timeout(10)
def test_buffered_chunks_come_as_one_data_event():
    sizes = [130] * 600
    body, trailers, end, datas = read(HEAD + chunked(sizes, ext=False, trailer=True), [], MergingChunkedReader)
    assert len(body) == 130 * 600 and end == "end" and trailers == [(b"x-trailer", b"yes")]
    assert datas == 3  # the first chunk alone, then 64 KiB at most in one (78,000 bytes)


@pytest.mark.timeout(10)
def test_the_first_chunk_is_handed_over_before_the_rest_is_read():
    table = _readers.READERS[h11.SEND_BODY]
    saved, table["chunked"] = table["chunked"], MergingChunkedReader
    try:
        conn = h11.Connection(h11.CLIENT)
        conn.send(h11.Request(method="GET", target="/", headers=[("Host", "x")]))
        conn.send(h11.EndOfMessage())
        conn.receive_data(HEAD + chunked([100] * 500, ext=False, trailer=False))
        assert type(conn.next_event()) is h11.Response
        first = conn.next_event()
        assert len(first.data) == 100  # alone, though 499 more chunks are buffered
        assert len(conn.next_event().data) == 100 * 499  # the rest, merged
        assert type(conn.next_event()) is h11.EndOfMessage
    finally:
        table["chunked"] = saved


@pytest.mark.timeout(10)
def test_install_puts_the_reader_in_h11s_table_once():
    h11_chunks.install()
    h11_chunks.install()
    assert _readers.READERS[h11.SEND_BODY]["chunked"] is MergingChunkedReader
