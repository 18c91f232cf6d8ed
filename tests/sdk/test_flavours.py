"""The same client under asyncio and as blocking calls: the core runs on a
Trio loop in a thread of its own, and calls, events, questions and tools
cross to it and back."""

from __future__ import annotations

import asyncio
import threading

import pytest

from gemini_split import Client, SyncClient
from gemini_split.sdk import Approval, Closed, TextAdded, ToolCallEnded, TurnEnded

from .conftest import function_responses

#: The first test a worker runs here loads the embedded server and google-genai (seconds on a busy machine).
pytestmark = pytest.mark.timeout(45)

WRITE = {"function_calls": [{"name": "write_file", "args": {"file_path": "out.txt", "content": "x\n"}}]}


def test_asyncio_prompts_answers_questions_and_runs_async_tools_on_its_own_loop(fake, environ, tmp_path):
    loops = []

    async def shout(word: str) -> str:
        """Say a word louder."""
        loops.append(asyncio.get_running_loop())
        await asyncio.sleep(0)
        return word.upper()

    fake.add_turns([{"function_calls": [{"name": "shout", "args": {"word": "hey"}}]}, {"text": "HEY it is"},
                    WRITE, {"text": "written"}])

    async def main() -> tuple[str, list, asyncio.AbstractEventLoop]:
        async with Client.connect(workspace=tmp_path, environ=environ, tools=[shout]) as client:
            session = await client.new_session()
            text = await session.prompt("shout hey").text()
            events = []
            async for event in session.prompt("write out.txt"):
                events.append(event)
                if isinstance(event, Approval):
                    event.approve()
            return text, events, asyncio.get_running_loop()

    text, events, loop = asyncio.run(main())
    assert text == "HEY it is"
    assert loops == [loop]
    assert function_responses(fake.requests[1])[0]["response"]["output"] == "HEY"
    assert [type(e).__name__ for e in events if isinstance(e, Approval | ToolCallEnded)] == ["Approval",
                                                                                          "ToolCallEnded"]
    assert (tmp_path / "out.txt").read_text() == "x\n"


def test_asyncio_cancel_stops_the_prompt_and_a_cancelled_wait_cancels_it_too(fake, environ, tmp_path):
    slow = {"text": "word " * 200, "chunks": 200, "chunk_delay": 0.05}
    fake.add_turns([slow, slow, {"text": "after"}])

    async def main() -> tuple[TurnEnded, str]:
        async with Client.connect(workspace=tmp_path, environ=environ) as client:
            session = await client.new_session()
            reply = session.prompt("talk")
            async for event in reply:
                if isinstance(event, TextAdded):
                    await reply.cancel()
                if isinstance(event, TurnEnded):
                    ended = event
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(session.prompt("talk again").text(), timeout=0.5)
            # the timed-out prompt was cancelled, and has ended: the session takes the next one
            return ended, await session.prompt("and now").text()

    ended, after = asyncio.run(main())
    assert ended.reason == "cancelled"
    assert after == "after"


def test_blocking_calls_iterate_events_answer_questions_and_run_plain_tools(fake, environ, tmp_path):
    threads = []

    def where() -> str:
        """Name the thread."""
        threads.append(threading.current_thread())
        return "here"

    fake.add_turns([{"function_calls": [{"name": "where", "args": {}}]}, {"text": "found"}, WRITE, {"text": "ok"}])
    with Client.connect(workspace=tmp_path, environ=environ, tools=[where]) as client:
        assert isinstance(client, SyncClient)
        with client.new_session() as session:
            assert session.prompt("where?").text() == "found"
            kinds = []
            for event in session.prompt("write"):
                kinds.append(type(event).__name__)
                if isinstance(event, Approval):
                    event.approve()
            assert [s.number for s in session.steps()] == [1, 2]
        with pytest.raises(Closed):
            session.prompt("closed?").text()

    assert threads and threads[0] is not threading.main_thread()
    assert kinds[0] == "TurnBegan" and "Approval" in kinds and kinds[-1] == "TurnEnded"
    assert (tmp_path / "out.txt").exists()


def test_the_blocking_client_refuses_an_async_tool(environ, tmp_path):
    async def later() -> str:
        """Not here."""
        return ""

    with pytest.raises(TypeError, match="later is async"):
        with Client.connect(workspace=tmp_path, environ=environ, tools=[later]):
            pass
