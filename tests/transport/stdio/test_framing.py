"""The JSON-lines framing, without an event loop: texts to lines and back."""

from __future__ import annotations

import pytest

from gemini_split.transport import ConnectFailed
from gemini_split_stdio import decode_line, encode_line, parse_command
from gemini_split_stdio._framing import LineSplitter, LineTooLong


def test_a_protocol_message_travels_as_is():
    message = '{"type":"hello","id":"1","text":"a \\"quoted\\" line\\nand more"}'
    assert encode_line(message) == message.encode() + b"\n"


@pytest.mark.parametrize(
    "text",
    [
        "hello", "", " ", " padded ", "\n", "\r", "line one\nline two\r\n", "ends in cr\r",
        '"', '"quoted"', '{"json": "quotes \\" and \\\\"}', "ünïcödé ✓ 日本 🙂",
        "\u2028 and \u2029", "lone surrogate \ud800", "null", "[1, 2]", "tab\there",
    ],
)
def test_any_text_round_trips_on_one_line(text):
    line = encode_line(text)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert decode_line(line[:-1]) == text


def test_text_that_cannot_travel_bare_goes_as_a_json_string():
    assert encode_line("a\nb") == b'"a\\nb"\n'
    assert encode_line("") == b'""\n'
    assert encode_line('"hi"') == b'"\\"hi\\""\n'


def test_reading_tolerates_crlf_and_skips_empty_lines():
    assert decode_line(b'{"type":"x"}\r') == '{"type":"x"}'
    assert decode_line(b"") is None
    assert decode_line(b"\r") is None


def test_lines_that_are_not_what_they_seem_are_delivered_as_is():
    assert decode_line(b'"unterminated') == '"unterminated'
    assert decode_line(b'"a" "b"') == '"a" "b"'
    assert decode_line(b"not \xff utf-8") == "not \ufffd utf-8"


def test_splitter_joins_chunks_and_splits_lines():
    splitter = LineSplitter(100)
    for chunk in [b"one\ntw", b"o", b"\nthree\nfou"]:
        splitter.feed(chunk)
    assert [splitter.next_line() for _ in range(4)] == [b"one", b"two", b"three", None]
    assert splitter.unterminated() == b"fou"


def test_splitter_accepts_a_line_at_the_limit_and_refuses_one_over():
    splitter = LineSplitter(5)
    splitter.feed(b"12345\n123456\nok\n")
    assert splitter.next_line() == b"12345"
    assert splitter.next_line() == LineTooLong(5, 6)
    assert splitter.next_line() == b"ok"


def test_splitter_drops_a_long_line_as_it_arrives_and_goes_on():
    splitter = LineSplitter(1000)
    results = []
    for _ in range(100):  # 6.4 MB of one line, never held whole
        splitter.feed(b"x" * 65536)
        while (item := splitter.next_line()) is not None:
            results.append(item)
        assert len(splitter._buffer) <= 65536
    splitter.feed(b"xxx\nafter\n")
    while (item := splitter.next_line()) is not None:
        results.append(item)
    assert results == [LineTooLong(1000), b"after"]
    assert "over the limit of 1000 bytes" in results[0].describe()


def test_commands_split_like_a_shell_without_one():
    assert parse_command("stdio:ssh box 'gemini-split serve --stdio'") == [
        "ssh", "box", "gemini-split serve --stdio",
    ]
    assert parse_command('stdio:echo "$HOME" a\\ b') == ["echo", "$HOME", "a b"]


@pytest.mark.parametrize("address", ["stdio:", "stdio:-", "stdio:   ", "stdio:echo 'unbalanced"])
def test_an_address_without_a_usable_command_is_refused(address):
    with pytest.raises(ConnectFailed):
        parse_command(address)


async def test_the_line_writer_finishes_a_cancelled_line_and_drops_one_never_begun():
    import trio

    from gemini_split.transport.framing import LineWriter

    wire = bytearray()
    room = [0]  # bytes the "kernel" takes before it blocks

    def write(data):
        if not room[0]:
            raise BlockingIOError
        taken = min(room[0], len(data))
        room[0] -= taken
        wire.extend(data[:taken])
        return taken

    writer = LineWriter(write, trio.sleep_forever)
    room[0] = 3
    with trio.move_on_after(0.01):
        await writer.write_line(b"first line\n")  # 3 bytes out, then cancelled
    with trio.move_on_after(0.01):
        room[0] = 0
        await writer.write_line(b"never\n")  # cancelled while the first line still waits: never begun
    room[0] = 1000
    await writer.write_line(b"second\n")
    assert bytes(wire) == b"first line\nsecond\n"
