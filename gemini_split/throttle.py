"""Slowing down token guessing, for every listener that checks tokens
(the WebSocket and gRPC transports): :class:`FailedAuthThrottle`, a
sans-I/O token bucket of failed tokens per client address."""

from __future__ import annotations

import collections
import ipaddress
import math


class FailedAuthThrottle:
    """Slows down token guessing, per client address: a token bucket of
    failures.

    Each address may fail ``burst`` times at once; after that, one more try
    is allowed every ``1 / refill_per_second`` seconds. While an address has
    no try left, its upgrades are refused with 429 and ``Retry-After``
    *before* any token is looked at, so guessing runs at the refill rate
    (defaults: 10 at once, then one every 6 s: 10,000 guesses take about 17
    hours). Only failures count: a correct token never spends a try, and
    other addresses are never slowed. IPv6 addresses count per /64 (what one
    host can easily hold). At most ``max_addresses`` are remembered (the
    least recently failing forgotten first), so the table stays bounded.

    Sans-I/O: every method takes ``now`` (seconds, any monotonic clock).
    """

    def __init__(
        self,
        burst: int = 10,
        refill_per_second: float = 1 / 6,
        max_addresses: int = 10_000,
    ):
        self.burst = burst
        self.refill_per_second = refill_per_second
        self.max_addresses = max_addresses
        #: address key -> (tries left, when that was computed)
        self._buckets: collections.OrderedDict[str, tuple[float, float]] = collections.OrderedDict()

    def retry_after(self, address: str, now: float) -> int:
        """Whole seconds before ``address`` may try a token again (0: now)."""
        tries = self._tries(_address_key(address), now)
        if tries >= 1:
            return 0
        return max(1, math.ceil((1 - tries) / self.refill_per_second))

    def failed(self, address: str, now: float) -> None:
        """Count one failed token from ``address``."""
        key = _address_key(address)
        tries = self._tries(key, now)
        self._buckets[key] = (max(tries - 1, 0.0), now)
        self._buckets.move_to_end(key)
        while len(self._buckets) > self.max_addresses:
            self._buckets.popitem(last=False)

    def _tries(self, key: str, now: float) -> float:
        entry = self._buckets.get(key)
        if entry is None:
            return float(self.burst)
        tries, then = entry
        tries = min(float(self.burst), tries + (now - then) * self.refill_per_second)
        if tries >= self.burst:
            del self._buckets[key]  # back to a clean slate: forget it
        return tries


def _address_key(address: str) -> str:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)
