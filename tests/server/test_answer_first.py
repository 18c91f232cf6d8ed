"""Requests that have not answered go before streams (server/session/priority.py).

A request already streaming lets the server's unanswered requests go first
after each delta it hands on — only while the loop is busy, and never for
more than ``answer_first_wait`` seconds a step, so a stream is never
starved whatever keeps arriving. Real service, real loopback connections,
the scripted model (each chunk a scheduling point, like a model read from
the network).
"""

from __future__ import annotations

import time

import pytest
import trio

from gemini_split.protocol import EventLog, Finished, GenerateContentRequest, TextDelta
from gemini_split.server.config import ServerConfig
from gemini_split.server.model.scripted import ScriptedModel
from gemini_split.server.service import AgentService
from gemini_split.server.session.broadcast import Broadcast
from gemini_split.server.session.outbox import Outbox
from gemini_split.server.session.priority import AnswerFirst
from gemini_split.server.session.views import View
from gemini_split.transport import ServeOptions, get_transport

from .helpers import raw_client

STREAMERS = 20
LONG = {"text": "".join(f"t{i:04d} " for i in range(1000)), "chunks": 1000, "chunk_delay": 1e-9}


async def _serve(nursery, model: ScriptedModel, **config) -> tuple[AgentService, str]:
    service = AgentService(model, ServerConfig(model="scripted", **config))
    await nursery.start(service.run)
    address = await nursery.start(get_transport("loopback:").serve, "loopback:", service.handle_connection,
                                  ServeOptions())
    return service, address


async def _read_all(client, sink: list) -> None:
    while True:
        sink.append(await client.receive())


@pytest.mark.timeout(60)
async def test_streams_hold_while_a_new_turn_has_not_answered(tmp_path):
    """20 sessions stream long answers; a new prompt's model takes 0.3 s to
    answer. Meanwhile (a busy loop) each stream takes at most a step or two
    — without answer-first they streamed on (hundreds of deltas each)."""
    slow_to_answer = {"text": "at last", "delay": 0.3}
    model = ScriptedModel([LONG] * STREAMERS + [slow_to_answer])
    async with trio.open_nursery() as nursery:
        service, address = await _serve(nursery, model, answer_first_wait=10.0, answer_first_busy_tasks=0)
        async with trio.open_nursery() as readers:
            seen: list[list] = []
            clients = []
            for _ in range(STREAMERS):
                client = await readers.start(_open, address)  # type: ignore[arg-type]
                clients.append(client)
                await client.send(GenerateContentRequest(prompt="stream"))
                with trio.fail_after(10):
                    await client.receive_until(lambda m: isinstance(m, TextDelta))
                seen.append([])
                readers.start_soon(_read_all, client, seen[-1])
            sessions = list(service.sessions.values())
            async with raw_client(address) as newcomer:
                before = [s.log.last_seq for s in sessions]
                await newcomer.send(GenerateContentRequest(prompt="and me?"))
                with trio.fail_after(10):
                    answer = await newcomer.receive_until(lambda m: isinstance(m, TextDelta))
                grown = [s.log.last_seq - b for s, b in zip(sessions, before)]
                assert answer[-1].content == "at last"
                # A step or two each (what was on its way), not 0.3 s of streaming.
                assert max(grown) <= 4, grown
                # And then they stream on to the end.
                with trio.fail_after(30):
                    while not all(any(isinstance(m, Finished) for m in s) for s in seen):
                        await trio.sleep(0.05)
            readers.cancel_scope.cancel()
        nursery.cancel_scope.cancel()


@pytest.mark.timeout(60)
async def test_a_stream_is_never_starved_by_turns_that_never_answer(tmp_path):
    """A prompt whose model never answers stays unanswered; a stream (the
    loop counted busy throughout) still takes a step every
    ``answer_first_wait`` seconds, to the end."""
    wait = 0.05
    deltas = 30
    never = {"text": "too late", "delay": 120}
    stream = {"text": "".join(f"s{i:02d} " for i in range(deltas)), "chunks": deltas, "chunk_delay": 1e-9}
    model = ScriptedModel([never, stream])
    async with trio.open_nursery() as nursery:
        _, address = await _serve(nursery, model, answer_first_wait=wait, answer_first_busy_tasks=0)
        async with raw_client(address) as waiting, raw_client(address) as streaming:
            await waiting.send(GenerateContentRequest(prompt="think forever"))
            await trio.sleep(0)  # its request is taken first (the script's order)
            with trio.fail_after(5):
                while not model.requests:
                    await trio.sleep(0.01)
            started = time.monotonic()
            await streaming.send(GenerateContentRequest(prompt="stream"))
            with trio.fail_after(deltas * wait * 10 + 10):
                got = await streaming.receive_until(lambda m: isinstance(m, Finished))
            took = time.monotonic() - started
            assert "".join(m.content for m in got if isinstance(m, TextDelta)) == stream["text"]
            # Paced (it did wait for the unanswered request) but bounded.
            assert took >= (deltas - 1) * wait * 0.8
        nursery.cancel_scope.cancel()


