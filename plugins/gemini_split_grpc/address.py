"""gRPC addresses: ``grpc://HOST:PORT`` (plain) and ``grpcs://HOST:PORT`` (TLS)."""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass, replace

from gemini_split.errors import ConfigurationError

DEFAULT_PORTS = {"grpc": 50051, "grpcs": 443}


@dataclass(frozen=True)
class GrpcAddress:
    scheme: str  # "grpc" or "grpcs"
    host: str  # without IPv6 brackets
    port: int

    @classmethod
    def parse(cls, address: str) -> GrpcAddress:
        """Parse ``grpc[s]://HOST[:PORT]``; raises ConfigurationError."""
        parts = urllib.parse.urlsplit(address)
        scheme = parts.scheme.lower()
        if scheme not in DEFAULT_PORTS:
            raise ConfigurationError(f"{address!r} is not a gRPC address: expected grpc://HOST:PORT or grpcs://HOST:PORT")
        try:
            port = parts.port
        except ValueError:
            raise ConfigurationError(f"{address!r} has an invalid port: expected a number 0-65535") from None
        if not parts.hostname:
            raise ConfigurationError(f"{address!r} has no host")
        if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
            raise ConfigurationError(f"{address!r}: a gRPC address is grpc://HOST:PORT, with no path, user or query")
        return cls(scheme, parts.hostname, DEFAULT_PORTS[scheme] if port is None else port)

    @property
    def secure(self) -> bool:
        return self.scheme == "grpcs"

    @property
    def netloc(self) -> str:
        """``host:port``, IPv6 hosts bracketed (what grpcio takes)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.netloc}"

    def with_port(self, port: int) -> GrpcAddress:
        return replace(self, port=port)
