"""Who may open a WebSocket: origin, failed-token throttle
(:mod:`gemini_split.transport.throttle`), token,
per-user connection cap.

Each rule is a plain function (or sans-I/O object) of the request, so the
server applies them in one place, in order — on a loopback address
without auth, Host (421, every request: DNS rebinding), then Origin (403), too many failed
tokens from this address (429 + Retry-After), token (401), cap (429) —
before the upgrade is accepted and before any handler runs.
"""

from __future__ import annotations

import collections
import ipaddress
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager

from gemini_split.transport import Principal

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


def presented_token(authorization: str | None, target: str) -> str | None:
    """The token of ``Authorization: Bearer TOKEN``, else of the request's
    ``?auth=TOKEN`` query parameter (for clients that cannot set headers),
    else None."""
    if authorization:
        scheme, _, credentials = authorization.strip().partition(" ")
        if scheme.lower() == "bearer" and credentials.strip():
            return credentials.strip()
    query = target.partition("?")[2]
    if query:
        values = urllib.parse.parse_qs(query, keep_blank_values=False).get("auth")
        if values:
            return values[0]
    return None


def origin_refusal(origin: str | None, allowed_origins: tuple[str, ...], *, own_host: str | None = None,
                   secure: bool = False) -> str | None:
    """Why a request from ``origin`` is refused, or None to let it in.

    No Origin header (not a browser: gemini-split itself, trio-websocket,
    the ``websockets`` library, ACP editors): let in. A browser always sends
    one: it must be the server's own origin — ``http(s)://`` (``secure``:
    TLS) and the request's ``Host`` (``own_host``) — or one of the
    allowlist (scheme, host and port compared case-insensitively, default
    ports filled in; ``*`` allows any). Any other page, a dev server on
    another loopback port included, is someone else's page driving the
    user's browser into this server. The reason quotes the origin shortened,
    never a header that could hold a secret.
    """
    if origin is None:
        return None
    normalised = _normalise_origin(origin)
    if allowed_origins:
        allowed = {_normalise_origin(o) for o in allowed_origins}
        if "*" in allowed or normalised in allowed:
            return None
    key = origin_key(origin)
    if key is not None and own_host and key == origin_key(f"{'https' if secure else 'http'}://{own_host}"):
        return None
    shown = repr(origin[:200])
    if allowed_origins:
        return f"origin {shown} is not allowed (see --allow-origin)"
    return (f"origin {shown} is not allowed: only this server's own pages may connect "
            "unless --allow-origin lists it")


def _normalise_origin(origin: str) -> str:
    return origin.strip().rstrip("/").lower()


_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def origin_key(origin: str) -> tuple[str, str, int] | None:
    """``(scheme, host, port)`` of an origin, default port filled in; None
    for anything else (the opaque origin ``null``, a path, garbage)."""
    parts = urllib.parse.urlsplit(_normalise_origin(origin))
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path or parts.query \
            or parts.username is not None:
        return None
    try:
        port = parts.port or _DEFAULT_PORTS[parts.scheme]
    except ValueError:
        return None
    return parts.scheme, parts.hostname, port


def host_name(host: str | None) -> str | None:
    """The name in a ``Host`` header (``[::1]:8080`` → ``::1``), lower-case;
    None when it is not a plain ``name[:port]``."""
    value = (host or "").strip().lower()
    if not value or any(c in value for c in "/\\@?# \t"):
        return None
    parts = urllib.parse.urlsplit(f"http://{value}")
    try:
        parts.port  # noqa: B018 (a bad port raises)
    except ValueError:
        return None
    return parts.hostname or None


def loopback_host_names(allowed_origins: tuple[str, ...]) -> frozenset[str]:
    """The names a server bound to a loopback address answers to
    (:func:`host_refusal`): ``localhost``, loopback addresses, and the
    hosts of the ``--allow-origin`` origins (a proxy in front that passes
    its public name on, as ``proxy_set_header Host $host`` does)."""
    names = {"localhost"}
    for origin in allowed_origins:
        key = origin_key(origin)
        if key is not None:
            names.add(key[1])
    return frozenset(names)


def host_refusal(host: str | None, names: frozenset[str]) -> str | None:
    """Why a request to a loopback-bound server without auth with header
    ``Host: host`` is refused (DNS rebinding), or None.

    A page on ``http://evil.example:8080`` whose name its owner points at
    127.0.0.1 reaches a loopback server as its *own* origin, so Origin
    checks do not see it; its requests still say ``Host: evil.example:8080``.
    Let in: no Host (not a browser), a loopback address or ``localhost`` —
    with any port or none: a rebinding page cannot choose those names, and a
    proxy on this machine may pass ``Host`` without the port — and the
    ``names`` the operator configured (:func:`loopback_host_names`)."""
    if host is None:
        return None
    name = host_name(host)
    if name is not None and (name in names or _is_loopback_ip(name)):
        return None
    return (f"this server answers to localhost and loopback addresses, not to Host {host[:200]!r} "
            "(a proxy passing another name: list its origin with --allow-origin)")


def _is_loopback_ip(name: str) -> bool:
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class ConnectionCounter:
    """Open connections per user, against a cap (0: no cap)."""

    def __init__(self, limit: int):
        self.limit = limit
        self._open: collections.Counter[str] = collections.Counter()

    def count(self, user_id: str) -> int:
        return self._open[user_id]

    @contextmanager
    def hold(self, principal: Principal | None) -> Iterator[bool]:
        """Count one connection of ``principal`` while the block runs; yields
        False (and counts nothing) when the user is already at the cap.
        Connections without a principal (auth off) are not capped."""
        if principal is None or self.limit <= 0:
            yield True
            return
        user = principal.user_id
        if self._open[user] >= self.limit:
            yield False
            return
        self._open[user] += 1
        try:
            yield True
        finally:
            self._open[user] -= 1
            if not self._open[user]:
                del self._open[user]
