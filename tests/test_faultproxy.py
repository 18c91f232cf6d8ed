"""The fault-injecting proxy the resume tests rely on does what it says."""

from __future__ import annotations

import trio

from tests.faultproxy import FaultProxy


async def _serve_bytes(nursery, payload: bytes) -> int:
    async def handler(stream):
        await stream.receive_some(100)
        await stream.send_all(payload)
        await trio.sleep_forever()

    listeners = await nursery.start(trio.serve_tcp, handler, 0)
    return listeners[0].socket.getsockname()[1]


async def _read_all(port: int) -> tuple[bytes, str]:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    await stream.send_all(b"go")
    got = b""
    try:
        while True:
            data = await stream.receive_some(4096)
            if not data:
                return got, "eof"
            got += data
    except trio.BrokenResourceError as exc:
        return got, type(exc.__cause__).__name__


async def test_a_cut_forwards_exactly_the_bytes_before_it_then_resets():
    payload = bytes(range(256)) * 400
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            proxy = FaultProxy("127.0.0.1", await _serve_bytes(nursery, payload))
            port = await nursery.start(proxy.serve)
            proxy.cut_at(1001, 50_000)
            got, how = await _read_all(port)
            assert (got, how) == (payload[:1000], "ConnectionResetError")
            got, how = await _read_all(port)
            assert (got, how) == (payload[:50_000 - 1 - 1000], "ConnectionResetError")
            assert proxy.cuts_made == [1000, 49_999]
            nursery.cancel_scope.cancel()


async def test_random_cuts_are_the_same_for_the_same_seed():
    a, b = FaultProxy("127.0.0.1", 1), FaultProxy("127.0.0.1", 1)
    assert a.random_cuts(seed=3, count=20, total_bytes=10_000) == b.random_cuts(seed=3, count=20, total_bytes=10_000)
    assert len(set(a.random_cuts(seed=4, count=20, total_bytes=10_000))) == 20


async def test_cut_resets_an_idle_connection():
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            proxy = FaultProxy("127.0.0.1", await _serve_bytes(nursery, b"hello"))
            port = await nursery.start(proxy.serve)
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            await stream.send_all(b"go")
            assert await stream.receive_some(100) == b"hello"
            await trio.sleep(0.05)
            proxy.cut()
            try:
                assert await stream.receive_some(100) == b""
            except trio.BrokenResourceError:
                pass
            nursery.cancel_scope.cancel()
