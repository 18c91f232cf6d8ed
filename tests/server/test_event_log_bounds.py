"""A session's event log is bounded in bytes, not only in count (issue 13 §4).

A client asking for a large history again and again must not make the
server keep every copy (the log kept up to 10,000 events whatever their
size). Since 1.2 replies go to the asking connection only and are never
logged; the byte bound still holds for whatever is logged."""

from __future__ import annotations

import pytest

from gemini_split.protocol import (
    DEFAULT_MAX_MESSAGE_SIZE,
    Finished,
    GenerateContentRequest,
    GetHistory,
    History,
)
from gemini_split.server.model.scripted import ScriptedModel
from gemini_split.testing.service import open_test_service

from .helpers import raw_client

PROMPT = "p" * 1_000_000
ASKS = 30


@pytest.mark.timeout(60)
async def test_repeated_large_replies_keep_the_event_log_within_its_byte_bound():
    async with open_test_service(ScriptedModel([{"text": "ok"}])) as (service, address), raw_client(address) as raw:
        await raw.send(GenerateContentRequest(prompt=PROMPT))
        await raw.receive_until(lambda m: isinstance(m, Finished))
        for _ in range(ASKS):
            await raw.send(GetHistory())
        replies = []
        for _ in range(ASKS):
            reply = await raw.receive()
            assert isinstance(reply, History) and reply.messages[0]["parts"][0]["text"] == PROMPT
            replies.append(reply)
        (session,) = service.sessions.values()
        # Replies to one connection are not session events: never numbered
        # or kept (before 1.2 all 30 MB of them were logged)...
        assert all(reply.seq is None for reply in replies)
        logged = session.log.last_seq
        assert all(not isinstance(e, History) for e in session.log.kept())
        # ...and what is kept fits the bound.
        assert session.log.bytes <= DEFAULT_MAX_MESSAGE_SIZE
        assert session.log.last_seq == logged
