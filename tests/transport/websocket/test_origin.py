"""Origin: a browser page may connect only from the server's own origin
(or one ``--allow-origin`` lists); clients that send no Origin (not
browsers) are not affected."""

from __future__ import annotations

import pytest
import trio

from gemini_split.transport import AuthenticationFailed, ConnectOptions, get_transport
from gemini_split_websocket.admission import origin_refusal

from .helpers import DEADLINE, Recorder, port_of, start


async def _connect(address: str, origin: str):
    options = ConnectOptions(extra={"headers": {"Origin": origin}})
    return await get_transport(address).open_connection(address, options)


async def test_a_foreign_origin_is_refused_before_the_handler_runs():
    recorder = Recorder()
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            address = await start(nursery, recorder)
            with pytest.raises(AuthenticationFailed, match=r"HTTP 403: origin 'https://evil.example' is not allowed"):
                await _connect(address, "https://evil.example")
            # Another page on this machine (a dev server) is not this server's.
            with pytest.raises(AuthenticationFailed, match=r"HTTP 403: origin 'http://localhost:5173'"):
                await _connect(address, "http://localhost:5173")
            own = await _connect(address, f"http://127.0.0.1:{port_of(address)}")
            await own.send("from the server's own page")
            assert await own.receive() == "from the server's own page"
            await own.aclose()
            assert recorder.started == 1
            nursery.cancel_scope.cancel()


async def test_an_allowlist_adds_origins_to_the_servers_own():
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            address = await start(nursery, allowed_origins=("https://app.example",))
            stream = await _connect(address, "https://APP.example/")
            await stream.aclose()
            for origin in ["http://app.example", "http://localhost:5173"]:
                with pytest.raises(AuthenticationFailed, match="403"):
                    await _connect(address, origin)
            nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    ("origin", "allowed", "own", "refused"),
    [
        (None, (), "127.0.0.1:8080", False),  # not a browser
        ("http://127.0.0.1:8080", (), "127.0.0.1:8080", False),  # the server's own page
        ("HTTP://LOCALHOST:8080/", (), "localhost:8080", False),
        ("http://[::1]:8080", (), "[::1]:8080", False),
        ("http://localhost", (), "localhost:80", False),  # default port filled in
        ("http://localhost:3000", (), "127.0.0.1:8080", True),  # another local page
        ("http://127.0.0.1:3000", (), "127.0.0.1:8080", True),
        ("http://localhost:8080", (), "127.0.0.1:8080", True),  # another name: another origin
        ("https://127.0.0.1:8080", (), "127.0.0.1:8080", True),  # not TLS here
        ("http://127.0.0.1:8080", (), None, True),  # no Host: no own origin
        ("null", (), "127.0.0.1:8080", True),
        ("https://evil.example", (), "127.0.0.1:8080", True),
        ("http://localhost.evil.example", (), "127.0.0.1:8080", True),
        ("https://evil.example", ("*",), "127.0.0.1:8080", False),
        ("https://a.example", ("https://a.example/",), "127.0.0.1:8080", False),
        ("https://a.example:8443", ("https://a.example",), "127.0.0.1:8080", True),
    ],
)
def test_origin_rule(origin, allowed, own, refused):
    assert (origin_refusal(origin, allowed, own_host=own) is not None) is refused


def test_the_tls_servers_own_origin_is_https():
    assert origin_refusal("https://localhost:8443", (), own_host="localhost:8443", secure=True) is None
    assert origin_refusal("http://localhost:8443", (), own_host="localhost:8443", secure=True) is not None
