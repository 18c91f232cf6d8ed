"""The answer's first text reaches the agent loop alone, before the rest of
its block is read (the time to first delta; server/session/priority.py)."""

from __future__ import annotations

import pytest

from gemini_split.server.model.gemini import GeminiModel
from gemini_split.server.model.base import ModelRequest, PartChunk, TextChunk, ThoughtChunk
from gemini_split.testing.fake_gemini import FakeGemini

KEY = "test-key"


def request() -> ModelRequest:
    return ModelRequest(model="gemini-2.5-flash", contents=[{"role": "user", "parts": [{"text": "go"}]}])


@pytest.mark.timeout(30)
async def test_the_first_text_of_a_block_comes_alone_and_the_rest_together():
    # 400 events written at once: they arrive in one or a few blocks.
    pieces = [f"w{i:03d} " for i in range(400)]
    with FakeGemini([{"text": "".join(pieces), "chunks": 400}], api_key=KEY) as fake:
        model = GeminiModel(KEY, base_url=fake.url)
        chunks = [c async for c in model.stream(request())]
        await model.aclose()
    texts = [c.text for c in chunks if isinstance(c, TextChunk)]
    assert texts[0] == pieces[0]
    assert "".join(texts) == "".join(pieces) and len(texts) < 40
    # Each text comes with its part, as before.
    assert [c.part for c in chunks if isinstance(c, PartChunk)] == [{"text": t} for t in texts]


@pytest.mark.timeout(30)
async def test_a_thought_first_comes_alone_and_the_text_after_it_still_joins():
    turn = {"thought": "hmm", "text": "".join(f"a{i} " for i in range(50)), "chunks": 50}
    with FakeGemini([turn], api_key=KEY) as fake:
        model = GeminiModel(KEY, base_url=fake.url)
        chunks = [c async for c in model.stream(request())]
        await model.aclose()
    meanings = [c for c in chunks if isinstance(c, TextChunk | ThoughtChunk)]
    assert meanings[0] == ThoughtChunk("hmm")
    assert "".join(c.text for c in meanings[1:]) == turn["text"] and len(meanings) < 10
