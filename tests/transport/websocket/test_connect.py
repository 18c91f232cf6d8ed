"""A client that cannot connect says so quickly and clearly."""

from __future__ import annotations

import socket
import time
from functools import partial

import pytest
import trio

from gemini_split.transport import ConnectFailed, ConnectOptions, get_transport

from .helpers import DEADLINE


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def _connect(address: str, **options):
    return await get_transport(address).open_connection(address, ConnectOptions(**options))


async def test_a_closed_port_fails_fast():
    address = f"ws://127.0.0.1:{_free_port()}"
    started = time.monotonic()
    with trio.fail_after(DEADLINE):
        with pytest.raises(ConnectFailed, match="connection refused.*gemini-split serve"):
            await _connect(address)
    assert time.monotonic() - started < 1


async def test_a_server_that_never_answers_times_out():
    async def silent(stream):
        await trio.sleep_forever()

    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(partial(trio.serve_tcp, silent, 0, host="127.0.0.1"))
            port = listeners[0].socket.getsockname()[1]
            started = time.monotonic()
            with pytest.raises(ConnectFailed, match=r"timed out after 0.3s"):
                await _connect(f"ws://127.0.0.1:{port}", connect_timeout=0.3)
            assert time.monotonic() - started < 2
            nursery.cancel_scope.cancel()


async def test_an_unknown_host_fails_clearly():
    with trio.fail_after(DEADLINE):
        with pytest.raises(ConnectFailed, match="nonexistent.invalid|timed out"):
            await _connect("ws://nonexistent.invalid:8080", connect_timeout=3)


async def test_a_server_that_is_not_websocket_is_named():
    async def http_server(stream):
        await stream.receive_some(4096)
        await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
        await stream.aclose()

    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(partial(trio.serve_tcp, http_server, 0, host="127.0.0.1"))
            port = listeners[0].socket.getsockname()[1]
            with pytest.raises(ConnectFailed, match=r"HTTP 200: hello.*gemini-split server"):
                await _connect(f"ws://127.0.0.1:{port}")
            nursery.cancel_scope.cancel()


async def test_an_address_that_is_not_websocket_is_a_configuration_error():
    from gemini_split.errors import ConfigurationError

    websocket = get_transport("ws://")
    with pytest.raises(ConfigurationError, match="not a WebSocket address") as info:
        await websocket.open_connection("http://127.0.0.1:1?auth=secret", ConnectOptions())
    assert "secret" not in str(info.value)
    with pytest.raises(ConfigurationError, match="invalid port") as info:
        await websocket.open_connection("ws://127.0.0.1:99999?auth=secret", ConnectOptions())
    assert "secret" not in str(info.value)
