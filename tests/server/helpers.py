"""Running a real server session over loopback for tests.

The server is ``gemini_split.testing.service.open_test_service`` (the real
AgentService on the real loopback transport plugin, a ScriptedModel); the
client is either the real ProtocolClient
(with real tools in a temporary workspace) or a raw stream for testing what a
misbehaving client gets back.
"""

from __future__ import annotations

from contextlib import asynccontextmanager

import trio

from gemini_split.tools.approval import ApprovalPolicy
from gemini_split.tools.executor import ToolExecutor
from gemini_split.client.protocol_client import ProtocolClient
from gemini_split.tools.registry import ToolRegistry, default_tools
from gemini_split.tools.workspace import Workspace
from gemini_split.protocol import Hello, decode, encode
from gemini_split.stamping import stamp
from gemini_split.transport import ConnectOptions, get_transport


@asynccontextmanager
async def connected_client(address: str, workspace, *, registry: ToolRegistry | None = None, events: list | None = None):
    """A real ProtocolClient, handshaken, its reader running."""
    collected = events if events is not None else []

    async def on_event(event):
        collected.append(event)

    stream = await get_transport(address).open_connection(address, ConnectOptions())
    executor = ToolExecutor(registry or default_tools(), Workspace(workspace), ApprovalPolicy())
    client = ProtocolClient(stream, executor, on_event=on_event)
    await client.handshake()
    async with trio.open_nursery() as nursery:
        await nursery.start(client.run)
        yield client
        await client.aclose()
        nursery.cancel_scope.cancel()


class RawClient:
    """Speaks text on a stream: for sending what a real client never would."""

    def __init__(self, stream):
        self.stream = stream

    async def send(self, message_or_text) -> None:
        text = message_or_text if isinstance(message_or_text, str) else encode(stamp(message_or_text))
        await self.stream.send(text)

    async def receive(self):
        return decode(await self.stream.receive())

    async def receive_until(self, predicate, limit: int = 1000) -> list:
        seen = []
        for _ in range(limit):
            message = await self.receive()
            seen.append(message)
            if predicate(message):
                return seen
        raise AssertionError(f"no matching message in {seen!r}")


@asynccontextmanager
async def raw_client(address: str, *, hello: bool = True):
    stream = await get_transport(address).open_connection(address, ConnectOptions())
    raw = RawClient(stream)
    if hello:
        await raw.send(Hello(client="raw-test"))
        connected = await raw.receive()
        assert connected.TYPE == "connected", connected
    try:
        yield raw
    finally:
        await stream.aclose()
