from __future__ import annotations

from gemini_split.testing.conformance import TransportCase, echo_handler
from gemini_split.transport import ServeOptions, default_registry


async def _start(nursery, options: ServeOptions) -> str:
    transport = default_registry().get("loopback")
    return await nursery.start(transport.serve, "loopback:", echo_handler, options)


CASES = [TransportCase("loopback", _start)]
