"""Which addresses ``web_fetch`` may connect to when a *server* runs it
(``serve --server-tools``): public ones only, unless the operator allows
more (``serve --web-fetch-allow CIDR|HOST``).

On a client, ``web_fetch`` reaches whatever the user's machine reaches (the
user's own network is theirs). On a server it runs in the serve process, on
the server's network: without this, a session's model could read the
server's loopback services, its private network or the cloud metadata
endpoint (169.254.169.254) and hand what it read to the session's user.

The check is made on the address connected to, not on the name in the URL:
:class:`GuardedBackend` is the HTTP client's network backend, so every
connection — the first request and every redirect — resolves the host
itself, checks *every* address the name resolves to, and connects only to
an address it checked. A name that resolves to a public address once and a
private one next (DNS rebinding) cannot slip through, nor can a redirect to
``http://127.0.0.1/``. HTTP proxies from the environment are not used (the
proxy would make the connection the check cannot see).
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx
import trio

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

#: Refused networks and what to call them in the error the model sees.
#: Anything else Python does not count as globally reachable is refused too
#: ("reserved"); IPv6 forms that carry an IPv4 address are judged by that
#: address (:func:`_embedded_ipv4`).
BLOCKED: tuple[tuple[Network, str], ...] = tuple((ipaddress.ip_network(net), name) for net, name in (
    ("0.0.0.0/8", "unspecified"),
    ("127.0.0.0/8", "loopback"),
    ("10.0.0.0/8", "private"),
    ("172.16.0.0/12", "private"),
    ("192.168.0.0/16", "private"),
    ("100.64.0.0/10", "carrier-grade NAT (shared)"),
    ("169.254.0.0/16", "link-local (cloud metadata)"),
    ("192.0.0.0/24", "IETF protocol"),
    ("198.18.0.0/15", "benchmarking"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("fc00::/7", "unique-local (private)"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "site-local"),
    ("ff00::/8", "multicast"),
))
_HOST_NAME = r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*\.?"
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
_MAPPED = ipaddress.ip_network("::ffff:0:0/96")


class AddressRefused(Exception):
    """``host`` resolved to ``address``, which the guard refuses: ``reason``
    names its kind (``loopback``, ``private``…)."""

    def __init__(self, host: str, address: str, reason: str):
        super().__init__(f"{host} is {address}, a {reason} address")
        self.host = host
        self.address = address
        self.reason = reason


def blocked_reason(address: Address) -> str | None:
    """What kind of non-public address ``address`` is, or None when it is
    public (see :data:`BLOCKED`)."""
    embedded = _embedded_ipv4(address)
    if embedded is not None:
        inner = blocked_reason(embedded)
        return f"{inner} (as IPv6)" if inner else None
    for network, name in BLOCKED:
        if address.version == network.version and address in network:
            return name
    if not address.is_global:
        return "reserved"
    return None


def _embedded_ipv4(address: Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 form stands for: IPv4-mapped
    (``::ffff:127.0.0.1``), IPv4-compatible (``::127.0.0.1``), NAT64
    (``64:ff9b::7f00:1``), 6to4 and Teredo; None for others."""
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if any(address in net for net in _NAT64) or (address in _IPV4_COMPATIBLE and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


class AddressGuard:
    """Public addresses, plus the operator's allow-list: ``allow`` holds
    networks or single addresses (``10.1.2.0/24``, ``fd00::5``) that may be
    reached, and host names (``wiki.internal``, matched exactly, case
    ignored) that may be reached at whatever address they resolve to.
    Raises :class:`ValueError` for an entry that is neither."""

    def __init__(self, allow: Iterable[str] = ()):
        self.networks: list[Network] = []
        self.hosts: set[str] = set()
        for entry in allow:
            text = entry.strip()
            try:
                network = ipaddress.ip_network(text, strict=False)
            except ValueError:
                pass
            else:
                if network.version == 6 and network.subnet_of(_MAPPED):  # type: ignore[arg-type]
                    # ::ffff:10.0.0.0/104 means 10.0.0.0/8, however it is connected to.
                    network = ipaddress.IPv4Network((int(network.network_address) & 0xFFFFFFFF,
                                                     network.prefixlen - 96))
                self.networks.append(network)
                continue
            name = text.lower().rstrip(".")
            if not name or not re.fullmatch(_HOST_NAME, name):
                raise ValueError(f"--web-fetch-allow {entry!r}: expected an address, a CIDR "
                                 "(e.g. 10.1.0.0/16) or a host name (e.g. wiki.internal)")
            self.hosts.add(name)

    def refusal(self, host: str, address: str) -> AddressRefused | None:
        """Why connecting to ``address`` (which ``host`` resolved to) is
        refused, or None to allow it. An address that cannot be parsed is
        refused."""
        if host.lower().rstrip(".") in self.hosts:
            return None
        try:
            ip = ipaddress.ip_address(address.split("%", 1)[0])
        except ValueError:
            return AddressRefused(host, address, "unrecognised")
        if any(candidate.version == n.version and candidate in n
               for candidate in (ip, _embedded_ipv4(ip) or ip) for n in self.networks):
            return None
        reason = blocked_reason(ip)
        return AddressRefused(host, address, reason) if reason else None


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend with the guard in front: resolves the
    host, refuses (:class:`AddressRefused`) when any address it resolves to
    is refused, and connects to the checked addresses only, in order."""

    def __init__(self, guard: AddressGuard, inner: httpcore.AsyncNetworkBackend | None = None):
        self.guard = guard
        self.inner = inner or httpcore.TrioBackend()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None, socket_options: Any = None) -> httpcore.AsyncNetworkStream:
        try:
            infos = await trio.socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from None
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
        for address in addresses:
            refused = self.guard.refusal(host, address)
            if refused is not None:
                raise refused
        failure: Exception = httpcore.ConnectError(f"{host} resolved to no address")
        for address in addresses:
            try:
                return await self.inner.connect_tcp(address, port, timeout=timeout, local_address=local_address,
                                                    socket_options=socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        raise failure

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Any = None) -> httpcore.AsyncNetworkStream:
        raise AddressRefused(path, path, "Unix socket")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


def guarded_transport(guard: AddressGuard) -> httpx.AsyncBaseTransport:
    """An httpx transport whose every connection goes through
    :class:`GuardedBackend` (no proxies from the environment). Raises
    :class:`RuntimeError` if httpx no longer has the connection pool this
    replaces, rather than fetch unguarded."""
    transport = httpx.AsyncHTTPTransport(trust_env=False)
    # httpx has no public way to choose the network backend; its transport
    # is a thin layer over this one httpcore pool, which takes a backend.
    if not isinstance(getattr(transport, "_pool", None), httpcore.AsyncConnectionPool):
        raise RuntimeError("this httpx has no connection pool to guard; server-side web_fetch refuses to run")
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=httpx.create_ssl_context(trust_env=False),
        network_backend=GuardedBackend(guard),
    )
    return transport
