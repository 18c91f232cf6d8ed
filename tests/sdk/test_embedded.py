"""The SDK in embedded mode, from Trio: prompts and their events, Python
tools the model calls, approvals answered from Python, resume, attach and
rewind — the real client and embedded service against the fake Gemini
server."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from gemini_split.sdk import (
    AgentBegan,
    AgentEnded,
    AgentOutput,
    Approval,
    Client,
    HandshakeFailed,
    MissingApiKey,
    PromptFailed,
    TextAdded,
    ThoughtAdded,
    ToolCallEnded,
    ToolCallStarted,
    TurnBegan,
    TurnEnded,
    tool,
)

from .conftest import clean_environ, declarations, function_responses, last_user_text

#: The first test a worker runs here loads the embedded server and google-genai (seconds on a busy machine).
pytestmark = pytest.mark.timeout(45)


async def test_a_prompt_streams_its_events_and_ends_with_the_answer(fake, environ, tmp_path):
    fake.add_turns([{"text": "Hello from the model", "chunks": 3}])
    async with Client.connect(workspace=tmp_path, environ=environ) as client:
        session = await client.new_session()
        events = [event async for event in session.prompt("Say hello")]

    assert isinstance(events[0], TurnBegan) and events[0].prompt == "Say hello"
    assert "".join(e.text for e in events if isinstance(e, TextAdded)) == "Hello from the model"
    assert isinstance(events[-1], TurnEnded) and events[-1].reason == "stop"
    assert events[-1].text == "Hello from the model"
    assert last_user_text(fake.requests[-1]) == "Say hello"


async def test_text_is_the_final_answer_and_a_failed_prompt_raises_with_its_code(fake, environ, tmp_path):
    fake.add_turns([{"text": "forty-two"}, {"error": {"status": 400, "message": "bad request, said the API"}}])
    async with Client.connect(workspace=tmp_path, environ=environ) as client:
        session = await client.new_session()
        assert await session.prompt("the answer?").text() == "forty-two"
        with pytest.raises(PromptFailed) as failed:
            await session.prompt("again").text()
    assert failed.value.code == "model_error" and "bad request, said the API" in str(failed.value)


async def test_a_python_function_is_declared_from_its_hints_and_called_by_the_model(fake, environ, tmp_path):
    calls = []

    def get_weather(city: str, days: int = 1) -> dict:
        """The forecast for a city.

        Args:
            city: The city's name.
            days: How many days ahead.
        """
        calls.append((city, days))
        return {"city": city, "sky": "sunny", "days": days}

    fake.add_turns([{"function_calls": [{"name": "get_weather", "args": {"city": "Paris", "days": 2}}]},
                    {"text": "Sunny in Paris."}])
    async with Client.connect(workspace=tmp_path, environ=environ, tools=[get_weather]) as client:
        session = await client.new_session()
        events = [event async for event in session.prompt("Weather in Paris?")]

    assert calls == [("Paris", 2)]
    declared = declarations(fake.requests[0])["get_weather"]
    assert declared["description"] == "The forecast for a city."
    assert declared["parameters_json_schema"] == {
        "type": "object", "required": ["city"],
        "properties": {"city": {"type": "string", "description": "The city's name."},
                       "days": {"type": "integer", "description": "How many days ahead."}}}
    ended = next(e for e in events if isinstance(e, ToolCallEnded))
    assert ended.name == "get_weather" and ended.ok and ended.result == {"city": "Paris", "sky": "sunny", "days": 2}
    assert function_responses(fake.requests[1])[0]["response"]["output"] == {"city": "Paris", "sky": "sunny",
                                                                             "days": 2}
    assert events[-1].text == "Sunny in Paris."


async def test_an_async_tool_runs_on_the_programs_own_trio_loop_and_its_exception_reaches_the_model(
        fake, environ, tmp_path):
    seen = []

    @tool(description="Look a word up.")
    async def lookup(word: str) -> str:
        seen.append(trio.lowlevel.current_trio_token())
        raise LookupError(f"no entry for {word}")

    fake.add_turns([{"function_calls": [{"name": "lookup", "args": {"word": "zyx"}}]}])
    async with Client.connect(workspace=tmp_path, environ=environ, tools=[lookup]) as client:
        session = await client.new_session()
        ended = [e async for e in session.prompt("look up zyx") if isinstance(e, ToolCallEnded)]

    assert seen == [trio.lowlevel.current_trio_token()]
    assert not ended[0].ok and "LookupError: no entry for zyx" in ended[0].error.message
    assert "no entry for zyx" in str(function_responses(fake.requests[1]))


WRITE = {"function_calls": [{"name": "write_file", "args": {"file_path": "notes.txt", "content": "hi\n"}}]}


async def test_an_edit_is_an_approval_question_and_approving_lets_it_run(fake, environ, tmp_path):
    fake.add_turns([WRITE, {"text": "Written."}])
    async with Client.connect(workspace=tmp_path, environ=environ) as client:
        session = await client.new_session()
        questions = []
        async for event in session.prompt("write notes.txt"):
            if isinstance(event, Approval):
                assert not (tmp_path / "notes.txt").exists()  # asked before it runs
                questions.append(event)
                event.approve()
            elif isinstance(event, TurnEnded):
                assert event.text == "Written."

    [question] = questions
    assert (question.tool, question.kind, question.args["file_path"]) == ("write_file", "edit", "notes.txt")
    assert "notes.txt" in question.description and question.decision == "approve"
    assert (tmp_path / "notes.txt").read_text() == "hi\n"


async def test_a_denial_sends_its_words_to_the_model_and_moving_on_unanswered_denies(fake, environ, tmp_path):
    fake.add_turns([WRITE, {"text": "ok"}, WRITE, {"text": "ok"}])
    async with Client.connect(workspace=tmp_path, environ=environ) as client:
        session = await client.new_session()
        async for event in session.prompt("write it"):
            if isinstance(event, Approval):
                event.deny("put it in README instead")
        told = str(function_responses(fake.requests[1]))
        async for event in session.prompt("write it again"):
            pass  # the question is seen and not answered
        moved_on = str(function_responses(fake.requests[3]))

    assert "declined" in told and "put it in README instead" in told
    assert "declined" in moved_on
    assert not (tmp_path / "notes.txt").exists()


async def test_text_denies_questions_and_yolo_asks_none(fake, environ, tmp_path):
    fake.add_turns([WRITE, {"text": "refused"}, WRITE, {"text": "done"}])
    async with Client.connect(workspace=tmp_path, environ=environ) as client:
        assert await (await client.new_session()).prompt("write").text() == "refused"
    assert not (tmp_path / "notes.txt").exists()
    async with Client.connect(workspace=tmp_path, environ=environ, approval_mode="yolo") as client:
        assert await (await client.new_session()).prompt("write").text() == "done"
    assert (tmp_path / "notes.txt").exists()


async def test_a_python_tool_of_kind_execute_is_asked_about(fake, environ, tmp_path):
    ran = []

    @tool(kind="execute")
    def deploy(target: str) -> str:
        """Deploy to a target."""
        ran.append(target)
        return "deployed"

    fake.add_turns([{"function_calls": [{"name": "deploy", "args": {"target": "prod"}}]}])
    async with Client.connect(workspace=tmp_path, environ=environ, tools=[deploy]) as client:
        session = await client.new_session()
        asked = [e async for e in session.prompt("deploy") if isinstance(e, Approval)]
        assert ran == []  # left unanswered: denied
        fake.add_turns([{"function_calls": [{"name": "deploy", "args": {"target": "staging"}}]}])
        async for event in session.prompt("deploy to staging"):
            if isinstance(event, Approval):
                event.approve()
    assert [(q.tool, q.args) for q in asked] == [("deploy", {"target": "prod"})]
    assert ran == ["staging"]


async def test_resume_continues_a_conversation_by_id_or_latest(fake, environ, tmp_path):
    async with Client.connect(workspace=tmp_path, environ=environ) as client:
        first = await client.new_session()
        await first.prompt("remember the number 42").text()
        session_id = first.id
        await first.aclose()
    async with Client.connect(workspace=tmp_path, environ=environ) as client:
        by_id = await client.resume(session_id)
        assert by_id.id == session_id
        assert [p.prompt for p in (await by_id.history()).points] == ["remember the number 42"]
        await by_id.prompt("which number?").text()
        await by_id.aclose()
        latest = await client.resume()
        assert latest.id == session_id
        with pytest.raises(HandshakeFailed) as unknown:
            await client.resume("no-such-session")
    contents = fake.requests[1]["body"]["contents"]
    assert any("remember the number 42" in str(c) for c in contents)  # the earlier turn went with it
    assert unknown.value.code == "unknown_session"


async def test_attach_shows_another_clients_turns_and_watching_cannot_prompt(fake, environ, tmp_path):
    fake.add_turns([{"text": "the driver's answer"}])
    async with Client.connect(workspace=tmp_path, environ=environ) as client:
        driver = await client.new_session()
        await driver.prompt("first").text()  # a session exists once it has a turn
        watcher = await client.attach(driver.id, watch=True)
        with pytest.raises(PromptFailed) as refused:
            watcher.prompt("may I?")
        async with watcher.events() as events:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(lambda: driver.prompt("second").text())
                seen = []
                async for event in events:
                    seen.append(event)
                    if isinstance(event, TurnEnded) and event.reason == "stop" and len(
                            [e for e in seen if isinstance(e, TurnBegan)]) == 2:
                        break

    assert refused.value.code == "forbidden"
    began = [e for e in seen if isinstance(e, TurnBegan)]
    assert [b.prompt for b in began] == ["first", "second"]  # the last turn replayed, then live
    assert began[-1].client == "python"
    assert "".join(e.text for e in seen[seen.index(began[-1]):] if isinstance(e, TextAdded)) == "Echo: second"


async def test_rewind_takes_the_conversation_and_the_files_back(fake, environ, tmp_path):
    fake.add_turns([{"text": "one"}, WRITE, {"text": "written"}])
    async with Client.connect(workspace=tmp_path, environ=environ, approval_mode="yolo") as client:
        session = await client.new_session()
        await session.prompt("first").text()
        await session.prompt("write notes").text()
        assert (tmp_path / "notes.txt").exists()
        steps = await session.steps()
        assert [(s.number, s.point.prompt, s.files) for s in steps] == [(1, "first", 0), (2, "write notes", 1)]
        done = await session.rewind(2, files=True)
        assert [(f.path, f.action) for f in done.files] == [("notes.txt", "deleted")]
        assert [p.prompt for p in (await session.history()).points] == ["first"]
        with pytest.raises(ValueError):
            await session.rewind(5)
        await session.prompt("after the rewind").text()
    assert not (tmp_path / "notes.txt").exists()
    assert "write notes" not in str(fake.requests[-1]["body"]["contents"])


async def test_a_tool_started_event_names_the_python_tool(fake, environ, tmp_path):
    def ping() -> str:
        """Answer pong."""
        return "pong"

    fake.add_turns([{"function_calls": [{"name": "ping", "args": {}}]}])
    async with Client.connect(workspace=tmp_path, environ=environ, tools=[ping]) as client:
        session = await client.new_session()
        started = [e async for e in session.prompt("ping") if isinstance(e, ToolCallStarted)]
    assert [(s.name, s.args) for s in started] == [("ping", {})]


async def test_connect_refuses_what_the_cli_would_refuse(tmp_path):
    with pytest.raises(MissingApiKey):
        async with Client.connect(workspace=tmp_path, environ=clean_environ()):
            pass
    def untyped(x):
        return x

    with pytest.raises(TypeError, match="parameter 'x' has no type annotation"):
        Client.connect(tools=[untyped])


async def test_a_session_stream_passes_a_question_over_without_denying_it(fake, environ, tmp_path):
    fake.add_turns([WRITE, {"text": "written"}])
    async with Client.connect(workspace=tmp_path, environ=environ) as client:
        session = await client.new_session()
        moved_on = trio.Event()

        async def drive() -> None:
            async for event in session.prompt("write notes.txt"):
                if isinstance(event, Approval):
                    await moved_on.wait()
                    event.approve()

        async with session.events() as events, trio.open_nursery() as nursery:
            nursery.start_soon(drive)
            async for event in events:
                if isinstance(event, Approval):
                    nursery.start_soon(events.__anext__)  # the stream moves on, the question unanswered
                    await trio.testing.wait_all_tasks_blocked()
                    moved_on.set()
                    break
    assert (tmp_path / "notes.txt").read_text() == "hi\n"


async def test_thoughts_and_a_sub_agents_run_are_events_of_the_prompt(fake, environ, tmp_path):
    fake.add_turns([
        {"thought": "Let me delegate.",
         "function_calls": [{"name": "generalist", "args": {"request": "count the files"}}]},
        {"text": "counting", "function_calls": [{"name": "complete_task", "args": {"result": "3 files"}}]},
        {"text": "There are 3 files."},
    ])
    async with Client.connect(workspace=tmp_path, environ=environ) as client:
        session = await client.new_session()
        events = [event async for event in session.prompt("how many files?")]

    assert [e.text for e in events if isinstance(e, ThoughtAdded)] == ["Let me delegate."]
    began = next(e for e in events if isinstance(e, AgentBegan))
    assert began.state.name == "generalist" and "count the files" in began.state.task
    assert "counting" in "".join(e.text for e in events if isinstance(e, AgentOutput) and not e.thought)
    ended = next(e for e in events if isinstance(e, AgentEnded))
    assert ended.agent_id == began.agent_id and ended.state.outcome == "completed" and "3 files" in ended.state.summary
    assert events[-1].text == "There are 3 files."  # a sub-agent's own text is not the answer
