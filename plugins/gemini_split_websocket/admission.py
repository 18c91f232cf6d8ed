"""Who may open a WebSocket: origin, failed-token throttle
(:mod:`gemini_split.transport.throttle`), token,
per-user connection cap.

Each rule is a plain function (or sans-I/O object) of the request, so the
server applies them in one place, in order — Origin (403), too many failed
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


def origin_refusal(origin: str | None, allowed_origins: tuple[str, ...]) -> str | None:
    """Why a request from ``origin`` is refused, or None to let it in.

    No Origin header (not a browser): let in. With an allowlist: the origin
    must be one of it (scheme, host and port compared case-insensitively;
    ``*`` allows any). Without an allowlist: only pages served from this
    machine (localhost, 127.0.0.0/8, ::1) may connect — a page from anywhere
    else is someone else's web site driving the user's browser.
    """
    if origin is None:
        return None
    normalised = _normalise_origin(origin)
    if allowed_origins:
        allowed = {_normalise_origin(o) for o in allowed_origins}
        if "*" in allowed or normalised in allowed:
            return None
        return f"origin {origin!r} is not allowed (see --allow-origin)"
    if _is_loopback_origin(normalised):
        return None
    return f"origin {origin!r} is not allowed: only local pages may connect unless --allow-origin lists it"


def _normalise_origin(origin: str) -> str:
    return origin.strip().rstrip("/").lower()


def _is_loopback_origin(origin: str) -> bool:
    parts = urllib.parse.urlsplit(origin)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return False  # includes the opaque origin "null"
    host = parts.hostname
    if host in LOOPBACK_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
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
