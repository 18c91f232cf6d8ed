"""Probing a server: connect, handshake, time one round trip, disconnect.

What ``gemini-split server test`` and the REPL's ``/server test`` and
``/server status`` show.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from .connect import ClientSettings, open_client
from .protocol_client import ProtocolClient


@dataclass
class ProbeResult:
    address: str
    server: str
    protocol_version: str
    session_id: str
    model: str
    latency_ms: float
    token_used: bool

    def lines(self) -> list[tuple[str, str]]:
        return [
            ("server", self.address),
            ("version", f"{self.server or 'unknown'} · protocol {self.protocol_version}"),
            ("session", f"{self.session_id} · model {self.model or 'unknown'}"),
            ("latency", f"{self.latency_ms:.1f} ms (get_state round trip)"),
            ("auth", "ok: the token was accepted" if self.token_used else "ok: no token needed"),
        ]


async def measure_latency(client: ProtocolClient) -> float:
    """Milliseconds for one ``get_state`` round trip."""
    start = time.perf_counter()
    await client.get_state()
    return (time.perf_counter() - start) * 1000


async def probe(settings: ClientSettings) -> ProbeResult:
    """Connect, handshake, time a ``get_state``, disconnect. Raises what
    :func:`~gemini_split.client.connect.open_client` raises."""
    async with open_client(settings) as client:
        connected = client.connected
        assert connected is not None
        latency = await measure_latency(client)
    return ProbeResult(
        address=settings.endpoint.server or "embedded", server=connected.server,
        protocol_version=connected.protocol_version, session_id=connected.session_id,
        model=connected.model, latency_ms=latency, token_used=bool(settings.endpoint.connect.token),
    )
