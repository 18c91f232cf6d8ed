"""Tokens: the right one works, a wrong or missing one is refused before any
handler runs, ``?auth=`` works, and no token ever reaches a log."""

from __future__ import annotations

import logging

import pytest
import trio

from gemini_split.transport import AuthenticationFailed, ConnectOptions, get_transport
from gemini_split_websocket.admission import presented_token

from .helpers import DEADLINE, Recorder, authenticate, start


async def _connect(address: str, token: str | None = None):
    return await get_transport(address).open_connection(address, ConnectOptions(token=token))


async def test_right_token_connects_and_sets_the_principal():
    recorder = Recorder()
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            address = await start(nursery, recorder, authenticate=authenticate)
            stream = await _connect(address, "bob-token")
            await stream.send("whoami")
            assert await stream.receive() == "bob"
            assert recorder.principals[0].user_id == "bob"
            assert recorder.principals[0].permissions == ("read",)
            await stream.aclose()
            nursery.cancel_scope.cancel()


@pytest.mark.parametrize("token", ["wrong-token", None, ""])
async def test_wrong_or_missing_token_is_refused_before_the_handler_runs(token):
    recorder = Recorder()
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            address = await start(nursery, recorder, authenticate=authenticate)
            with pytest.raises(AuthenticationFailed) as info:
                await _connect(address, token)
            message = str(info.value)
            assert "HTTP 401" in message
            assert "GEMINI_SERVER_TOKEN" in message  # says what to do
            if token:
                assert "refused the token" in message
                assert token not in message
            else:
                assert "requires a token" in message
            await trio.sleep(0.05)
            assert recorder.started == 0
            nursery.cancel_scope.cancel()


async def test_token_in_the_query_works_for_clients_without_headers():
    recorder = Recorder()
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            address = await start(nursery, recorder, authenticate=authenticate)
            stream = await _connect(address + "/?auth=alice-token")
            await stream.send("whoami")
            assert await stream.receive() == "alice"
            assert "alice-token" not in stream.peer
            await stream.aclose()
            with pytest.raises(AuthenticationFailed, match="refused the token"):
                await _connect(address + "/?auth=nope")
            nursery.cancel_scope.cancel()


async def test_no_token_ever_reaches_a_log(caplog):
    caplog.set_level(logging.DEBUG)
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            address = await start(nursery, Recorder(), authenticate=authenticate)
            for target, token in [
                ("/ws?auth=alice-token", None),
                ("/ws?auth=secret-wrong-query", None),
                ("/ws", "bob-token"),
                ("/ws", "secret-wrong-header"),
            ]:
                try:
                    stream = await _connect(address + target, token)
                except AuthenticationFailed as exc:
                    assert "secret-wrong" not in str(exc)
                else:
                    await stream.send("x")
                    await stream.receive()
                    await stream.aclose()
            nursery.cancel_scope.cancel()
    logged = caplog.text
    for secret in ["alice-token", "bob-token", "secret-wrong-query", "secret-wrong-header"]:
        assert secret not in logged
    assert "refused a WebSocket" in logged and " on /ws" in logged


async def test_server_without_auth_sets_no_principal():
    recorder = Recorder()
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            address = await start(nursery, recorder)
            stream = await _connect(address, "ignored-token")
            await stream.send("whoami")
            assert await stream.receive() == "-"
            await stream.aclose()
            nursery.cancel_scope.cancel()


def test_token_comes_from_the_bearer_header_then_the_query():
    assert presented_token("Bearer abc", "/") == "abc"
    assert presented_token("bearer   abc ", "/?auth=q") == "abc"
    assert presented_token("Basic abc", "/?auth=q") == "q"
    assert presented_token(None, "/path?x=1&auth=q%2Fr") == "q/r"
    assert presented_token(None, "/path?auth=") is None
    assert presented_token("Bearer ", "/") is None