@pytest.mark.timeout(60)
async def test_on_a_quiet_server_a_stream_does_not_wait_for_an_unanswered_turn(tmp_path):
    """The loop is not busy (a model thinking is no CPU): the stream goes
    at full speed although a request has not answered."""
    deltas = 40
    slow = {"text": "slow", "delay": 5}
    stream = {"text": "".join(f"q{i:02d} " for i in range(deltas)), "chunks": deltas, "chunk_delay": 1e-9}
    model = ScriptedModel([slow, stream])
    async with trio.open_nursery() as nursery:
        _, address = await _serve(nursery, model, answer_first_wait=1.0)
        async with raw_client(address) as waiting, raw_client(address) as streaming:
            await waiting.send(GenerateContentRequest(prompt="think a while"))
            with trio.fail_after(5):
                while not model.requests:
                    await trio.sleep(0.01)
            await streaming.send(GenerateContentRequest(prompt="stream"))
            # Paced at 1 s a delta it would need 40 s; the slow one answers at 5 s.
            with trio.fail_after(4):
                got = await streaming.receive_until(lambda m: isinstance(m, Finished))
            assert "".join(m.content for m in got if isinstance(m, TextDelta)) == stream["text"]
        nursery.cancel_scope.cancel()


@pytest.mark.timeout(60)
async def test_streams_hold_while_requests_keep_answering(tmp_path):
    """Ten new prompts answer 0.2 s apart (2 s in all) while 20 sessions
    stream; ``answer_first_wait`` is 0.5 s. The streams wait for as long as
    requests keep answering: a step or two each, not one every 0.5 s."""
    newcomers = 10
    model = ScriptedModel([LONG] * STREAMERS + [{"text": f"answer {i}", "delay": 0.2 * (i + 1)}
                                                for i in range(newcomers)])
    async with trio.open_nursery() as nursery:
        service, address = await _serve(nursery, model, answer_first_wait=0.5, answer_first_busy_tasks=0)
        async with trio.open_nursery() as readers:
            seen: list[list] = []
            for _ in range(STREAMERS):
                client = await readers.start(_open, address)  # type: ignore[arg-type]
                await client.send(GenerateContentRequest(prompt="stream"))
                with trio.fail_after(10):
                    await client.receive_until(lambda m: isinstance(m, TextDelta))
                seen.append([])
                readers.start_soon(_read_all, client, seen[-1])
            sessions = list(service.sessions.values())
            late = [await readers.start(_open, address) for _ in range(newcomers)]  # type: ignore[arg-type]
            before = [s.log.last_seq for s in sessions]
            for client in late:
                await client.send(GenerateContentRequest(prompt="and me?"))
            with trio.fail_after(15):
                for i, client in enumerate(late):
                    answer = await client.receive_until(lambda m: isinstance(m, TextDelta))
                    assert answer[-1].content.startswith("answer ")
            grown = [s.log.last_seq - b for s, b in zip(sessions, before)]
            # With a fixed 0.5 s they took a step every 0.5 s of the 2 s
            # (5 or more deltas each).
            assert max(grown) <= 3, grown
            with trio.fail_after(30):
                while not all(any(isinstance(m, Finished) for m in s) for s in seen):
                    await trio.sleep(0.05)
            readers.cancel_scope.cancel()
        nursery.cancel_scope.cancel()


