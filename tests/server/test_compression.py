"""Issue 31 item 1: the server compresses a session's history, automatically
past ``model.compressionThreshold`` and on ``/compress``, with one
implementation; every face hears a ``compressed`` event.

Real ``gemini-split`` processes against the fake Gemini server: what the
model received is read from the fake's recorded request bodies.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import trio

from gemini_split.protocol import Hello, encode
from gemini_split.server.config import ServerConfig
from gemini_split.server.model.scripted import ScriptedModel
from gemini_split.server.service import AgentService
from gemini_split.server.session.features.compression import ACKNOWLEDGEMENT, SUMMARY_REQUEST
from gemini_split.testing.fake_gemini import FakeGemini
from gemini_split.transport.memory_pair import open_memory_pair

from tests.e2e.test_serve_e2e import API_KEY

pytestmark = pytest.mark.timeout(90)

LONG_ANSWER = "Paris is the capital of France. " * 60
SUMMARY = "<state_snapshot><overall_goal>learn capitals</overall_goal></state_snapshot>"


def run(tmp_path, fake, *args: str, threshold: float | None = 0.0001) -> subprocess.CompletedProcess:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    if threshold is not None:
        (home / "settings.json").write_text(json.dumps({"model": {"compressionThreshold": threshold}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI", "GOOGLE"))}
    env.update(HOME=str(tmp_path), GEMINI_SPLIT_HOME=str(home), GEMINI_API_KEY=API_KEY,
               GOOGLE_GEMINI_BASE_URL=fake.url)
    return subprocess.run([sys.executable, "-m", "gemini_split", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def _texts(content: dict) -> list[str]:
    return [p["text"] for p in content["parts"] if "text" in p]


def test_past_the_threshold_the_history_is_compressed_before_the_next_model_call_and_said(tmp_path):
    script = [{"text": LONG_ANSWER}, {"text": SUMMARY}, {"text": "Madrid."}]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        first = run(tmp_path, fake, "-p", "capital of France?")
        second = run(tmp_path, fake, "-r", "latest", "-p", "and Spain?")
        bodies = [r["body"] for r in fake.requests]
    assert first.returncode == 0 and second.returncode == 0, second.stderr
    assert second.stdout == "Madrid.\n"
    assert "Chat history compressed from" in second.stderr and "automatically" in second.stderr
    summary_request, answered = bodies[1], bodies[2]
    # The summary call: the older turns and gemini-cli's request, no tools.
    assert _texts(summary_request["contents"][-1]) == [SUMMARY_REQUEST]
    assert "capital of France?" in json.dumps(summary_request["contents"][0])
    assert "tools" not in summary_request
    # The next call: project context and summary, the acknowledgement, the new prompt.
    contents = answered["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    assert _texts(contents[0])[0].startswith("<session_context>") and _texts(contents[0])[-1] == SUMMARY
    assert _texts(contents[1]) == [ACKNOWLEDGEMENT]
    assert _texts(contents[2]) == ["and Spain?"]
    assert LONG_ANSWER.strip() not in json.dumps(answered)
    assert answered["systemInstruction"] == bodies[0]["systemInstruction"]  # untouched


def test_below_the_threshold_nothing_is_compressed(tmp_path):
    script = [{"text": LONG_ANSWER}, {"text": "Madrid."}]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        run(tmp_path, fake, "-p", "capital of France?", threshold=None)  # gemini-cli's 0.5 of 1M tokens
        second = run(tmp_path, fake, "-r", "latest", "-p", "and Spain?", threshold=None)
        bodies = [r["body"] for r in fake.requests]
    assert second.returncode == 0, second.stderr
    assert len(bodies) == 2 and "compressed" not in second.stderr
    assert LONG_ANSWER.strip() in json.dumps(bodies[1])


def test_a_failed_compression_leaves_the_history_as_it_was_and_the_answer_goes_on(tmp_path):
    script = [{"text": LONG_ANSWER}, {"error": {"status": 400, "message": "no summary today"}}, {"text": "Madrid."}]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        run(tmp_path, fake, "-p", "capital of France?")
        second = run(tmp_path, fake, "-r", "latest", "-p", "and Spain?")
        bodies = [r["body"] for r in fake.requests]
    assert second.returncode == 0, second.stderr
    assert second.stdout == "Madrid.\n" and "Chat history compressed" not in second.stderr
    assert "the history was not compressed: Gemini API error 400" in second.stderr  # said, not fatal
    assert LONG_ANSWER.strip() in json.dumps(bodies[2])  # the whole history went


def test_an_invalid_threshold_is_a_settings_error_naming_the_key(tmp_path):
    with FakeGemini(api_key=API_KEY) as fake:
        done = run(tmp_path, fake, "-p", "hi", threshold=3)
    assert done.returncode == 52
    assert "compressionThreshold" in done.stderr


def test_a_client_of_protocol_1_2_is_never_sent_compressed():
    """The event is new in 1.3: an older peer attached to the same session
    gets the request's other events, never one it would answer with
    unknown_type; a 1.3 peer gets it."""

    async def main() -> tuple[list[str], list[str]]:
        model = ScriptedModel([{"text": LONG_ANSWER}, {"text": "two"}, {"text": SUMMARY}])
        service = AgentService(model, ServerConfig(model="scripted"))
        async with trio.open_nursery() as nursery:
            await nursery.start(service.run)

            async def connect(version: str, **resume: str):
                client, server = open_memory_pair(buffer=256, client_peer="s", server_peer=version,
                                                  client_max=1 << 24, server_max=1 << 24)
                nursery.start_soon(service.handle_connection, server)
                await client.send(encode(Hello(id=f"h-{version}", timestamp=1, protocol_version=version,
                                               **resume)))
                return client, json.loads(await client.receive())

            async def until_end(stream, request_id: str) -> list[str]:
                seen = []
                with trio.fail_after(20):
                    while True:
                        event = json.loads(await stream.receive())
                        seen.append(event["type"])
                        if event.get("request_id") == request_id and event["type"] in ("finished", "error"):
                            return seen

            new, connected = await connect("1.3")
            old, _ = await connect("1.2", session_id=connected["session_id"],
                                   resume_token=connected["resume_token"])
            for request_id, prompt in (("r-1", "one"), ("r-2", "two")):
                await new.send(json.dumps({"type": "generate_content_request", "id": request_id,
                                           "timestamp": 1, "prompt": prompt}))
                await until_end(new, request_id)
                await until_end(old, request_id)
            await new.send(json.dumps({"type": "compress", "id": "c-1", "timestamp": 1}))
            seen_new = await until_end(new, "c-1")
            seen_old = await until_end(old, "c-1")
            nursery.cancel_scope.cancel()
        return seen_new, seen_old

    seen_new, seen_old = trio.run(main)
    assert seen_new[-2:] == ["compressed", "finished"]
    assert "finished" in seen_old and "compressed" not in seen_old
