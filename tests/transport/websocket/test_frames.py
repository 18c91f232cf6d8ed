"""RFC 6455 compliance of the server, frame by frame: the Autobahn TestSuite's
cases (sections 1-7, and 9 within our message limit) ported to raw frames
(issue 13 §9, §12).

A violation is answered with a close frame carrying the right code — 1002
protocol error, 1007 bad UTF-8, 1009 too big (decided on the header, before
the payload) — then the TCP close; never a dropped connection, never a
traceback in the server's log, and the server goes on serving others.
"""

from __future__ import annotations

import logging

import pytest
import trio

from .helpers import DEADLINE, Recorder, port_of, start
from .rawframes import (
    BINARY,
    CLOSE,
    CONTINUATION,
    PING,
    PONG,
    TEXT,
    RawWebSocket,
    close_payload,
    frame,
)

LIMIT = 1 << 20  # the server's message limit in these tests


async def _server(nursery, **options) -> int:
    return port_of(await start(nursery, Recorder(), max_message_size=LIMIT, **options))


async def _echoed(ws: RawWebSocket, payload: bytes) -> None:
    opcode, got = await ws.read_message()
    assert opcode == TEXT and got == payload


# --- section 1: framing -------------------------------------------------------

@pytest.mark.parametrize("size", [0, 125, 126, 127, 128, 65535, 65536])
@pytest.mark.parametrize("opcode", [TEXT, BINARY])
async def test_1_messages_of_every_length_class_are_echoed(size, opcode):
    payload = b"*" * size
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            ws = await RawWebSocket.connect(await _server(nursery))
            await ws.send(frame(opcode, payload))
            await _echoed(ws, payload)
            nursery.cancel_scope.cancel()


async def test_1_a_frame_written_one_byte_at_a_time_is_one_message():
    payload = "é" * 300
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            ws = await RawWebSocket.connect(await _server(nursery))
            for byte in frame(TEXT, payload.encode()):
                await ws.send(bytes([byte]))
            await _echoed(ws, payload.encode())
            nursery.cancel_scope.cancel()


# --- section 2: pings and pongs ------------------------------------------------

@pytest.mark.parametrize("payload", [b"", b"hello", bytes(range(125)), b"\xff\xfe\x00binary"])
async def test_2_a_ping_is_answered_with_a_pong_of_the_same_payload(payload):
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            ws = await RawWebSocket.connect(await _server(nursery))
            await ws.send(frame(PING, payload))
            pong = await ws.read_frame()
            assert pong is not None and pong.opcode == PONG and pong.payload == payload
            nursery.cancel_scope.cancel()


async def test_2_unsolicited_pongs_are_ignored_and_ten_pings_get_ten_pongs():
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            ws = await RawWebSocket.connect(await _server(nursery))
            await ws.send(frame(PONG, b"unasked") + b"".join(frame(PING, b"%d" % i) for i in range(10)))
            for i in range(10):
                pong = await ws.read_frame()
                assert pong is not None and (pong.opcode, pong.payload) == (PONG, b"%d" % i)
            await ws.send_text("still open")
            await _echoed(ws, b"still open")
            nursery.cancel_scope.cancel()


# --- sections 2-7: what must be refused, and with which code ---------------------

BAD_UTF8 = [
    b"\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xed\xa0\x80edited",  # a surrogate (6.x)
    b"\xc0\xaf",  # overlong "/"
    b"\xe0\x80\xaf",  # overlong, 3 bytes
    b"\xf4\x90\x80\x80",  # above U+10FFFF
    b"\xff",
    b"\xce",  # truncated at the end of the message
    b"\xed\xbf\xbf",  # U+DFFF
]

REFUSED = [
    # 2.5: a ping with 126 bytes of payload
    ("ping-126-bytes", frame(PING, b"x" * 126), 1002),
    # 3.x: RSV bits with no extension negotiated
    *[(f"rsv-{bits}", frame(TEXT, b"hello", rsv=bits), 1002) for bits in range(1, 8)],
    ("rsv-on-a-ping", frame(PING, b"p", rsv=4), 1002),
    # 4.x: reserved opcodes, data (3-7) and control (11-15)
    *[(f"opcode-{op}", frame(op, b"x"), 1002) for op in (3, 4, 5, 6, 7, 11, 12, 13, 14, 15)],
    # 5.x: fragmentation
    ("fragmented-ping", frame(PING, b"a", fin=False) + frame(CONTINUATION, b"b"), 1002),
    ("fragmented-close", frame(CLOSE, close_payload(1000), fin=False), 1002),
    ("stray-continuation", frame(CONTINUATION, b"x"), 1002),
    ("stray-final-continuation", frame(CONTINUATION, b"x", fin=False), 1002),
    ("text-inside-a-fragmented-text",
     frame(TEXT, b"a", fin=False) + frame(TEXT, b"b"), 1002),
    # masking
    ("unmasked-text", frame(TEXT, b"hello", mask=False), 1002),
    ("unmasked-ping", frame(PING, b"hello", mask=False), 1002),
    # a length written in more bytes than it needs
    ("length-in-2-bytes-for-5", bytes([0x81, 0x80 | 126, 0, 5]) + b"\0\0\0\0" + b"hello", 1002),
    # 6.x: UTF-8
    *[(f"bad-utf8-{i}", frame(TEXT, data), 1007) for i, data in enumerate(BAD_UTF8)],
    ("bad-utf8-in-a-fragment", frame(TEXT, b"ok", fin=False) + frame(CONTINUATION, b"\xc0\xaf"), 1007),
    # 7.x: close frames
    ("close-with-one-byte", frame(CLOSE, b"\x03"), 1002),
    *[(f"close-code-{c}", frame(CLOSE, close_payload(c)), 1002)
      for c in (0, 999, 1004, 1005, 1006, 1016, 1100, 2000, 2999)],
    ("close-reason-bad-utf8", frame(CLOSE, close_payload(1000, b"\xce\xba\xed\xa0\x80")), 1007),
    # the message limit, judged on the header (9.x stops at our limit)
    ("announces-2^63-1-bytes", frame(TEXT, length=2**63 - 1), 1009),
    ("announces-limit-plus-one", frame(BINARY, length=LIMIT + 1), 1009),
    ("fragments-over-the-limit",
     frame(TEXT, b"a" * 1000, fin=False) + frame(CONTINUATION, length=LIMIT), 1009),
]