@pytest.mark.timeout(30)
async def test_a_request_answers_when_a_client_has_written_its_first_delta():
    """A request's first delta is queued for its session's client: until
    the connection's writer has written it, the request still counts as
    unanswered (the streams of other sessions go on waiting for it)."""
    priority = AnswerFirst()
    events = Broadcast("s-test", EventLog(), Outbox())

    async def close(reason: str) -> None:
        pass

    view = View(close=close)
    events.add_view(view)
    written: list = []
    may_write = trio.Event()

    async def writer() -> None:
        while True:
            batch = await view.take()
            if any(isinstance(event, TextDelta) for event, _ in batch):
                await may_write.wait()  # the socket is slow
            written.extend(event for event, _ in batch)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: events.pump(grace=60, busy=lambda: True))
        nursery.start_soon(writer)
        pace = priority.request(when_delivered=events.when_delivered)
        assert priority.unanswered == 1
        await events.emit(TextDelta(request_id="r1", content="first"))
        pace.output()
        with trio.fail_after(5):
            while not view.caught_up and not view._writing:
                await trio.sleep(0.01)
        await trio.sleep(0.1)
        assert not written and priority.unanswered == 1 and not pace.answered
        may_write.set()
        with trio.fail_after(5):
            while priority.unanswered:
                await trio.sleep(0.01)
        assert [e.content for e in written] == ["first"] and pace.answered
        # Without a client, output counts at once.
        events.remove_view(view)
        alone = priority.request(when_delivered=events.when_delivered)
        events.emit_nowait(TextDelta(request_id="r2", content="nobody reads"))
        alone.output()
        assert alone.answered and priority.unanswered == 0
        nursery.cancel_scope.cancel()


def _burn(seconds: float) -> None:
    """Keep the loop running (no await) for ``seconds``."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        pass


@pytest.mark.timeout(30)
async def test_many_unanswered_on_a_hot_loop_hold_a_stream_though_few_tasks_are_ready():
    """A burst between its waves: few tasks ready, the loop never idle,
    many requests unanswered. A stream that has answered holds; on a loop
    that idled, or with fewer unanswered than ``busy_tasks``, it goes on."""
    for unanswered, hot, holds in ((3, True, True), (3, False, False), (2, True, False)):
        priority = AnswerFirst(max_wait=10.0, busy_tasks=3)
        stream = priority.request()
        others = [priority.request() for _ in range(unanswered)]
        await trio.sleep(0.06)
        priority.request().done()  # a reading of the loop, the one the next is compared with
        if hot:
            _burn(0.06)
        else:
            await trio.sleep(0.06)
        with trio.move_on_after(0.3) as held:
            await stream.pace()
        assert held.cancelled_caught is holds, (unanswered, hot)
        for pace in others:
            pace.done()


@pytest.mark.timeout(30)
async def test_a_rush_begins_with_many_unanswered_and_ends_when_all_have_answered_or_the_loop_idles():
    """The hooks ``serve`` gives its store and collector hear a rush begin
    and end, once each; the burst lasts until every request has answered."""
    priority = AnswerFirst(busy_tasks=3)
    heard: list[bool] = []
    bursts: list[bool] = []
    priority.on_rush.append(heard.append)
    priority.on_burst.append(bursts.append)
    first = [priority.request() for _ in range(2)]
    assert heard == []  # two unanswered, the loop idle: no rush
    third = priority.request()
    assert heard == [True] and priority.rushing and bursts == [True]
    for pace in (*first, third):
        pace.done()
    assert heard == [True, False] and not priority.rushing and bursts == [True, False]

    # A rush ends too when a reading finds the loop idle, its requests
    # still unanswered (they wait for their model, not for the loop).
    answered = priority.request()
    answered.output()
    waiting = [priority.request() for _ in range(3)]
    assert heard == [True, False, True]
    await trio.sleep(0.06)
    with trio.fail_after(1):
        await answered.pace()  # a reading: the loop idled (so it does not hold either)
    assert heard == [True, False, True, False]
    assert bursts == [True, False, True]  # its requests still have not answered
    for pace in waiting:
        pace.done()
    assert heard == [True, False, True, False] and bursts == [True, False, True, False]


@pytest.mark.timeout(30)
async def test_a_burst_that_outlasts_max_burst_ends_and_none_begins_until_all_have_answered():
    """Requests that never all answer at once are steady load: the burst
    (the collector's bound raised) ends after ``max_burst`` seconds, and
    the next one begins only once every request has answered."""
    priority = AnswerFirst(busy_tasks=3, max_burst=0.2)
    bursts: list[bool] = []
    priority.on_burst.append(bursts.append)
    first = [priority.request() for _ in range(3)]
    assert bursts == [True]
    await trio.sleep(0.25)
    priority.request().done()  # a reading
    assert bursts == [True, False]
    more = [priority.request() for _ in range(3)]  # rushes go on; no burst
    await trio.sleep(0.1)
    priority.request().done()
    assert bursts == [True, False] and priority.rushing
    for pace in (*first, *more):
        pace.done()
    again = [priority.request() for _ in range(3)]
    assert bursts == [True, False, True]
    for pace in again:
        pace.done()
    assert bursts == [True, False, True, False]


async def _open(address: str, *, task_status=trio.TASK_STATUS_IGNORED):
    """A raw client kept open until cancelled (started in a nursery)."""
    async with raw_client(address) as client:
        task_status.started(client)
        await trio.sleep_forever()
