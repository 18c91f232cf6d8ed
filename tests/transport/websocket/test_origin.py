"""Origin: browsers from elsewhere are refused unless allowed."""

from __future__ import annotations

import pytest
import trio

from gemini_split.transport import AuthenticationFailed, ConnectOptions, get_transport
from gemini_split_websocket.admission import origin_refusal

from .helpers import DEADLINE, Recorder, start


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
            local = await _connect(address, "http://localhost:5173")
            await local.send("from a local page")
            assert await local.receive() == "from a local page"
            await local.aclose()
            assert recorder.started == 1
            nursery.cancel_scope.cancel()


async def test_an_allowlist_replaces_the_loopback_rule():
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
    ("origin", "allowed", "refused"),
    [
        (None, (), False),  # not a browser
        ("http://localhost:3000", (), False),
        ("http://127.0.0.1", (), False),
        ("http://127.1.2.3:8000", (), False),
        ("http://[::1]:8080", (), False),
        ("null", (), True),
        ("https://evil.example", (), True),
        ("http://localhost.evil.example", (), True),
        ("https://evil.example", ("*",), False),
        ("https://a.example", ("https://a.example/",), False),
        ("https://a.example:8443", ("https://a.example",), True),
    ],
)
def test_origin_rule(origin, allowed, refused):
    assert (origin_refusal(origin, allowed) is not None) is refused
