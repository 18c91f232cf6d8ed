"""Plain HTTP on the WebSocket port: /health for monitors, nothing else."""

from __future__ import annotations

import logging
import ssl

import httpx
import pytest
import trio

from .helpers import DEADLINE, authenticate, port_of, start, tls_files

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


UPGRADE = (
    b"Host: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
)


async def _answer(port: int, request: bytes, *, chunk: int | None = None) -> bytes:
    """Send ``request`` (in one write, or in ``chunk``-byte writes) and
    return the status line of the answer."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    try:
        if chunk is None:
            await stream.send_all(request)
        else:
            for start in range(0, len(request), chunk):
                try:
                    await stream.send_all(request[start : start + chunk])
                except trio.BrokenResourceError:
                    break  # answered and closed before we finished: fine
        answer = b""
        while b"\r\n" not in answer:
            data = await stream.receive_some(4096)
            if not data:
                break
            answer += data
        return answer.partition(b"\r\n")[0]
    finally:
        await stream.aclose()


@pytest.mark.parametrize("chunk", [None, 1000], ids=["one-read", "many-reads"])
async def test_oversized_request_heads_get_414_or_431_even_with_a_valid_token(chunk):
    """The documented 16 KiB head limit holds however the bytes arrive, and
    comes before auth: a 63 KB head once got 101, a 17 KB line 401."""
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            port = port_of(await start(nursery, authenticate=authenticate))
            long_line = b"GET /?pad=" + b"a" * 17_000 + b" HTTP/1.1\r\n" + UPGRADE + b"\r\n"
            assert await _answer(port, long_line, chunk=chunk) == b"HTTP/1.1 414 Request-URI Too Long"
            big_headers = (
                b"GET / HTTP/1.1\r\n" + UPGRADE + b"Authorization: Bearer alice-token\r\n"
                + b"".join(b"X-Pad-%d: %s\r\n" % (i, b"b" * 1000) for i in range(60)) + b"\r\n"
            )
            assert await _answer(port, big_headers, chunk=chunk) == b"HTTP/1.1 431 Request Header Fields Too Large"
            # Just under the limit is still a WebSocket.
            fits = b"GET / HTTP/1.1\r\n" + UPGRADE + b"Authorization: Bearer alice-token\r\nX-Pad: " + b"c" * 15_000 + b"\r\n\r\n"
            assert await _answer(port, fits, chunk=chunk) == b"HTTP/1.1 101 Switching Protocols"
            nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GET / HTTP/1.1\r\n" + UPGRADE + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"GET /health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n",
        b"\x00\xff\xfe binary garbage with no line end",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",  # a TLS ClientHello on the plain port
        b"G\xc3\xa9T / HTTP/1.1\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\nbad header line\r\n\r\n",
    ],
    ids=["cl-and-te-upgrade", "te-and-cl-health", "binary", "tls-hello", "non-token-method", "bad-header"],
)
async def test_malformed_requests_get_400_at_once(request_bytes):
    with trio.fail_after(2):  # well under the 10 s handshake timeout: no waiting for more
        async with trio.open_nursery() as nursery:
            port = port_of(await start(nursery, authenticate=authenticate))
            assert await _answer(port, request_bytes) == b"HTTP/1.1 400 Bad Request"
            nursery.cancel_scope.cancel()
