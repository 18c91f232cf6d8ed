"""wss://: verified against a CA file; without one, a certificate error that
says what to do."""

from __future__ import annotations

import pytest
import trio

from gemini_split.errors import ConfigurationError
from gemini_split.transport import ConnectFailed, ConnectOptions, get_transport

from .helpers import DEADLINE, start, tls_files


async def _start_wss(nursery) -> str:
    files = tls_files()
    return await start(nursery, address="wss://127.0.0.1:0", tls_cert=files["cert"], tls_key=files["key"])


async def test_wss_with_the_ca_file_works():
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            address = await _start_wss(nursery)
            stream = await get_transport(address).open_connection(
                address, ConnectOptions(ca_file=tls_files()["ca"])
            )
            await stream.send("over tls")
            assert await stream.receive() == "over tls"
            await stream.aclose()
            nursery.cancel_scope.cancel()


async def test_wss_without_the_ca_fails_with_a_certificate_error():
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            address = await _start_wss(nursery)
            with pytest.raises(ConnectFailed) as info:
                await get_transport(address).open_connection(address, ConnectOptions())
            message = str(info.value)
            assert "certificate verify failed" in message
            assert "--ca FILE" in message
            # The server shrugs off the failed handshake and serves the next client.
            stream = await get_transport(address).open_connection(
                address, ConnectOptions(ca_file=tls_files()["ca"])
            )
            await stream.send("still serving")
            assert await stream.receive() == "still serving"
            await stream.aclose()
            nursery.cancel_scope.cancel()


async def test_insecure_skips_verification():
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            address = await _start_wss(nursery)
            stream = await get_transport(address).open_connection(address, ConnectOptions(insecure=True))
            await stream.send("unverified")
            assert await stream.receive() == "unverified"
            await stream.aclose()
            nursery.cancel_scope.cancel()


async def test_mixing_up_ws_and_wss_gives_a_hint():
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            secure = await _start_wss(nursery)
            plain = await start(nursery)
            with pytest.raises(ConnectFailed, match="wss://"):
                await get_transport(plain).open_connection(secure.replace("wss://", "ws://"), ConnectOptions())
            with pytest.raises(ConnectFailed, match="TLS handshake"):
                await get_transport(plain).open_connection(
                    plain.replace("ws://", "wss://"), ConnectOptions(ca_file=tls_files()["ca"])
                )
            nursery.cancel_scope.cancel()


async def test_serving_wss_without_a_certificate_is_a_configuration_error(tmp_path):
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            with pytest.raises(ConfigurationError, match="--tls-cert"):
                await start(nursery, address="wss://127.0.0.1:0")
            missing = str(tmp_path / "missing.pem")
            with pytest.raises(ConfigurationError, match="missing.pem"):
                await start(nursery, tls_cert=missing, tls_key=missing)
            with pytest.raises(ConnectFailed, match="CA file"):
                await get_transport("wss://x").open_connection(
                    "wss://127.0.0.1:1", ConnectOptions(ca_file=missing)
                )
            nursery.cancel_scope.cancel()
