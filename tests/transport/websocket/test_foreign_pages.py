"""Pages on other origins and DNS rebinding, against an unauthenticated
loopback server, with raw HTTP: a browser's WebSocket upgrade carries
``Origin``, and a rebinding page's requests carry its own name in ``Host``
(issue 33 §5)."""

from __future__ import annotations

import logging

import pytest
import trio

from .helpers import DEADLINE, port_of, start

KEY = b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"


def _upgrade(host: bytes | None, *, origin: bytes | None = None, target: bytes = b"/", more: bytes = b"") -> bytes:
    return (b"GET " + target + b" HTTP/1.1\r\n" + (b"Host: " + host + b"\r\n" if host is not None else b"")
            + b"Upgrade: websocket\r\nConnection: Upgrade\r\n" + KEY
            + (b"Origin: " + origin + b"\r\n" if origin is not None else b"") + more + b"\r\n")


def _get(host: bytes, path: bytes = b"/health") -> bytes:
    return b"GET " + path + b" HTTP/1.1\r\nHost: " + host + b"\r\n\r\n"


async def _answer(port: int, request: bytes) -> bytes:
    """The head of the server's answer to ``request``."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    try:
        await stream.send_all(request)
        answer = b""
        while b"\r\n\r\n" not in answer:
            data = await stream.receive_some(4096)
            if not data:
                break
            answer += data
        return answer
    finally:
        await stream.aclose()


def _status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


async def test_a_page_on_another_local_origin_cannot_open_a_websocket_and_native_clients_still_can():
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            address = await start(nursery)
            port = port_of(address)
            here = f"127.0.0.1:{port}".encode()
            refused = await _answer(port, _upgrade(here, origin=b"http://localhost:3000"))
            native = await _answer(port, _upgrade(here))  # no Origin: gemini-split, websockets, editors
            own = await _answer(port, _upgrade(here, origin=b"http://" + here))
            nursery.cancel_scope.cancel()
    assert _status(refused) == 403 and b"localhost:3000" in refused
    assert _status(native) == 101 and _status(own) == 101


async def test_a_rebinding_pages_host_is_refused_on_every_request_and_loopback_names_are_served():
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            address = await start(nursery)
            port = port_of(address)
            evil = f"evil.example:{port}".encode()
            foreign = {
                "health": await _answer(port, _get(evil)),
                "upgrade": await _answer(port, _upgrade(evil)),
                "upgrade from its own origin": await _answer(port, _upgrade(evil, origin=b"http://" + evil)),
                "an address that is not loopback": await _answer(port, _get(f"192.168.1.5:{port}".encode())),
            }
            served = {
                name: _status(await _answer(port, _get(name.encode())))
                for name in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", f"LOCALHOST:{port}",
                             "127.0.0.1", "localhost")  # a proxy here may pass Host without the port
            }
            nursery.cancel_scope.cancel()
    for name, answer in foreign.items():
        assert _status(answer) == 421, (name, answer)
    assert b"not to Host" in foreign["health"]
    assert set(served.values()) == {200}, served


async def test_a_name_the_operator_allowed_is_served_behind_a_proxy():
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            address = await start(nursery, allowed_origins=("https://box.example",))
            port = port_of(address)
            named = await _answer(port, _get(b"box.example"))
            proxied = await _answer(port, _upgrade(b"box.example", origin=b"https://box.example"))
            other = await _answer(port, _get(b"other.example"))
            nursery.cancel_scope.cancel()
    assert _status(named) == 200 and _status(proxied) == 101 and _status(other) == 421


async def test_with_auth_a_proxys_public_name_is_served_and_a_rebinding_page_still_has_no_way_in():
    """With tokens a page that reached the server as its own origin has
    none, so Host is not checked: a proxy may pass its public name."""
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            address = await start(nursery, authenticate=lambda token: None)
            port = port_of(address)
            proxied = await _answer(port, _get(b"agent.example.com"))
            rebinding = await _answer(port, _upgrade(f"evil.example:{port}".encode(),
                                                     origin=f"http://evil.example:{port}".encode()))
            nursery.cancel_scope.cancel()
    assert _status(proxied) == 200
    assert _status(rebinding) == 401


async def test_a_server_on_all_interfaces_does_not_check_host():
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            address = await start(nursery, address="ws://0.0.0.0:0")
            answer = await _answer(port_of(address), _get(b"box.lan:8080"))
            nursery.cancel_scope.cancel()
    assert _status(answer) == 200


async def test_refusals_are_logged_without_the_token(caplog):
    caplog.set_level(logging.INFO, logger="gemini_split_websocket")
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            address = await start(nursery)
            port = port_of(address)
            here = f"127.0.0.1:{port}".encode()
            await _answer(port, _upgrade(here, origin=b"http://localhost:3000", target=b"/?auth=sekrit-token-1",
                                         more=b"Authorization: Bearer sekrit-token-2\r\n"))
            await _answer(port, _upgrade(b"evil.example", target=b"/?auth=sekrit-token-3"))
            nursery.cancel_scope.cancel()
    logged = caplog.text
    assert "HTTP 403" in logged and "HTTP 421" in logged
    assert "sekrit" not in logged
