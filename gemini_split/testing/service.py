"""A real server for tests: the ``AgentService`` listening on a transport.

The service is the one ``serve`` runs, on the real transport plugin named by
``address`` (in-process ``loopback:`` by default; ``ws://127.0.0.1:0`` for a
real socket), with the model a test gives it (usually a ``ScriptedModel``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from gemini_split.server.config import ServerConfig
from gemini_split.server.service import AgentService
from gemini_split.transport import ServeOptions, get_transport


@asynccontextmanager
async def open_test_service(model: Any, server_tools: Any = None, *, address: str = "loopback:",
                            store: Any = None, authenticate: Any = None, model_name: str = "scripted",
                            **config: Any) -> AsyncIterator[tuple[AgentService, str]]:
    """An ``AgentService`` on ``model`` with ``ServerConfig(model=model_name,
    **config)``, listening on ``address``; yields ``(service, bound address)``.

    ``server_tools`` (a prepared ``ServerTools``), ``store`` and
    ``authenticate`` go to the service as ``serve`` passes them.

    Resource handling: leaving the block cancels the service and its
    listener (connections still open are closed with them)."""
    service = AgentService(model, ServerConfig(model=model_name, **config), server_tools=server_tools, store=store,
                           authenticate=authenticate)
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        bound = await nursery.start(get_transport(address).serve, address, service.handle_connection, ServeOptions())
        yield service, bound
        nursery.cancel_scope.cancel()
