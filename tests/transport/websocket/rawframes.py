"""WebSocket frames by hand, for sending what no library would.

:func:`frame` builds any frame, valid or not (unmasked, RSV bits, reserved
opcodes, a length that lies); :class:`RawWebSocket` does the opening
handshake over a plain TCP socket, sends bytes, and reads the server's
frames, so a test can check the exact close code the server answers with.
"""

from __future__ import annotations

import base64
import os
import struct
from dataclasses import dataclass

import trio

TEXT, BINARY, CONTINUATION, CLOSE, PING, PONG = 0x1, 0x2, 0x0, 0x8, 0x9, 0xA


def frame(
    opcode: int,
    payload: bytes = b"",
    *,
    fin: bool = True,
    rsv: int = 0,
    mask: bool = True,
    length: int | None = None,
) -> bytes:
    """One frame. ``rsv`` is the three RSV bits as a number (0-7); ``length``
    announces a payload length other than the real one."""
    n = len(payload) if length is None else length
    head = bytes([(0x80 if fin else 0) | (rsv << 4) | opcode])
    bit = 0x80 if mask else 0
    if n < 126:
        head += bytes([bit | n])
    elif n < 1 << 16:
        head += bytes([bit | 126]) + struct.pack("!H", n)
    else:
        head += bytes([bit | 127]) + struct.pack("!Q", n)
    if not mask:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def close_payload(code: int, reason: bytes = b"") -> bytes:
    return struct.pack("!H", code) + reason


@dataclass
class Frame:
    fin: bool
    opcode: int
    payload: bytes

    @property
    def close_code(self) -> int | None:
        if self.opcode != CLOSE:
            return None
        return struct.unpack("!H", self.payload[:2])[0] if len(self.payload) >= 2 else 1005


class RawWebSocket:
    """A client that speaks raw bytes after a real opening handshake."""

    def __init__(self, stream: trio.SocketStream):
        self.stream = stream
        self._buffer = bytearray()
        self.answer_head = b""

    @classmethod
    async def connect(cls, port: int, *, local_host: str | None = None, extra_headers: bytes = b"") -> RawWebSocket:
        stream = await trio.open_tcp_stream("127.0.0.1", port, local_address=local_host)
        raw = cls(stream)
        status = await raw.handshake(extra_headers)
        assert status == 101, status
        return raw

    async def handshake(self, extra_headers: bytes = b"") -> int:
        """Send an upgrade request; the status the server answers with."""
        key = base64.b64encode(os.urandom(16))
        await self.stream.send_all(
            b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: " + key + b"\r\nSec-WebSocket-Version: 13\r\n" + extra_headers + b"\r\n"
        )
        head = await self.read_http_head()
        self.answer_head = head
        return int(head.split(b" ", 2)[1])

    def answer_header(self, name: bytes) -> bytes | None:
        """A header of the server's answer to :meth:`handshake`."""
        for line in self.answer_head.split(b"\r\n")[1:]:
            key, _, value = line.partition(b":")
            if key.strip().lower() == name.lower():
                return value.strip()
        return None

    async def read_http_head(self) -> bytes:
        while b"\r\n\r\n" not in self._buffer:
            data = await self.stream.receive_some(65536)
            if not data:
                raise EOFError(f"closed during the handshake: {bytes(self._buffer)!r}")
            self._buffer += data
        head, _, rest = bytes(self._buffer).partition(b"\r\n\r\n")
        self._buffer = bytearray(rest)
        return head

    async def send(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def send_text(self, text: str) -> None:
        await self.send(frame(TEXT, text.encode()))

    async def _fill(self, size: int) -> bool:
        while len(self._buffer) < size:
            try:
                data = await self.stream.receive_some(65536)
            except trio.BrokenResourceError:
                data = b""
            if not data:
                return False
            self._buffer += data
        return True

    async def read_frame(self) -> Frame | None:
        """The server's next frame, or None once it closed the TCP connection."""
        if not await self._fill(2):
            return None
        b0, b1 = self._buffer[0], self._buffer[1]
        assert not b1 & 0x80, "a server must not mask its frames"
        n, offset = b1 & 0x7F, 2
        if n == 126:
            await self._fill(4)
            n, offset = struct.unpack("!H", self._buffer[2:4])[0], 4
        elif n == 127:
            await self._fill(10)
            n, offset = struct.unpack("!Q", self._buffer[2:10])[0], 10
        if not await self._fill(offset + n):
            return None
        payload = bytes(self._buffer[offset : offset + n])
        del self._buffer[: offset + n]
        return Frame(bool(b0 & 0x80), b0 & 0x0F, payload)

    async def read_message(self) -> tuple[int, bytes]:
        """The next data message (opcode, payload), skipping nothing: a
        control frame here is an assertion error."""
        first = await self.read_frame()
        assert first is not None and first.opcode in (TEXT, BINARY), first
        payload = first.payload
        while not first.fin:
            more = await self.read_frame()
            assert more is not None and more.opcode == CONTINUATION, more
            payload += more.payload
            first = more
        return first.opcode, payload

    async def expect_close(self, code: int) -> Frame:
        """Read until the server's close frame, which must carry ``code``,
        then until it closes the TCP connection."""
        while True:
            got = await self.read_frame()
            assert got is not None, f"the server dropped the connection without a close frame (expected {code})"
            if got.opcode == CLOSE:
                break
        assert got.close_code == code, (got.close_code, got.payload)
        assert await self.read_frame() is None  # and then the TCP close
        return got

    async def aclose(self) -> None:
        await self.stream.aclose()
