"""(1.4) Sub-agent events: what a peer older than 1.4 is sent, decided the
same way on the event (the server's writers) and on its encoded text (the
Redis relay, the store's replay)."""

from __future__ import annotations

import pytest

from gemini_split.protocol import (
    AgentFinished,
    AgentStarted,
    Finished,
    TextDelta,
    ThinkingDelta,
    ToolAwaitingApproval,
    ToolCompleted,
    ToolDecided,
    ToolExecutionRequest,
    ToolStarted,
    Usage,
    encode,
)
from gemini_split.protocol.event_log import coalesce
from gemini_split.protocol.replay import mark_replayed
from gemini_split.protocol.versions import adapted, adapted_text
from gemini_split.stamping import stamp


def for_older_peer(event) -> bool:
    return adapted(event, (1, 3)) is not None


def text_for_older_peer(text: str) -> bool:
    return adapted_text(text, (1, 3)) is not None

EVENTS = [
    (TextDelta(request_id="r", content="main text"), True),
    (TextDelta(request_id="r", content='ends like ,"agent_id":1}', agent_id=0), True),
    (TextDelta(request_id="r", content="sub text", agent_id=2), False),
    (ThinkingDelta(request_id="r", content="hm", agent_id=1), False),
    (ToolStarted(request_id="r", call_id="c", tool="read_file", parameters={"agent_id": 3}), True),
    (ToolStarted(request_id="r", call_id="c", tool="read_file", agent_id=3), False),
    (ToolCompleted(request_id="r", call_id="c", tool="read_file", result="x", agent_id=12), False),
    (AgentStarted(request_id="r", agent_id=1, name="a", parent_call_id="p"), False),
    (AgentFinished(request_id="r", agent_id=1, name="a", parent_call_id="p", outcome="completed",
                   usage=Usage(total_tokens=3)), False),
    # What an older client must answer stays visible to it.
    (ToolExecutionRequest(request_id="r", tool="write_file", agent_id=1), True),
    (ToolAwaitingApproval(request_id="r", call_id="c", tool="write_file", agent_id=1), True),
    (ToolDecided(request_id="r", call_id="c", decision="approve", agent_id=1), True),
    (Finished(request_id="r"), True),
]


@pytest.mark.parametrize(("event", "sent"), EVENTS, ids=lambda v: getattr(v, "TYPE", str(v)))
def test_an_older_peer_gets_the_main_agents_events_and_what_it_must_answer(event, sent):
    stamped = stamp(event)
    assert for_older_peer(stamped) is sent
    assert text_for_older_peer(encode(stamped)) is sent
    assert text_for_older_peer(mark_replayed(encode(stamped))) is sent


def test_deltas_of_different_agents_never_merge_into_one():
    merged = coalesce([TextDelta(request_id="r", content="a"), TextDelta(request_id="r", content="b", agent_id=1),
                       TextDelta(request_id="r", content="c", agent_id=1), TextDelta(request_id="r", content="d")])
    assert [(e.content, e.agent_id) for e in merged] == [("a", 0), ("bc", 1), ("d", 0)]
