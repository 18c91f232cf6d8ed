"""Fan-out to many views (issue 11): what a view that falls behind gets,
and a session with many watchers streaming a long answer."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from gemini_split.protocol import ClientsChanged, Finished, GenerateContentRequest, TextDelta, ThinkingDelta, decode
from gemini_split.protocol.state import EventLog
from gemini_split.server.scripted import ScriptedModel
from gemini_split.server.views import View, fan_out_interval
from gemini_split.stamping import stamp

from .test_attach_server import _text, _words, hello, serving

pytestmark = pytest.mark.timeout(30)


async def _never(reason: str) -> None:
    raise AssertionError("not closed in these tests")


def _logged(log: EventLog, *events):
    return [log.append(stamp(event)) for event in events]


def test_a_view_that_keeps_up_gets_the_sessions_own_text():
    log, view = EventLog(), View(close=_never)
    batch = _logged(log, TextDelta(content="a", request_id="r"), TextDelta(content="b", request_id="r"))
    assert view.offer(batch)
    taken = view._queue
    # Each event encoded once, by the session: the same text objects.
    assert [text for _, text in taken] == [text for _, text in batch]
    assert all(mine is theirs for (_, mine), (_, theirs) in zip(taken, batch))


def test_a_view_that_is_behind_gets_adjacent_deltas_merged_with_the_last_seq():
    log, view = EventLog(), View(close=_never)
    first = _logged(log, TextDelta(content="He", request_id="r"))
    assert view.offer(first)  # not taken yet: the view is behind from here on
    assert view.offer(_logged(log, TextDelta(content="llo", request_id="r"), TextDelta(content=" you", request_id="r")))
    assert view.offer(_logged(log, ThinkingDelta(content="hm", request_id="r"), Finished(request_id="r")))
    queued = view._queue
    view._close_run()
    events = [decode(text) for _, text in view._queue]
    assert [type(e).__name__ for e in events] == ["TextDelta", "ThinkingDelta", "Finished"]
    assert events[0].content == "Hello you" and events[0].seq == 3  # the last merged one's seq
    assert [e.seq for e in events] == [3, 4, 5]
    assert [event for event, _ in queued][1:] == [event for event, _ in view._queue][1:]


def test_a_view_behind_by_more_than_its_bytes_is_refused_even_when_merged():
    log, view = EventLog(), View(close=_never, max_bytes=1000)
    assert view.offer(_logged(log, TextDelta(content="x" * 10, request_id="r")))
    refused = False
    for _ in range(100):
        if not view.offer(_logged(log, TextDelta(content="x" * 10, request_id="r"))):
            refused = True
            break
    assert refused and len(view) == 1  # one merged event, but too much text waiting
    assert view._bytes <= 1000 + 300  # its bounds, plus one batch at most


def test_a_session_hands_many_views_fewer_batches():
    assert fan_out_interval(2) < 0.001  # one or two clients: no difference
    assert fan_out_interval(101) == pytest.approx(100 * fan_out_interval(1.01))


async def test_forty_watchers_get_the_whole_answer_in_order_in_fewer_frames(autojump_clock):
    chunks = 400
    model = ScriptedModel([{"text": _words(chunks), "chunks": chunks, "chunk_delay": 0.0005}])
    async with serving(model) as (_, address):
        async with hello(address) as (driver, first):
            watchers = []
            contexts = [hello(address, session_id=first.session_id, role="observer", replay={"limit": 0},
                              label=f"w{i}") for i in range(40)]
            for context in contexts:
                watchers.append((await context.__aenter__())[0])
            try:
                await driver.send(GenerateContentRequest(prompt="stream"))
                seen = {}

                async def watch(name, raw):
                    seen[name] = await raw.receive_until(lambda m: isinstance(m, Finished), limit=100_000)

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(watch, "driver", driver)
                    for i, raw in enumerate(watchers):
                        nursery.start_soon(watch, i, raw)
            finally:
                for context in reversed(contexts):
                    await context.__aexit__(None, None, None)
    assert len(seen) == 41
    for events in seen.values():
        live = [e for e in events if not isinstance(e, ClientsChanged)]
        assert _text(live) == _words(chunks)
        seqs = [e.seq for e in live if e.seq is not None]
        assert seqs == sorted(set(seqs))
        # 41 views: a batch at most every 2 ms while a chunk comes every 0.5 ms.
        assert sum(isinstance(e, TextDelta) for e in live) <= chunks // 2
