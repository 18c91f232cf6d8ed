"""Token guessing is throttled per address (issue 13 §10): after a burst of
failures an address's wrong tokens get 429 with Retry-After, while other
addresses are never slowed and a correct token is always accepted (issue 35
§5: tests/transport/websocket/test_throttle_proxy.py). Time is Trio's mock clock,
moved by hand."""

from __future__ import annotations

import logging

import pytest
import trio

from gemini_split.transport import AuthenticationFailed, ConnectOptions, get_transport
from gemini_split.transport.throttle import FailedAuthThrottle

from .helpers import Recorder, authenticate, port_of, start
from .rawframes import RawWebSocket


def test_the_bucket_allows_a_burst_then_one_try_per_refill():
    throttle = FailedAuthThrottle(burst=3, refill_per_second=0.5)
    for _ in range(3):
        assert throttle.retry_after("10.0.0.1", 0.0) == 0
        throttle.failed("10.0.0.1", 0.0)
    assert throttle.retry_after("10.0.0.1", 0.0) == 2
    assert throttle.retry_after("10.0.0.2", 0.0) == 0  # another address
    assert throttle.retry_after("10.0.0.1", 1.0) == 1
    assert throttle.retry_after("10.0.0.1", 2.0) == 0  # one try back
    throttle.failed("10.0.0.1", 2.0)
    assert throttle.retry_after("10.0.0.1", 2.0) == 2


def test_ipv6_counts_per_64_and_mapped_ipv4_as_ipv4():
    throttle = FailedAuthThrottle(burst=1)
    throttle.failed("2001:db8:1:2::1", 0.0)
    assert throttle.retry_after("2001:db8:1:2:ffff::9", 0.0) > 0  # same /64
    assert throttle.retry_after("2001:db8:1:3::1", 0.0) == 0
    throttle.failed("::ffff:192.0.2.7", 0.0)
    assert throttle.retry_after("192.0.2.7", 0.0) > 0


def test_the_table_stays_bounded_and_forgets_refilled_addresses():
    throttle = FailedAuthThrottle(burst=1, refill_per_second=1.0, max_addresses=100)
    for i in range(1000):
        throttle.failed(f"10.0.{i // 256}.{i % 256}", 0.0)
    assert len(throttle._buckets) == 100
    assert throttle.retry_after("10.0.3.231", 0.0) > 0  # the most recent is kept
    assert throttle.retry_after("10.0.3.231", 5.0) == 0
    assert "10.0.3.231" not in throttle._buckets  # back to a clean slate


async def _try(port: int, token: str, host: str = "127.0.0.1") -> RawWebSocket:
    stream = await trio.open_tcp_stream("127.0.0.1", port, local_address=host)
    raw = RawWebSocket(stream)
    raw.status = await raw.handshake(b"Authorization: Bearer " + token.encode() + b"\r\n")
    return raw


async def test_guessing_tokens_from_one_address_is_throttled_and_others_are_not(mock_clock, caplog):
    caplog.set_level(logging.INFO)
    recorder = Recorder()
    async with trio.open_nursery() as nursery:
        address = await start(nursery, recorder, authenticate=authenticate)
        port = port_of(address)
        statuses = []
        for i in range(50):
            raw = await _try(port, f"guess-{i}")
            statuses.append(raw.status)
            await raw.aclose()
        assert statuses[:10] == [401] * 10
        assert set(statuses[10:]) == {429}
        raw = await _try(port, "guess-again")
        assert raw.answer_header(b"retry-after") == b"6"
        await raw.aclose()
        # What the real client tells its user.
        with pytest.raises(AuthenticationFailed) as info:
            await get_transport(address).open_connection(address, ConnectOptions(token="guess"))
        assert "HTTP 429" in str(info.value) and "wait 6s" in str(info.value)

        # The right token from another address goes straight in, and that
        # address has its own budget.
        other = await _try(port, "alice-token", host="127.0.0.2")
        assert other.status == 101
        await other.send_text("whoami")
        _, said = await other.read_message()
        assert said == b"alice"
        assert (await _try(port, "wrong", host="127.0.0.2")).status == 401

        # The throttled address gets one try back after Retry-After.
        mock_clock.jump(6)
        assert (await _try(port, "guess-after-waiting")).status == 401
        assert (await _try(port, "guess-too-soon")).status == 429
        mock_clock.jump(6)
        assert (await _try(port, "alice-token")).status == 101
        nursery.cancel_scope.cancel()
    assert "guess-" not in caplog.text and "alice-token" not in caplog.text


@pytest.mark.parametrize("header", [b"", b"Authorization: Basic Zm9vOmJhcg==\r\n"])
async def test_requests_without_a_token_are_refused_but_not_counted(mock_clock, header):
    async with trio.open_nursery() as nursery:
        port = port_of(await start(nursery, authenticate=authenticate))
        for _ in range(20):
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            raw = RawWebSocket(stream)
            assert await raw.handshake(header) == 401
            await raw.aclose()
        assert (await _try(port, "bob-token")).status == 101
        nursery.cancel_scope.cancel()
