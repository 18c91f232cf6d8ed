"""The Outbox: coalescing and back-pressure between a session and its writer."""

from __future__ import annotations

import trio
import trio.testing

from gemini_split.protocol import Finished, TextDelta, ThinkingDelta, ToolStarted
from gemini_split.server.session.outbox import Outbox


async def test_deltas_merge_while_the_writer_lags_and_order_is_kept():
    box = Outbox()
    for piece in ("a", "b", "c"):
        await box.put(TextDelta(request_id="r", content=piece))
    await box.put(ThinkingDelta(request_id="r", content="t"))
    await box.put(TextDelta(request_id="r", content="d"))
    box.put_nowait(ToolStarted(request_id="r", call_id="1", tool="x"))
    await box.put(TextDelta(request_id="r", content="e"))
    await box.put(TextDelta(request_id="r", content="f"))
    batch = await box.take()
    assert [(type(e).__name__, getattr(e, "content", None)) for e in batch] == [
        ("TextDelta", "abc"), ("ThinkingDelta", "t"), ("TextDelta", "d"), ("ToolStarted", None), ("TextDelta", "ef"),
    ]
    # What is taken is gone; the next delta starts a new message.
    await box.put(TextDelta(request_id="r", content="g"))
    assert [e.content for e in await box.take()] == ["g"]


async def test_a_merged_delta_stops_at_the_merge_limit():
    box = Outbox(merge_limit=10)
    for _ in range(7):
        await box.put(TextDelta(request_id="r", content="xxxx"))
    assert [len(e.content) for e in await box.take()] == [8, 8, 8, 4]


async def test_put_waits_once_max_bytes_of_text_are_unsent_and_take_releases_it():
    box = Outbox(max_bytes=100)
    await box.put(TextDelta(request_id="r", content="x" * 60))
    await box.put(TextDelta(request_id="r", content="y" * 60))  # now over the bound: the next put waits
    done = trio.Event()

    async def producer():
        await box.put(TextDelta(request_id="r", content="z"))
        done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(producer)
        await trio.testing.wait_all_tasks_blocked()
        assert not done.is_set()
        box.put_nowait(Finished(request_id="r"))  # replies never wait
        assert [type(e).__name__ for e in await box.take()] == ["TextDelta", "Finished"]
        await done.wait()
    assert [e.content for e in await box.take()] == ["z"]


async def test_put_waits_once_limit_distinct_events_are_pending():
    box = Outbox(limit=2)
    await box.put(ToolStarted(request_id="r", call_id="1", tool="t"))
    await box.put(ToolStarted(request_id="r", call_id="2", tool="t"))
    with trio.move_on_after(0.05) as scope:
        await box.put(ToolStarted(request_id="r", call_id="3", tool="t"))
    assert scope.cancelled_caught
    assert len(await box.take()) == 2


async def test_a_producer_that_never_waits_still_lets_other_tasks_run():
    box = Outbox()
    ticks = 0

    async def other_task():
        nonlocal ticks
        while True:
            ticks += 1
            await trio.sleep(0)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(other_task)
        await trio.sleep(0)
        start = ticks
        for _ in range(1000):  # tiny deltas, all merged: the outbox is never full
            await box.put(TextDelta(request_id="r", content="."))
        assert ticks - start >= 1000 // 64 - 1
        nursery.cancel_scope.cancel()
    assert len((await box.take())[0].content) == 1000


async def test_interleaved_deltas_of_several_agents_merge_per_agent_and_keep_each_agents_order():
    """Sub-agents streaming at once (issue 32): their deltas alternate; each
    agent's merge into its own message, an agent's text never passes its
    thought, and nothing passes an event that is not a delta."""
    box = Outbox()
    for piece in ("1", "2", "3"):
        await box.put(TextDelta(request_id="r", content=f"a{piece}", agent_id=1))
        await box.put(TextDelta(request_id="r", content=f"b{piece}", agent_id=2))
    await box.put(ThinkingDelta(request_id="r", content="t", agent_id=1))
    await box.put(TextDelta(request_id="r", content="a4", agent_id=1))
    await box.put(TextDelta(request_id="r", content="b4", agent_id=2))
    box.put_nowait(ToolStarted(request_id="r", call_id="1", tool="x", agent_id=2))
    await box.put(TextDelta(request_id="r", content="b5", agent_id=2))
    batch = await box.take()
    assert [(type(e).__name__, e.agent_id, getattr(e, "content", None)) for e in batch] == [
        ("TextDelta", 1, "a1a2a3"), ("TextDelta", 2, "b1b2b3b4"), ("ThinkingDelta", 1, "t"), ("TextDelta", 1, "a4"),
        ("ToolStarted", 2, None), ("TextDelta", 2, "b5"),
    ]
