"""Slowing down token guessing, for every listener that checks tokens
(the WebSocket and gRPC transports): :class:`FailedAuthThrottle`, a
sans-I/O token bucket of failed tokens per client address, and
:func:`client_source`, the address a request is counted against (behind a
trusted proxy: the client the proxy reports)."""

from __future__ import annotations

import collections
import ipaddress
import math
from collections.abc import Iterable, Sequence


class FailedAuthThrottle:
    """Slows down token guessing, per client address: a token bucket of
    failures.

    Each address may fail ``burst`` times at once; after that, one more
    wrong token is answered every ``1 / refill_per_second`` seconds (defaults:
    10 at once, then one every 6 s). A listener always checks the token
    first: a correct one is accepted whatever the bucket says (so a user who
    shares an address with a guesser, e.g. behind one proxy, is never locked
    out), and never spends a try; a wrong one from an address with no try
    left is refused with 429 and ``Retry-After`` instead of 401. Other
    addresses are never slowed. IPv6 addresses count per /64 (what one host
    can easily hold). At most ``max_addresses`` are remembered (the least
    recently failing forgotten first), so the table stays bounded.

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
        """Whole seconds before a wrong token from ``address`` is answered
        again with 401 (0: now)."""
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


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(entries: Iterable[str], flag: str = "--trusted-proxy") -> tuple[Network, ...]:
    """``CIDR`` or single-address entries as networks. Raises
    :class:`ValueError` naming ``flag`` and the entry."""
    networks = []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry.strip(), strict=False))
        except ValueError:
            raise ValueError(f"{flag} {entry!r}: expected an address or CIDR, e.g. 10.0.0.0/8 or 127.0.0.1") from None
    return tuple(networks)


def client_source(peer: str, *, forwarded_for: str | None = None, real_ip: str | None = None,
                  trusted: Sequence[Network] = ()) -> str:
    """The address a request counts against: ``peer`` (the TCP peer) unless
    it is one of the ``trusted`` proxies, in which case the client that proxy
    reports. ``X-Forwarded-For`` is read from the right (the hop nearest to
    us, which the proxy appended) past every trusted proxy; the first
    untrusted address is the client. Without that header, ``X-Real-IP``.
    An entry that is not an address ends the walk at the last trusted hop,
    so a client that writes its own header cannot choose another client's
    source: only what the trusted proxy appended is believed."""
    if not trusted or not _is_in(peer, trusted):
        return peer
    hops = [h.strip() for h in forwarded_for.split(",")] if forwarded_for else []
    if not hops and real_ip:
        hops = [real_ip.strip()]
    source = peer
    for hop in reversed(hops):
        hop = _strip_port(hop)
        try:
            ipaddress.ip_address(hop)
        except ValueError:
            return source
        source = hop
        if not _is_in(hop, trusted):
            return hop
    return source


def forwarded_https(peer: str, forwarded_proto: str | None, trusted: Sequence[Network] = ()) -> bool:
    """Whether the browser reached us over https through a TLS-terminating
    proxy: ``peer`` is one of the ``trusted`` proxies and its
    ``X-Forwarded-Proto`` (the last value: the hop nearest to us) is
    ``https``. From any other peer the header is a client's word and
    counts for nothing."""
    if not forwarded_proto or not trusted or not _is_in(peer, trusted):
        return False
    return forwarded_proto.rpartition(",")[2].strip().lower() == "https"


def _is_in(address: str, networks: Sequence[Network]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in network for network in networks)


def _strip_port(hop: str) -> str:
    """``[2001:db8::1]:443`` / ``192.0.2.1:443`` → the address alone."""
    if hop.startswith("["):
        return hop[1:].partition("]")[0]
    if hop.count(":") == 1:
        return hop.partition(":")[0]
    return hop
