"""WebSocket addresses: ``ws://host:port/path?query`` parsed once, shown safely.

The query may carry a credential (``?auth=TOKEN``), so :attr:`WebSocketAddress.public`
— the form used in every message and log line — never includes it.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass

from gemini_split.errors import ConfigurationError

DEFAULT_PORTS = {"ws": 80, "wss": 443}


@dataclass(frozen=True)
class WebSocketAddress:
    scheme: str  # "ws" or "wss"
    host: str  # without IPv6 brackets; "" means every interface (serve only)
    port: int
    path: str = "/"
    query: str = ""

    @classmethod
    def parse(cls, address: str) -> WebSocketAddress:
        """Parse ``ws://host[:port][/path][?query]``; raises ConfigurationError."""
        parts = urllib.parse.urlsplit(address)
        scheme = parts.scheme.lower()
        if scheme not in DEFAULT_PORTS:
            raise ConfigurationError(
                f"{_redact(address)!r} is not a WebSocket address: "
                "expected ws://HOST:PORT or wss://HOST:PORT"
            )
        try:
            port = parts.port
        except ValueError:
            raise ConfigurationError(
                f"{_redact(address)!r} has an invalid port: expected a number 0-65535"
            ) from None
        return cls(
            scheme=scheme,
            host=parts.hostname or "",
            port=DEFAULT_PORTS[scheme] if port is None else port,
            path=parts.path or "/",
            query=parts.query,
        )

    @property
    def secure(self) -> bool:
        return self.scheme == "wss"

    @property
    def netloc(self) -> str:
        """``host:port`` with IPv6 hosts bracketed, as in a URL or a Host header."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def host_header(self) -> str:
        if self.port == DEFAULT_PORTS[self.scheme]:
            return f"[{self.host}]" if ":" in self.host else self.host
        return self.netloc

    @property
    def target(self) -> str:
        """The request target sent in the upgrade request (path and query)."""
        return f"{self.path}?{self.query}" if self.query else self.path

    @property
    def public(self) -> str:
        """The address without its query: safe to show and to log."""
        path = "" if self.path == "/" else self.path
        return f"{self.scheme}://{self.netloc}{path}"


def _redact(address: str) -> str:
    return address.partition("?")[0]
