"""One session's stream cannot starve the server (issue 13 §6).

A session whose model streams tens of megabytes to a client that has
stopped reading must only slow itself: ``/health`` and another session on
the same server answer in bounded time meanwhile. (Before the fix, merging
the backlog by string concatenation was quadratic and ran without a
checkpoint: /health took minutes.)
"""

from __future__ import annotations

import time

import httpx
import pytest
import trio

from gemini_split.protocol import GenerateContentRequest, TextDelta
from gemini_split.server.config import ServerConfig
from gemini_split.server.model.scripted import ScriptedModel
from gemini_split.server.service import AgentService
from gemini_split.transport import ServeOptions, get_transport

from .helpers import connected_client, raw_client

CHUNKS = 4_000
CHUNK = 5_000
#: Seconds another session or a health probe may wait. Generous for a loaded
#: 2-core machine; the bug made them wait for minutes.
BOUND = 5.0


@pytest.mark.timeout(60)
async def test_a_huge_turn_to_a_stalled_client_starves_neither_health_nor_other_sessions(tmp_path):
    huge = {"text": "x" * (CHUNKS * CHUNK), "chunks": CHUNKS}
    model = ScriptedModel([huge, {"text": "the quick answer"}])
    service = AgentService(model, ServerConfig(model="scripted"))
    transport = get_transport("ws:")
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        address = await nursery.start(
            transport.serve, "ws://127.0.0.1:0", service.handle_connection, ServeOptions(health=service.health)
        )
        async with raw_client(address) as stalled:
            await stalled.send(GenerateContentRequest(prompt="stream 20 MB, please"))
            await stalled.receive_until(lambda m: isinstance(m, TextDelta))
            # From here on nobody reads this connection.

            async def probe_health() -> float:
                started = time.perf_counter()
                async with httpx.AsyncClient() as http:
                    response = await http.get(address.replace("ws://", "http://") + "/health")
                assert response.status_code == 200 and response.json()["sessions"] >= 1
                return time.perf_counter() - started

            with trio.fail_after(BOUND):
                waited = await probe_health()
            async with connected_client(address, tmp_path) as other:
                with trio.fail_after(BOUND):
                    outcome = await other.run_turn("are you there?")
                assert outcome.finished is not None
                with trio.fail_after(BOUND):
                    waited = max(waited, await probe_health())
            assert waited < BOUND
            # The stalled session holds a bounded backlog: in its outbox, and
            # in its view's (cut off once full: tests/server/attach).
            for session in service.sessions.values():
                assert len(session.outbox) <= session.config.outbox_limit
                assert all(len(view) <= view.limit for view in session.views)
        nursery.cancel_scope.cancel()
