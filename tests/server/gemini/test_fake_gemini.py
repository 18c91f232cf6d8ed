"""The fake Gemini REST server, driven by the REAL google-genai client under Trio."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import httpx
import pytest
from google import genai
from google.genai import errors, types

from gemini_split.testing.fake_gemini import FakeGemini, echo_text, load_script

MODEL = "gemini-2.5-flash"
KEY = "test-key"


@contextlib.asynccontextmanager
async def aio_client(fake: FakeGemini, api_key: str = KEY, **options):
    # google-genai only runs under Trio with an httpx.AsyncClient we created.
    async with httpx.AsyncClient() as http:
        client = genai.Client(
            api_key=api_key,
            http_options=types.HttpOptions(
                base_url=fake.url, httpx_async_client=http, **options
            ),
        )
        yield client.aio


async def collect(aio, contents, config=None):
    stream = await aio.models.generate_content_stream(
        model=MODEL, contents=contents, config=config
    )
    return [chunk async for chunk in stream]


async def test_streamed_text_arrives_whole_and_in_order_in_50_chunks():
    text = "".join(f"word{i:02d} " for i in range(50)) + "end."
    with FakeGemini([{"text": text, "chunks": 50}], api_key=KEY) as fake:
        async with aio_client(fake) as aio:
            chunks = await collect(aio, "say 50 words")
        # The server marks the request completed after its last flush: the
        # client may have read everything a moment before.
        reqs = fake.wait_for_requests(lambda rs: bool(rs) and rs[0]["completed"])

    assert len(chunks) == 50
    pieces = [c.text for c in chunks]
    assert all(pieces)
    assert "".join(pieces) == text
    for c in chunks[:-1]:
        assert c.candidates[0].finish_reason is None
        assert c.usage_metadata is None
    last = chunks[-1]
    assert last.candidates[0].finish_reason == types.FinishReason.STOP
    usage = last.usage_metadata
    assert usage.prompt_token_count > 0
    assert usage.candidates_token_count == (len(text) + 3) // 4
    assert usage.thoughts_token_count == 0
    assert usage.total_token_count == (
        usage.prompt_token_count + usage.candidates_token_count
    )
    assert last.model_version == MODEL

    [req] = reqs
    assert req["method"] == "POST"
    assert req["path"].endswith(f"/models/{MODEL}:streamGenerateContent")
    assert req["query"] == {"alt": "sse"}
    assert req["model"] == MODEL and req["stream"] is True
    assert req["auth"] == "ok" and req["status"] == 200 and req["completed"]
    assert req["chunks_sent"] == 50
    assert "x-goog-api-key" not in req["headers"]
    assert KEY not in json.dumps(req)
    assert req["headers"]["user-agent"].startswith("google-genai-sdk/")
    assert req["body"]["contents"] == [
        {"role": "user", "parts": [{"text": "say 50 words"}]}
    ]


async def test_thought_parts_and_usage_override():
    script = [
        {
            "thought": "Let me think about it.",
            "text": "Forty-two.",
            "chunks": 2,
            "usage": {"prompt_token_count": 7, "thoughtsTokenCount": 11},
        }
    ]
    with FakeGemini(script, api_key=KEY) as fake:
        async with aio_client(fake) as aio:
            chunks = await collect(aio, "meaning of life?")

    assert len(chunks) == 3
    [thought] = chunks[0].candidates[0].content.parts
    assert thought.thought is True and thought.text == "Let me think about it."
    answer = [p for c in chunks[1:] for p in c.candidates[0].content.parts]
    assert all(not p.thought for p in answer)
    assert "".join(p.text for p in answer) == "Forty-two."
    usage = chunks[-1].usage_metadata
    assert usage.prompt_token_count == 7
    assert usage.thoughts_token_count == 11
    assert usage.total_token_count == 7 + usage.candidates_token_count + 11


async def test_function_call_then_function_response_is_recorded_and_echoed():
    script = [
        {
            "text": "I'll read it.",
            "function_calls": [
                {"name": "read_file", "args": {"file_path": "notes.txt"}, "id": "call-1"}
            ],
        }
    ]
    with FakeGemini(script, api_key=KEY) as fake:
        async with aio_client(fake) as aio:
            chunks = await collect(aio, "what is in notes.txt?")
            assert len(chunks) == 1
            [call] = chunks[0].function_calls
            assert call.name == "read_file"
            assert call.args == {"file_path": "notes.txt"}
            assert call.id == "call-1"
            parts = chunks[0].candidates[0].content.parts
            assert parts[0].text == "I'll read it." and parts[1].function_call

            # Follow-up turn carrying the tool result; the script is exhausted,
            # so echo mode quotes the functionResponse back.
            history = [
                types.Content(role="user", parts=[types.Part(text="what is in notes.txt?")]),
                chunks[0].candidates[0].content,
                types.Content(
                    role="user",
                    parts=[
                        types.Part(
                            function_response=types.FunctionResponse(
                                id="call-1",
                                name="read_file",
                                response={"content": "buy milk"},
                            )
                        )
                    ],
                ),
            ]
            follow = await collect(aio, history)
        reqs = fake.requests

    assert "".join(c.text for c in follow) == 'Tool results: {"content":"buy milk"}'
    assert len(reqs) == 2
    assert reqs[0]["echo"] is False and reqs[1]["echo"] is True
    last_content = reqs[1]["body"]["contents"][-1]
    assert last_content["parts"][0]["functionResponse"] == {
        "id": "call-1",
        "name": "read_file",
        "response": {"content": "buy milk"},
    }
    model_content = reqs[1]["body"]["contents"][1]
    assert model_content["role"] == "model"
    assert model_content["parts"][1]["functionCall"]["name"] == "read_file"


async def test_scripted_errors_then_success():
    script = [
        {"error": {"status": 503, "message": "overloaded"}},
        {"error": {"status": 429, "message": "quota"}},
        {"error": {"status": 500, "message": "boom"}},
        {"text": "finally"},
    ]
    with FakeGemini(script, api_key=KEY) as fake:
        async with aio_client(fake) as aio:
            with pytest.raises(errors.ServerError) as e503:
                await collect(aio, "hi")
            with pytest.raises(errors.ClientError) as e429:
                await collect(aio, "hi")
            with pytest.raises(errors.ServerError) as e500:
                await aio.models.generate_content(model=MODEL, contents="hi")
            ok = await collect(aio, "hi")
        statuses = [r["status"] for r in fake.requests]

    assert (e503.value.code, e503.value.status, e503.value.message) == (
        503,
        "UNAVAILABLE",
        "overloaded",
    )
    assert (e429.value.code, e429.value.status) == (429, "RESOURCE_EXHAUSTED")
    assert (e500.value.code, e500.value.status) == (500, "INTERNAL")
    assert "".join(c.text for c in ok) == "finally"
    assert statuses == [503, 429, 500, 200]


async def test_api_key_checks():
    with FakeGemini([{"text": "secret answer"}], api_key="right") as fake:
        async with aio_client(fake, api_key="wrong") as aio:
            with pytest.raises(errors.ClientError) as bad:
                await collect(aio, "hi")
        assert bad.value.code == 400
        assert bad.value.status == "INVALID_ARGUMENT"
        assert "API key not valid" in bad.value.message
        # google-genai always sends a key, so check "missing" with raw httpx.
        async with httpx.AsyncClient() as http:
            r = await http.post(
                f"{fake.url}/v1beta/models/{MODEL}:generateContent",
                json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
            )
        assert r.status_code == 403
        assert r.json()["error"]["status"] == "PERMISSION_DENIED"
        assert r.json()["error"]["code"] == 403
        # Rejected requests consume no turn.
        assert fake.turns_remaining == 1
        async with aio_client(fake, api_key="right") as aio:
            r = await aio.models.generate_content(model=MODEL, contents="hi")
        assert r.text == "secret answer"
        assert [x["auth"] for x in fake.requests] == ["invalid", "missing", "ok"]


async def test_chunk_delay_really_streams():
    script = [{"text": "one two three", "chunks": 3, "chunk_delay": 0.3}]
    with FakeGemini(script, api_key=KEY) as fake:
        async with aio_client(fake) as aio:
            start = time.monotonic()
            stream = await aio.models.generate_content_stream(model=MODEL, contents="hi")
            arrivals = []
            async for chunk in stream:
                arrivals.append(time.monotonic() - start)
                if len(arrivals) == 1:
                    # The server has not written the later chunks yet. (The
                    # count may still read 0: the server thread bumps it just
                    # after its write returns.)
                    rec = fake.requests[-1]
                    assert rec["chunks_sent"] <= 1
                    assert rec["completed"] is False
        assert fake.requests[-1]["chunks_sent"] == 3
    assert len(arrivals) == 3
    assert arrivals[1] - arrivals[0] > 0.2
    assert arrivals[2] - arrivals[0] > 0.45


async def test_non_streaming_generate_content_merges_chunks():
    script = [
        {
            "thought": "hmm",
            "text": "abcdefghij",
            "chunks": 5,
            "function_calls": [{"name": "list_directory", "args": {"path": "."}}],
        },
        {"text": "cut short", "finish_reason": "MAX_TOKENS"},
    ]
    with FakeGemini(script, api_key=KEY) as fake:
        async with aio_client(fake, api_version="v1beta") as aio:
            r = await aio.models.generate_content(model=MODEL, contents="go")
            r2 = await aio.models.generate_content(model=MODEL, contents="go")
            r3 = await aio.models.generate_content(model=MODEL, contents="third")
        reqs = fake.requests

    parts = r.candidates[0].content.parts
    assert [(p.thought, p.text) for p in parts[:2]] == [(True, "hmm"), (None, "abcdefghij")]
    assert r.text == "abcdefghij"
    assert [(c.name, c.args) for c in r.function_calls] == [("list_directory", {"path": "."})]
    assert r.candidates[0].finish_reason == types.FinishReason.STOP
    assert r.usage_metadata.thoughts_token_count == 1
    assert r2.candidates[0].finish_reason == types.FinishReason.MAX_TOKENS
    assert r3.text == "Echo: third"
    assert reqs[0]["path"] == f"/v1beta/models/{MODEL}:generateContent"
    assert reqs[0]["stream"] is False and reqs[0]["query"] == {}


async def test_env_var_base_url_and_abort(monkeypatch):
    script = [{"text": "abcdef", "chunks": 3, "abort_after": 1}]
    with FakeGemini(script, api_key=KEY) as fake:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", fake.url)
        async with httpx.AsyncClient() as http:
            client = genai.Client(
                api_key=KEY, http_options=types.HttpOptions(httpx_async_client=http)
            )
            got = []
            with pytest.raises(httpx.RemoteProtocolError):
                async for chunk in await client.aio.models.generate_content_stream(
                    model=MODEL, contents="hi"
                ):
                    got.append(chunk.text)
            assert got == ["ab"]
            r = await client.aio.models.generate_content(model=MODEL, contents="still there?")
            assert r.text == "Echo: still there?"
        assert fake.requests[0]["completed"] is False


def test_echo_text_rules():
    user = lambda t: {"role": "user", "parts": [{"text": t}]}  # noqa: E731
    fr = lambda r: {"functionResponse": {"name": "f", "response": r}}  # noqa: E731
    assert echo_text({"contents": [user("a"), {"role": "model", "parts": [{"text": "b"}]}]}) == "Echo: a"
    assert echo_text({"contents": [user("x"), {"role": "user", "parts": [fr({"a": 1}), fr({"b": "é"})]}]}) == (
        'Tool results: {"a":1} {"b":"é"}'
    )
    assert echo_text({"contents": [{"parts": [{"text": "l1"}, {"text": "l2"}]}]}) == "Echo: l1\nl2"
    assert echo_text({"contents": []}) == "Echo: "


def test_script_validation():
    with pytest.raises(ValueError, match="unknown key"):
        load_script([{"txt": "typo"}])
    with pytest.raises(ValueError, match="chunks"):
        load_script([{"text": "x", "chunks": 0}])
    with pytest.raises(ValueError, match="status"):
        load_script([{"error": {"message": "no status"}}])
    assert load_script({"turns": [{"text": "x"}]}) == [{"text": "x"}]


def test_standalone_process(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "from the script", "chunks": 2}]))
    env = {k: v for k, v in os.environ.items() if k not in ("GOOGLE_API_KEY", "GEMINI_API_KEY")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gemini_split.testing.fake_gemini",
         "--script", str(script), "--api-key", KEY],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        client = genai.Client(api_key=KEY, http_options=types.HttpOptions(base_url=url))
        chunks = list(client.models.generate_content_stream(model=MODEL, contents="sync hi"))
        assert [c.text for c in chunks] == ["from th", "e script"]
        assert client.models.generate_content(model=MODEL, contents="again").text == "Echo: again"
        recorded = httpx.get(f"{url}/_requests").json()
        assert [r["action"] for r in recorded] == ["streamGenerateContent", "generateContent"]
        assert recorded[0]["body"]["contents"][0]["parts"][0]["text"] == "sync hi"
        assert KEY not in json.dumps(recorded)
        # More turns can be appended over HTTP.
        httpx.post(f"{url}/_script", json=[{"text": "appended"}]).raise_for_status()
        assert client.models.generate_content(model=MODEL, contents="x").text == "appended"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5) == 0
        proc.stdout.close()


def test_standalone_help():
    out = subprocess.run(
        [sys.executable, "-m", "gemini_split.testing.fake_gemini", "--help"],
        capture_output=True, text=True, check=True,
    ).stdout
    assert "function_calls" in out and "chunk_delay" in out and "Echo:" in out
