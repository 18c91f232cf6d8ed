"""A session's event log is bounded in bytes, not only in count (issue 13 §4).

Replies are session events too: a client asking for a large history again
and again must not make the server keep every copy (the log kept up to
10,000 events whatever their size)."""

from __future__ import annotations

import pytest

from gemini_split.protocol import (
    DEFAULT_MAX_MESSAGE_SIZE,
    Finished,
    GenerateContentRequest,
    GetHistory,
    History,
    ReplayUnavailable,
)
from gemini_split.server.scripted import ScriptedModel

from .helpers import raw_client, serving

PROMPT = "p" * 1_000_000
ASKS = 30


@pytest.mark.timeout(60)
async def test_repeated_large_replies_keep_the_event_log_within_its_byte_bound():
    async with serving(ScriptedModel([{"text": "ok"}])) as (service, address), raw_client(address) as raw:
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
        assert session.log.last_seq == replies[-1].seq
        # The oldest replies were let go (before: all 30 MB were kept)...
        with pytest.raises(ReplayUnavailable):
            session.log.since(replies[0].seq - 1)
        # ...and what is kept fits the bound, newest first.
        assert session.log.bytes <= DEFAULT_MAX_MESSAGE_SIZE
        assert [e.id for e in session.log.since(replies[-2].seq)] == [replies[-1].id]
