"""The reconnect schedule: 0.2 s doubling to 10 s, jittered, bounded by the
reconnect timeout."""

from __future__ import annotations

import random

from gemini_split.client.reconnect import Backoff


def test_delays_double_from_a_fifth_of_a_second_to_ten_seconds_with_jitter():
    delays = list(Backoff(rng=random.Random(1)).delays())
    nominal = [min(0.2 * 2 ** i, 10.0) for i in range(len(delays))]
    for delay, top in zip(delays[:-1], nominal):
        assert top / 2 <= delay <= top
    assert max(delays) <= 10.0


def test_the_attempts_stop_at_the_timeout():
    delays = list(Backoff(timeout=120.0, rng=random.Random(2)).delays())
    assert abs(sum(delays) - 120.0) < 1e-9
    assert 15 <= len(delays) <= 30


def test_two_clients_do_not_retry_in_step():
    a = list(Backoff(rng=random.Random(3)).delays())[:5]
    b = list(Backoff(rng=random.Random(4)).delays())[:5]
    assert a != b
