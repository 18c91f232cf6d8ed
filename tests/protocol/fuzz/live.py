"""A live server for the fuzz tests: the real AgentService on the real
WebSocket transport, on loopback, running in its own thread (its own Trio
run) for a whole test module, so each generated example costs a connection,
not a server start. Plus a blocking raw-socket client and a log recorder."""

from __future__ import annotations

import base64
import json
import logging
import os
import socket
import struct
import threading
from contextlib import contextmanager
from dataclasses import dataclass

import trio

from gemini_split.protocol import ErrorCode, Hello, encode
from gemini_split.stamping import stamp
from gemini_split.server.config import ServerConfig
from gemini_split.server.model.scripted import ScriptedModel
from gemini_split.server.service import AgentService
from gemini_split.transport import ServeOptions, get_transport

from tests.transport.websocket.rawframes import CLOSE, TEXT, close_payload, frame

#: The live server's message limit.
LIMIT = 64 * 1024
#: Seconds any read may wait: a server that says nothing for this long hangs.
READ_TIMEOUT = 5.0

CODES = {code.value for code in ErrorCode}


def is_valid_close_code(code: int) -> bool:
    """A close code a server may send (RFC 6455 §7.4): 1005 stands for an
    empty close frame, which answers an empty one."""
    return code in {1000, 1001, 1002, 1003, 1005, 1007, 1008, 1009, 1010, 1011} or 3000 <= code <= 4999


class LogRecorder(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def tracebacks(self) -> list[str]:
        return [
            f"{r.name}: {r.getMessage()}" for r in self.records
            if r.exc_info or "Traceback" in r.getMessage()
        ]


class LiveServer:
    def __init__(self) -> None:
        self.port = 0
        self.log = LogRecorder()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=trio.run, args=(self._main,), daemon=True, name="fuzz-server")
        self._token: trio.lowlevel.TrioToken | None = None
        self._scope: trio.CancelScope | None = None

    async def _main(self) -> None:
        service = AgentService(ScriptedModel([]), ServerConfig(model="scripted", max_message_size=LIMIT, hello_timeout=5))
        options = ServeOptions(
            max_message_size=LIMIT, health=service.health,
            extra={"handshake_timeout": READ_TIMEOUT, "close_timeout": 0.5},
        )
        with trio.CancelScope() as self._scope:
            self._token = trio.lowlevel.current_trio_token()
            async with trio.open_nursery() as nursery:
                await nursery.start(service.run)  # sessions live in the service, not in a connection
                address = await nursery.start(
                    get_transport("ws:").serve, "ws://127.0.0.1:0", service.handle_connection, options
                )
                self.port = int(address.rsplit(":", 1)[1])
                self._ready.set()

    @contextmanager
    def running(self):
        root = logging.getLogger()
        old_level = root.level
        root.addHandler(self.log)
        root.setLevel(logging.DEBUG)
        self._thread.start()
        try:
            assert self._ready.wait(10), "the fuzz server did not start"
            yield self
        finally:
            trio.from_thread.run_sync(self._scope.cancel, trio_token=self._token)
            self._thread.join(10)
            root.removeHandler(self.log)
            root.setLevel(old_level)


@dataclass
class Frame:
    fin: bool
    opcode: int
    payload: bytes


class Client:
    """A blocking WebSocket client that sends whatever it is given."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=READ_TIMEOUT)
        self.buffer = b""
        key = base64.b64encode(os.urandom(16))
        self.sock.sendall(
            b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: " + key + b"\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        while b"\r\n\r\n" not in self.buffer:
            self._more()
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 101 "), head

    def _more(self) -> bool:
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            data = b""
        except socket.timeout:
            raise AssertionError(f"the server said nothing for {READ_TIMEOUT}s: it hangs") from None
        self.buffer += data
        return bool(data)

    def send(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server already refused and closed: what it said is read next

    def finish(self) -> None:
        """No more from us: the server must end the connection now."""
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def next_frame(self) -> Frame | None:
        """The server's next frame; None once it closed the connection."""
        while len(self.buffer) < 2:
            if not self._more():
                return None
        b0, b1 = self.buffer[0], self.buffer[1]
        n, offset = b1 & 0x7F, 2
        if n == 126:
            offset = 4
        elif n == 127:
            offset = 10
        while len(self.buffer) < offset:
            if not self._more():
                return None
        if n == 126:
            n = struct.unpack("!H", self.buffer[2:4])[0]
        elif n == 127:
            n = struct.unpack("!Q", self.buffer[2:10])[0]
        while len(self.buffer) < offset + n:
            if not self._more():
                return None
        got = Frame(bool(b0 & 0x80), b0 & 0x0F, self.buffer[offset : offset + n])
        self.buffer = self.buffer[offset + n :]
        return got

    def frames(self) -> list[Frame]:
        """Every frame the server sends until it closes the connection."""
        out = []
        while (got := self.next_frame()) is not None:
            out.append(got)
        return out

    def close(self) -> None:
        self.sock.close()


def check_answers(frames: list[Frame]) -> None:
    """What a server may say to anything: JSON messages, errors with stable
    codes, close frames with codes RFC 6455 allows."""
    for got in frames:
        assert not got.opcode & 0x08 or got.opcode in (0x8, 0x9, 0xA), got
        if got.opcode == CLOSE:
            code = struct.unpack("!H", got.payload[:2])[0] if len(got.payload) >= 2 else 1005
            assert is_valid_close_code(code), code
            got.payload[2:].decode("utf-8")  # a close reason is UTF-8
        elif got.opcode == TEXT:
            message = json.loads(got.payload)
            assert isinstance(message, dict) and isinstance(message.get("type"), str), message
            if message["type"] == "error":
                assert message["code"] in CODES, message


def check_still_serving(port: int) -> None:
    """A new client gets through the handshake and a hello."""
    client = Client(port)
    try:
        client.send(frame(TEXT, encode(stamp(Hello(client="fuzz-check"))).encode()))
        connected = client.next_frame()
        assert connected is not None and connected.opcode == TEXT, "the server closed on a good client"
        assert json.loads(connected.payload)["type"] == "connected", connected
        client.send(frame(CLOSE, close_payload(1000)))
        client.finish()
        assert client.frames()[-1].opcode == CLOSE
    finally:
        client.close()
