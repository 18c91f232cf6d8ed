from __future__ import annotations

from gemini_split.transport import ServeOptions, default_registry

from .conftest import TransportCase
from .echo import echo_handler


async def _start(nursery, options: ServeOptions) -> str:
    transport = default_registry().get("loopback")
    return await nursery.start(transport.serve, "loopback:", echo_handler, options)


CASES = [TransportCase("loopback", _start)]