@pytest.mark.parametrize("data, code", [pytest.param(d, c, id=n) for n, d, c in REFUSED])
async def test_violations_are_answered_with_the_right_close_code(data, code, caplog):
    caplog.set_level(logging.DEBUG)
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            port = await _server(nursery)
            ws = await RawWebSocket.connect(port)
            await ws.send(data)
            await ws.expect_close(code)
            # Others are unaffected.
            other = await RawWebSocket.connect(port)
            await other.send_text("next")
            await _echoed(other, b"next")
            nursery.cancel_scope.cancel()
    assert "Traceback" not in caplog.text
    assert not [r for r in caplog.records if r.exc_info]
    [ending] = [r.getMessage() for r in caplog.records if "ended:" in r.getMessage()][:1]
    assert f"({code})" in ending and "\n" not in ending


async def test_a_huge_announced_frame_is_refused_before_any_payload_arrives():
    """The header alone earns the 1009: nothing is waited for, nothing buffered."""
    with trio.fail_after(2):
        async with trio.open_nursery() as nursery:
            ws = await RawWebSocket.connect(await _server(nursery))
            await ws.send(frame(TEXT, length=2**63 - 1)[:14])  # header and mask key only
            close = await ws.expect_close(1009)
            assert b"over the limit" in close.payload
            nursery.cancel_scope.cancel()


# --- sections 5-7: what must be accepted ---------------------------------------------

GOOD_UTF8 = ["κόσμε", "\U0001f600 emoji", "\u0000 nul", "\uffff", "\U0010ffff", "mixed é 中 \U0001f680"]


@pytest.mark.parametrize("text", GOOD_UTF8)
async def test_6_valid_utf8_is_echoed_even_split_inside_a_code_point(text):
    data = text.encode()
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            ws = await RawWebSocket.connect(await _server(nursery))
            await ws.send(frame(TEXT, data))
            await _echoed(ws, data)
            # One fragment per byte: code points split across frames.
            pieces = [data[i : i + 1] for i in range(len(data))] or [b""]
            frames = [frame(TEXT if i == 0 else CONTINUATION, p, fin=i == len(pieces) - 1) for i, p in enumerate(pieces)]
            await ws.send(b"".join(frames))
            await _echoed(ws, data)
            nursery.cancel_scope.cancel()


async def test_5_fragments_with_pings_between_them_make_one_message():
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            ws = await RawWebSocket.connect(await _server(nursery))
            await ws.send(
                frame(TEXT, b"frag", fin=False) + frame(PING, b"between")
                + frame(CONTINUATION, b"ment", fin=False) + frame(CONTINUATION, b"ed")
            )
            pong = await ws.read_frame()
            assert pong is not None and (pong.opcode, pong.payload) == (PONG, b"between")
            await _echoed(ws, b"fragmented")
            nursery.cancel_scope.cancel()


@pytest.mark.parametrize("code", [1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 3000, 3999, 4000, 4999])
async def test_7_a_close_with_a_valid_code_is_answered_with_that_code(code):
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            ws = await RawWebSocket.connect(await _server(nursery))
            await ws.send(frame(CLOSE, close_payload(code, b"bye \xc3\xa9")))
            await ws.expect_close(code)
            nursery.cancel_scope.cancel()


async def test_7_an_empty_close_is_answered_and_what_follows_it_is_ignored():
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            ws = await RawWebSocket.connect(await _server(nursery))
            await ws.send(frame(CLOSE) + frame(TEXT, b"after the close"))
            answer = await ws.read_frame()
            assert answer is not None and answer.opcode == CLOSE
            assert await ws.read_frame() is None  # no echo: the server closed
            nursery.cancel_scope.cancel()


# --- section 9 (limited to our message limit) -----------------------------------------

@pytest.mark.parametrize("size", [64 * 1024, 256 * 1024, LIMIT])
@pytest.mark.parametrize("fragment", [None, 4096])
async def test_9_large_messages_up_to_the_limit_arrive_intact(size, fragment):
    payload = bytes(ord("a") + i % 26 for i in range(size))
    pieces = [payload] if fragment is None else [payload[i : i + fragment] for i in range(0, size, fragment)]
    frames = b"".join(
        frame(TEXT if i == 0 else CONTINUATION, p, fin=i == len(pieces) - 1) for i, p in enumerate(pieces)
    )
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            ws = await RawWebSocket.connect(await _server(nursery))
            async with trio.open_nursery() as io:
                io.start_soon(ws.send, frames)
                await _echoed(ws, payload)
            nursery.cancel_scope.cancel()
