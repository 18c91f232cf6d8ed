"""A server that went quiet after a burst of sessions (issue 45 item 8):
what only a busy server needs is let go of — the model client's kept-alive
connections, the registries' peak-sized tables — and it still answers the
next prompt. The real AgentService, a real GeminiModel talking HTTP to the
fake Gemini server."""

from __future__ import annotations

import logging
import sys
import time

import pytest
import trio

from gemini_split.protocol import Connected, Finished, GenerateContentRequest, TextDelta
from gemini_split.server.model.gemini import GeminiModel
from gemini_split.server.model.scripted import ScriptedModel
from gemini_split.testing.fake_gemini import FakeGemini
from gemini_split.testing.service import open_test_service

from tests.server.attach.test_attach_server import hello

KEY = "test-key"


async def prompt(address: str, text: str) -> str:
    """One client, one new session, one prompt: the answer's text."""
    async with hello(address) as (raw, connected):
        assert isinstance(connected, Connected), connected
        await raw.send(GenerateContentRequest(prompt=text))
        events = await raw.receive_until(lambda m: isinstance(m, Finished))
    return "".join(e.content for e in events if isinstance(e, TextDelta))


async def wait_for(condition, seconds: float = 10.0) -> bool:
    """Real time: the give-back runs in a worker thread, the fake in its own."""
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        await trio.sleep(0.02)
    return condition()


@pytest.mark.timeout(60)
async def test_after_a_burst_the_quiet_server_closes_the_models_idle_connections_and_answers_the_next(caplog):
    caplog.set_level(logging.INFO, logger="gemini_split.memory")
    burst = 4
    script = [{"text": f"answer {i}", "delay": 0.5} for i in range(burst)] + [{"text": "the next answer"}]
    with FakeGemini(script, api_key=KEY) as fake:
        model = GeminiModel(KEY, base_url=fake.url)
        async with open_test_service(model, model_name="gemini-2.5-flash", detached_grace=0.2) as (service, address):
            service.manager.memory.after_unloads = burst
            service.manager.memory.quiet = 0.3
            answers: list[str] = []

            async def one(i: int) -> None:
                answers.append(await prompt(address, f"session {i}"))

            async with trio.open_nursery() as nursery:
                for i in range(burst):
                    nursery.start_soon(one, i)
            kept_alive = fake.open_connections
            gave_back = await wait_for(lambda: any("gave memory back" in r.getMessage() for r in caplog.records))
            await wait_for(lambda: fake.open_connections == 0, 5)
            still_open = fake.open_connections
            live = len(service.sessions)
            after = await prompt(address, "and now?")
        await model.aclose()
    assert sorted(answers) == [f"answer {i}" for i in range(burst)]
    assert kept_alive == burst  # the burst's connections, kept alive by the model client
    assert gave_back and live == 0
    assert still_open == 0, f"{still_open} connections still open after the give-back"
    assert after == "the next answer"


async def test_a_server_whose_sessions_all_left_holds_no_table_of_their_peak_size(autojump_clock):
    """A dict emptied of a burst's 300 entries keeps the table it grew for
    them; the registries of live sessions and of connections are rebuilt
    when they empty."""
    empty = sys.getsizeof({})
    async with open_test_service(ScriptedModel([]), detached_grace=1.0) as (service, address):
        async with trio.open_nursery() as nursery:
            all_in = trio.Event()
            inside = 0

            async def client() -> None:
                nonlocal inside
                async with hello(address) as (_, connected):
                    assert isinstance(connected, Connected)
                    inside += 1
                    if inside == 300:
                        all_in.set()
                    await all_in.wait()

            for _ in range(300):
                nursery.start_soon(client)
        peak = sys.getsizeof(service.manager._live), sys.getsizeof(service._streams)
        await trio.sleep(5)  # every session unloaded
        assert not service.sessions
        after = sys.getsizeof(service.manager._live), sys.getsizeof(service._streams)
    assert min(peak) > 10 * empty  # (the sessions are still live, the connections just closed)
    assert after == (empty, empty)
