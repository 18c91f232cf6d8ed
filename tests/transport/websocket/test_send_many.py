"""The server's frame writer (fan-out to many watchers, issue 11): frames
built without wsproto's per-frame copies, several messages in one write, and
the write that skips Trio's scheduler round trip when the kernel takes it all
— each checked against wsproto's own bytes and a real ``websockets`` client."""

from __future__ import annotations

import pytest
import trio
from websockets.sync.client import connect
from wsproto.connection import Connection, ConnectionType
from wsproto.events import TextMessage

from gemini_split_websocket.connection import text_frame
from gemini_split_websocket.wire import FrameSafeStream

from .helpers import DEADLINE, start

pytestmark = pytest.mark.timeout(30)

SIZES = [0, 1, 125, 126, 127, 65535, 65536, 200_000]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("char", ["a", "é", "💡"])
def test_a_text_frame_is_the_bytes_wsproto_writes(size, char):
    text = char * (size // len(char.encode()))
    wsproto_server = Connection(ConnectionType.SERVER)
    assert text_frame(text) == bytes(wsproto_server.send(TextMessage(data=text)))


async def test_send_many_reaches_a_websockets_client_as_separate_messages_in_order():
    messages = ["", "one", "é" * 126, "x" * 65536, '{"type":"text_delta","content":"💡"}', "y" * 200_000]
    sent = trio.Event()

    async def handler(stream):
        await stream.send_many(messages)
        await stream.send_many([])  # nothing: no frame
        await stream.send("last")
        sent.set()
        await stream.receive()  # until the client goes

    def client(url: str) -> list[str]:
        with connect(url, max_size=None, open_timeout=DEADLINE) as ws:
            return [ws.recv(timeout=DEADLINE) for _ in range(len(messages) + 1)]

    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            url = await start(nursery, handler, max_message_size=1 << 20)
            received = await trio.to_thread.run_sync(client, url)
            nursery.cancel_scope.cancel()
    assert received == [*messages, "last"]


async def test_a_write_the_kernel_takes_in_part_is_finished_whole_and_in_order():
    # A tiny send buffer and a reader that starts late: the first write
    # goes in part without waiting, the rest through the waiting path.
    left, right = await _socket_pair()
    wire = FrameSafeStream(left, stall_timeout=DEADLINE, grace=1)
    data = bytes(range(256)) * 4096  # 1 MiB
    received = bytearray()

    async def read():
        await trio.sleep(0.05)
        while len(received) < 2 * len(data):
            received.extend(await right.receive_some(65536))

    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            await wire.send_all(data)
            await wire.send_all(data[::-1])
    assert bytes(received) == data + data[::-1]
    await left.aclose()
    await right.aclose()


async def _socket_pair():
    import socket

    a, b = trio.socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    return trio.SocketStream(a), trio.SocketStream(b)


async def test_a_closed_socket_is_never_written_by_the_quick_path():
    left, right = await _socket_pair()
    wire = FrameSafeStream(left, stall_timeout=DEADLINE, grace=1)
    await left.aclose()
    with pytest.raises(trio.ClosedResourceError):
        await wire.send_all(b"after close")
    await right.aclose()
