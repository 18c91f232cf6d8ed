"""GeminiModel against the fake Gemini server, side by side with google-genai.

Each case runs the same request twice against the same script: through
``GeminiModel.stream`` (request built once per session, chunks read with
msgspec) and through google-genai's own ``generate_content_stream`` with
every chunk typed (what GeminiModel did before). The chunks, the errors and
the request bodies the server received must be the same.
"""

from __future__ import annotations

import base64

import httpx2
import pytest

from gemini_split.protocol import ToolSpec
from gemini_split.server.model.gemini import GeminiModel, _config, _translate_api_error, chunks_of
from gemini_split.server.model.base import ModelError, ModelRequest, PartChunk, TextChunk, ThoughtChunk
from gemini_split.testing.fake_gemini import FakeGemini
from google.genai import errors as genai_errors

KEY = "test-key"
MODEL = "gemini-2.5-flash"
TOOLS = [
    ToolSpec(name="read_file", description="Reads a file.",
             parameters={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
    ToolSpec(name="run_shell_command", description="Runs a command.",
             parameters={"type": "object", "properties": {"command": {"type": "string"}}}),
]
SIGNATURE = base64.b64encode(b"\xff\xfe\xfd signature bytes").decode()  # has "/": not URL-safe
HISTORY = [
    {"role": "user", "parts": [{"text": "<session_context>ctx</session_context>"}, {"text": "read a.txt"}]},
    {"role": "model", "parts": [{"text": "Let me look.", "thought_signature": "AQ_6IHNpZw=="},
                                {"function_call": {"id": "c1", "args": {"path": "a.txt"}, "name": "read_file"}}]},
    {"role": "user", "parts": [{"function_response": {"name": "read_file", "id": "c1",
                                                      "response": {"output": "hello"}}}]},
    # An entry of another shape: written by google-genai's types.
    {"role": "user", "parts": [{"inline_data": {"mime_type": "image/png", "data": "iVBORw0KGgo="}}]},
]


def request(**changes) -> ModelRequest:
    fields = dict(model=MODEL, contents=list(HISTORY), tools=TOOLS, system_instruction="You are a test.")
    fields.update(changes)
    return ModelRequest(**fields)


async def old_stream(model: GeminiModel, req: ModelRequest):
    """GeminiModel.stream as it was: google-genai's typed stream."""
    out = []
    try:
        stream = await model._client.aio.models.generate_content_stream(
            model=req.model, contents=req.contents, config=_config(req))
        async for response in stream:
            out.extend(chunks_of(response))
    except genai_errors.APIError as exc:
        raise _translate_api_error(exc) from None
    except httpx2.TransportError as exc:
        raise ModelError(f"{type(exc).__name__}", retryable=True) from None
    return out


async def new_stream(model: GeminiModel, req: ModelRequest):
    return [chunk async for chunk in model.stream(req)]


def joined(chunks: list) -> list:
    """Adjacent plain text (or thought) parts and their text chunks joined,
    as GeminiModel joins those that arrive together (the history joins
    them anyway): the same answer, compared whatever the network's timing."""
    result: list = []
    i = 0
    while i < len(chunks):
        kind = _pair_kind(chunks, i)
        if kind is None:
            result.append(chunks[i])
            i += 1
            continue
        texts = []
        while _pair_kind(chunks, i) is kind:
            texts.append(chunks[i + 1].text)
            i += 2
        text = "".join(texts)
        result += [PartChunk({"text": text} if kind is TextChunk else {"text": text, "thought": True}), kind(text)]
    return result


def _plain(chunk) -> dict:
    return {"text": chunk.text} if type(chunk) is TextChunk else {"text": chunk.text, "thought": True}


def _pair_kind(chunks: list, i: int):
    """TextChunk or ThoughtChunk when chunks[i:i+2] is a plain part and its meaning."""
    if i + 1 < len(chunks) and type(chunks[i]) is PartChunk and type(chunks[i + 1]) in (TextChunk, ThoughtChunk) \
            and chunks[i].part == _plain(chunks[i + 1]):
        return type(chunks[i + 1])
    return None


async def outcome(fn, model, req):
    try:
        return "ok", joined(await fn(model, req))
    except ModelError as exc:
        # The transport errors' wording is ours in both: compare what the loop uses.
        return "error", (type(exc).__name__, exc.status, exc.retryable, exc.retry_after,
                         str(exc) if exc.status is not None else None)


#: What httpx adds to every request by default; ours asks for the answer
#: unencoded (``accept-encoding: identity``, checked below) and keeps
#: HTTP/1.1's default of keeping the connection alive.
HTTPX_DEFAULT_HEADERS = ("accept", "accept-encoding", "connection")


def strip_volatile(recorded: dict) -> dict:
    headers = {k: v for k, v in recorded["headers"].items()
               if k not in ("content-length", "x-goog-api-client", "user-agent", *HTTPX_DEFAULT_HEADERS)}
    return {"path": recorded["path"], "query": recorded["query"], "body": recorded["body"], "headers": headers}


SCRIPTS = {
    "text in chunks": [{"text": "".join(f"w{i} " for i in range(40)), "chunks": 40}],
    "thought, then text": [{"thought": "Considering.", "text": "The answer.", "chunks": 3}],
    "function calls": [{"text": "Reading.", "function_calls": [
        {"name": "read_file", "args": {"path": "a.txt"}, "id": "x1"}, {"name": "run_shell_command", "args": {}}]}],
    "signature and usage": [{"raw": [
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "a", "thoughtSignature": SIGNATURE}]}}]},
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "b"}]}, "finishReason": "STOP"}],
         "usageMetadata": {"promptTokenCount": 11, "candidatesTokenCount": 2, "cachedContentTokenCount": 4,
                           "toolUsePromptTokenCount": 1}}]}],
    "safety block": [{"raw": [
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "I"}]}}]},
        {"candidates": [{"finishReason": "SAFETY", "safetyRatings": [
            {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": True}]}]}]}],
    "grounded answer": [{"raw": [
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "Paris."}]}, "finishReason": "STOP",
                         "groundingMetadata": {"webSearchQueries": ["capital of France"], "groundingChunks": [
                             {"web": {"uri": "https://example.com/paris", "title": "example.com"}}],
                             "groundingSupports": [{"segment": {"startIndex": 0, "endIndex": 6, "text": "Paris."},
                                                    "groundingChunkIndices": [0]}]}}]}]}],
    "prompt blocked": [{"raw": [{"promptFeedback": {"blockReason": "SAFETY"}}]}],
    "error event mid-stream": [{"raw": [
        {"candidates": [{"content": {"parts": [{"text": "par"}]}}]},
        {"error": {"code": 500, "message": "internal", "status": "INTERNAL"}}]}],
    "503": [{"error": {"status": 503, "message": "overloaded"}}],
    "429 with retry delay": [{"error": {"status": 429, "message": "quota", "details": [
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}]}}],
    "400": [{"error": {"status": 400, "message": "bad request"}}],
    "broken stream": [{"text": "abcdefgh", "chunks": 4, "abort_after": 2}],
    # Thousands of chunks arrive together: read in merged blocks (h11_chunks, SseEvents).
    "a long answer": [{"text": "".join(f"w{i} " for i in range(3000)), "chunks": 3000}],
    "a long answer, then an error event": [{"raw": [
        *({"candidates": [{"content": {"parts": [{"text": f"w{i} "}]}}]} for i in range(2000)),
        {"error": {"code": 500, "message": "internal", "status": "INTERNAL"}}]}],
    "a long answer broken": [{"text": "x" * 3000, "chunks": 3000, "abort_after": 2500}],
    "continuation": [
        {"raw": [{"candidates": [{"content": {"parts": [{"text": "first "}]}}]},
                 {"candidates": [{"content": {"parts": [{"text": "hop"}]}, "finishReason": "CONTINUATION",
                                  "continuationToken": "dG9rZW4x"}],
                  "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 2, "totalTokenCount": 5}}]},
        {"raw": [{"candidates": [{"content": {"parts": [{"text": " and the rest"}]}, "finishReason": "STOP"}],
                  "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 4, "totalTokenCount": 7}}]},
    ],
}


@pytest.mark.timeout(40)
@pytest.mark.parametrize("name", list(SCRIPTS))
async def test_same_chunks_errors_and_requests_as_google_genai(name):
    script = SCRIPTS[name]
    with FakeGemini(script + script, api_key=KEY) as fake:
        model = GeminiModel(KEY, base_url=fake.url)
        try:
            before = await outcome(old_stream, model, request())
            n_old = len(fake.requests)
            after = await outcome(new_stream, model, request())
        finally:
            await model.aclose()
        recorded = fake.requests
    assert after == before
    old_requests, new_requests = recorded[:n_old], recorded[n_old:]
    assert [strip_volatile(r) for r in new_requests] == [strip_volatile(r) for r in old_requests]
    assert {r["headers"].get("accept-encoding") for r in new_requests} == {"identity"}
    if name == "continuation":
        assert len(new_requests) == 2  # resumed with the token, as google-genai does
        assert before[1][-1].usage.total_tokens == 12


async def test_a_search_grounded_request_is_built_as_google_genai_builds_it():
    grounded = request(tools=[], google_search=True)
    script = [{"text": "Paris."}]
    with FakeGemini(script + script, api_key=KEY) as fake:
        model = GeminiModel(KEY, base_url=fake.url)
        try:
            before = await outcome(old_stream, model, grounded)
            after = await outcome(new_stream, model, grounded)
        finally:
            await model.aclose()
        old, new = fake.requests
    assert after == before
    assert strip_volatile(new) == strip_volatile(old)
    assert new["body"]["tools"] == [{"googleSearch": {}}]


async def test_the_config_is_converted_once_per_tool_set_and_instruction():
    with FakeGemini([{"text": "one"}, {"text": "two"}, {"text": "three"}], api_key=KEY) as fake:
        model = GeminiModel(KEY, base_url=fake.url)
        try:
            first = request()
            await new_stream(model, first)
            prepared = model._prepared(first)
            # The next turn, or another session with the same tools: a
            # longer history, equal tool specs (not the same objects).
            second = request(contents=[*HISTORY, {"role": "user", "parts": [{"text": "more"}]}],
                             tools=[ToolSpec(name=t.name, description=t.description, parameters=t.parameters)
                                    for t in TOOLS])
            assert model._prepared(second) is prepared
            # Another workspace (system instruction), the same tools: the
            # declarations are not converted again.
            other = model._prepared(request(system_instruction="Another session."))
            assert other is not prepared and other.config_body["tools"] is prepared.config_body["tools"]
            chunks = await new_stream(model, second)
            # New tool specs (a new tool_discovery): converted again.
            third = request(tools=[ToolSpec(name="x", description="y")])
            assert model._prepared(third) is not prepared
            await new_stream(model, third)
        finally:
            await model.aclose()
        bodies = [r["body"] for r in fake.requests]
    assert [c.text for c in chunks if isinstance(c, TextChunk)] == ["two"]
    assert bodies[1]["contents"][-1] == {"role": "user", "parts": [{"text": "more"}]}
    assert bodies[0]["tools"] == bodies[1]["tools"] != bodies[2]["tools"]
    assert [d["name"] for d in bodies[2]["tools"][0]["functionDeclarations"]] == ["x"]


@pytest.mark.timeout(60)
async def test_one_user_keeps_one_connection_and_concurrent_requests_each_have_their_own():
    import trio

    n = 12
    # Slow answers: every request is still running when the last one is sent.
    with FakeGemini([{"text": "one"}] * 3 + [{"text": "slow", "delay": 8}] * n, api_key=KEY) as fake:
        model = GeminiModel(KEY, base_url=fake.url)
        try:
            for _ in range(3):  # one user, one request at a time: one connection, kept alive
                assert [c.text for c in await new_stream(model, request()) if isinstance(c, TextChunk)] == ["one"]
            assert fake.open_connections == 1 and model._http1.connections == 1
            texts = []

            async def one():
                texts.extend(c.text for c in await new_stream(model, request()) if isinstance(c, TextChunk))

            async with trio.open_nursery() as nursery:
                for _ in range(n):
                    nursery.start_soon(one)
                await trio.to_thread.run_sync(lambda: fake.wait_for_requests(lambda rs: len(rs) == 3 + n, timeout=30))
                assert model._http1.connections == n  # the kept-alive one, and n - 1 new
            assert texts == ["slow"] * n
            assert model._http1.idle_connections == n
        finally:
            await model.aclose()
    assert model._http1.connections == 0


@pytest.mark.timeout(90)
async def test_three_hundred_concurrent_requests_are_all_in_flight_at_once():
    """No cap on concurrent model requests (a burst of sessions must not
    queue on the way to the model): 300 requests whose answers take long
    all reach the fake before any is answered."""
    import trio

    n = 300
    with FakeGemini([{"text": "slow", "delay": 60}] * n, api_key=KEY) as fake:
        model = GeminiModel(KEY, base_url=fake.url)

        async def one():
            await new_stream(model, request())

        async with trio.open_nursery() as nursery:
            for _ in range(n):
                nursery.start_soon(one)
            seen = await trio.to_thread.run_sync(
                lambda: fake.wait_for_requests(lambda rs: len(rs) == n, timeout=60))
            assert not any(r["completed"] for r in seen)
            assert model._http1.connections == n
            nursery.cancel_scope.cancel()
        assert model._http1.connections == 0  # a cancelled request closes its connection
        await model.aclose()


async def _connections_drop_to(fake: FakeGemini, count: int) -> int:
    """The fake's open connections once they are ``count`` (the fake's
    handler threads see a closed connection a moment later), or after 5 s."""
    import trio

    with trio.move_on_after(5):
        while fake.open_connections != count:
            await trio.sleep(0.02)
    return fake.open_connections


@pytest.mark.timeout(60)
async def test_release_idle_closes_the_kept_alive_connections_and_the_next_request_opens_a_new_one():
    import trio

    with FakeGemini([{"text": "one", "delay": 0.5}] * 3 + [{"text": "slow", "delay": 3}, {"text": "after"}],
                    api_key=KEY) as fake:
        model = GeminiModel(KEY, base_url=fake.url)
        try:
            async with trio.open_nursery() as nursery:  # a small burst: three connections, kept alive
                for _ in range(3):
                    nursery.start_soon(new_stream, model, request())
            assert fake.open_connections == 3
            await model.release_idle()
            assert await _connections_drop_to(fake, 0) == 0
            texts: list[str] = []

            async def slow() -> None:
                texts.extend(c.text for c in await new_stream(model, request()) if isinstance(c, TextChunk))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(slow)  # a new connection; still answering during the next release
                await trio.to_thread.run_sync(lambda: fake.wait_for_requests(lambda rs: len(rs) == 4))
                await model.release_idle()
            assert texts == ["slow"]
            texts += [c.text for c in await new_stream(model, request()) if isinstance(c, TextChunk)]
        finally:
            await model.aclose()
        assert await _connections_drop_to(fake, 0) == 0
    assert texts == ["slow", "after"]


@pytest.mark.timeout(60)
async def test_release_idle_lets_go_of_the_requests_prepared_for_each_sessions_instructions():
    """Each session's system instruction (its workspace, its context files)
    keeps a prepared request body; after a burst of sessions in as many
    workspaces an idle server needs none of them. The next request still
    works (prepared again)."""
    import tracemalloc

    sessions = 300
    with FakeGemini([{"text": "ok"}] * (sessions + 1), api_key=KEY) as fake:
        model = GeminiModel(KEY, base_url=fake.url)
        try:
            tracemalloc.start()
            try:
                for i in range(sessions):
                    context = f"Workspace /srv/w/{i}. " + f"GEMINI.md of session {i}: " + "x" * 4000
                    await new_stream(model, request(system_instruction=context))
                before = tracemalloc.get_traced_memory()[0]
                await model.release_idle()
                freed = before - tracemalloc.get_traced_memory()[0]
            finally:
                tracemalloc.stop()
            after = [c.text for c in await new_stream(model, request()) if isinstance(c, TextChunk)]
        finally:
            await model.aclose()
    assert freed > sessions * 4000, f"release_idle freed {freed:,} bytes"
    assert after == ["ok"]


@pytest.mark.timeout(30)
async def test_aclose_closes_the_connections_and_a_request_after_it_fails_clearly():
    with FakeGemini([{"text": "one"}], api_key=KEY) as fake:
        model = GeminiModel(KEY, base_url=fake.url)
        await new_stream(model, request())
        assert fake.open_connections == 1
        await model.aclose()
        await model.aclose()  # idempotent
        assert await _connections_drop_to(fake, 0) == 0
        with pytest.raises(ModelError, match="closed"):
            await new_stream(model, request())


@pytest.mark.timeout(30)
async def test_text_that_arrives_together_is_one_chunk_and_text_that_arrives_apart_is_not():
    long = {"text": "".join(f"w{i} " for i in range(2000)), "chunks": 2000}
    apart = {"text": "one two three", "chunks": 3, "chunk_delay": 0.3}
    with FakeGemini([long, apart], api_key=KEY) as fake:
        model = GeminiModel(KEY, base_url=fake.url)
        together = [c.text for c in await new_stream(model, request()) if isinstance(c, TextChunk)]
        spaced = [c.text for c in await new_stream(model, request()) if isinstance(c, TextChunk)]
    assert "".join(together) == long["text"] and len(together) < 100  # a few blocks, not 2,000 chunks
    assert spaced == ["one ", "two ", "three"]  # nothing waits for what comes later


QUOTA = "type.googleapis.com/google.rpc.QuotaFailure"
RETRY = "type.googleapis.com/google.rpc.RetryInfo"


@pytest.mark.timeout(40)
@pytest.mark.parametrize("error, retryable, retry_after, says", [
    ({"status": 429, "message": "Resource exhausted", "details": [{"@type": RETRY, "retryDelay": "12s"}]},
     True, 12.0, None),
    ({"status": 429, "message": "Quota exceeded. Please retry in 1.5s."}, True, 1.5, None),
    ({"status": 429, "message": "Please retry in 800ms"}, True, 0.8, None),
    ({"status": 503, "message": "The model is overloaded"}, True, None, None),
    ({"status": 429, "message": "Quota exceeded", "details": [
        {"@type": QUOTA, "violations": [{"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]},
        {"@type": RETRY, "retryDelay": "20s"}]}, False, None, "daily quota"),
    ({"status": 429, "message": "Quota exceeded for metric x, limit: 0, model: gemini-2.5-pro"},
     False, None, "no quota"),
    ({"status": 429, "message": "busy", "details": [{"@type": RETRY, "retryDelay": "3600s"}]},
     False, None, "too long to wait"),
    ({"status": 429, "message": "busy", "details": [{"@type": RETRY, "retryDelay": "soon"}, "junk"]},
     True, None, None),
])
async def test_rate_limits_are_read_as_gemini_cli_reads_them(error, retryable, retry_after, says):
    with FakeGemini([{"error": error}], api_key=KEY) as fake:
        model = GeminiModel(KEY, base_url=fake.url)
        try:
            with pytest.raises(ModelError) as raised:
                await new_stream(model, request())
        finally:
            await model.aclose()
    assert raised.value.retryable is retryable
    assert raised.value.retry_after == retry_after
    if says:
        assert says in str(raised.value)
