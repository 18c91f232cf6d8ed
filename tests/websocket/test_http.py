"""Plain HTTP on the WebSocket port: /health for monitors, nothing else."""

from __future__ import annotations

import logging
import ssl

import httpx
import trio

from .helpers import DEADLINE, authenticate, start, tls_files

HEALTH = {"status": "ok", "version": "0.1.0", "protocol_version": "1.0", "sessions": 3}
EXPECTED_HEADERS = {"content-type", "content-length", "cache-control", "connection"}


async def test_health_answers_json_without_auth_and_reveals_nothing_else():
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            address = await start(nursery, authenticate=authenticate, health=lambda: dict(HEALTH))
            url = address.replace("ws://", "http://") + "/health"
            async with httpx.AsyncClient() as client:
                response = await client.get(url)
            assert response.status_code == 200
            assert response.headers["content-type"] == "application/json"
            assert response.json() == HEALTH
            assert set(response.headers) == EXPECTED_HEADERS  # no Server, no versions
            nursery.cancel_scope.cancel()


async def test_health_over_tls():
    files = tls_files()
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            address = await start(
                nursery, address="wss://127.0.0.1:0",
                tls_cert=files["cert"], tls_key=files["key"], health=lambda: dict(HEALTH),
            )
            assert address.startswith("wss://")
            context = ssl.create_default_context(cafile=files["ca"])
            async with httpx.AsyncClient(verify=context) as client:
                response = await client.get(address.replace("wss://", "https://") + "/health")
            assert response.json() == HEALTH
            nursery.cancel_scope.cancel()


async def test_other_plain_requests_are_refused():
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            address = await start(nursery, health=lambda: dict(HEALTH))
            base = address.replace("ws://", "http://")
            async with httpx.AsyncClient() as client:
                page = await client.get(base + "/")
                assert page.status_code == 426
                assert page.headers["upgrade"] == "websocket"
                assert "sessions" not in page.text
                assert (await client.post(base + "/health", content=b"{}")).status_code == 405
                assert (await client.head(base + "/health")).status_code == 200
                # An upgrade that is not a WebSocket handshake.
                broken = await client.get(base + "/", headers={"Upgrade": "websocket", "Connection": "Upgrade"})
                assert broken.status_code == 426
                assert broken.headers["sec-websocket-version"] == "13"
            nursery.cancel_scope.cancel()


async def test_a_failing_health_report_is_a_500_and_the_server_goes_on():
    def broken() -> dict:
        raise RuntimeError("boom")

    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            address = await start(nursery, health=broken)
            url = address.replace("ws://", "http://") + "/health"
            async with httpx.AsyncClient() as client:
                response = await client.get(url)
                assert response.status_code == 500
                assert response.json() == {"status": "error"}
                assert (await client.get(url)).status_code == 500
            nursery.cancel_scope.cancel()


async def test_garbage_and_silence_are_closed(caplog):
    caplog.set_level(logging.DEBUG)
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            address = await start(nursery, extra={"handshake_timeout": 0.2})
            host, port = address[len("ws://"):].rsplit(":", 1)
            garbage = await trio.open_tcp_stream(host, int(port))
            await garbage.send_all(b"\x16\x03\x01 not http at all\r\n\r\n")
            answer = await garbage.receive_some(1024)
            assert answer.startswith(b"HTTP/1.1 400 ")
            malformed = await trio.open_tcp_stream(host, int(port))
            await malformed.send_all(b"GET /?auth=secret-token HTTP/1.1 junk\r\n\r\n")
            assert (await malformed.receive_some(1024)).startswith(b"HTTP/1.1 400 ")
            assert "secret-token" not in caplog.text
            silent = await trio.open_tcp_stream(host, int(port))
            with trio.fail_after(2):
                assert await silent.receive_some(1024) == b""  # closed after 0.2 s
            nursery.cancel_scope.cancel()
