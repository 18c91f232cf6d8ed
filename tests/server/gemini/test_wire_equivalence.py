"""gemini_wire reads and writes exactly what google-genai's typed layer does.

For generated streamed responses and history entries, whenever the msgspec
fast path gives an answer it is google-genai's answer for the same bytes;
and the usual shapes (text, thoughts, signatures, function calls, usage)
really take the fast path.
"""

from __future__ import annotations

import base64
import functools
import json

import google.genai as genai
import pytest
from google.genai import _common, models, types
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gemini_split.server.model.gemini import _typed_response, chunks_of
from gemini_split.server.model.wire import FastChunk, fast_chunks, plain_text, wire_content
from gemini_split.server.model.base import FunctionCallChunk, PartChunk, TextChunk, ThoughtChunk, UsageChunk

MODEL = "gemini-2.5-flash"
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
                      st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8))
json_value = st.recursive(json_leaf, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)), max_leaves=8)
signature = st.one_of(
    st.binary(max_size=24).map(lambda b: base64.b64encode(b).decode()),
    st.binary(max_size=24).map(lambda b: base64.urlsafe_b64encode(b).decode()),
    st.text(max_size=10),
    json_leaf,
)
function_call = st.fixed_dictionaries({}, optional={
    "name": st.one_of(st.text(max_size=8), json_leaf),
    "args": st.one_of(st.dictionaries(st.text(max_size=6), json_value, max_size=3), json_value),
    "id": st.one_of(st.text(max_size=6), json_leaf),
    "partialArgs": json_value,
})
wire_part = st.fixed_dictionaries({}, optional={
    "text": st.one_of(st.text(max_size=12), json_leaf),
    "thought": st.one_of(st.booleans(), json_leaf),
    "thoughtSignature": signature,
    "functionCall": function_call,
    "inlineData": st.fixed_dictionaries({"mimeType": st.just("image/png"),
                                         "data": st.binary(max_size=6).map(lambda b: base64.b64encode(b).decode())}),
})
usage = st.fixed_dictionaries({}, optional={
    key: st.one_of(st.integers(0, 10**6), json_leaf)
    for key in ("promptTokenCount", "candidatesTokenCount", "thoughtsTokenCount", "cachedContentTokenCount",
                "totalTokenCount", "toolUsePromptTokenCount")
})
candidate = st.fixed_dictionaries({}, optional={
    "content": st.fixed_dictionaries({}, optional={"role": st.just("model"), "parts": st.lists(wire_part, max_size=3)}),
    "finishReason": st.sampled_from(["STOP", "MAX_TOKENS", "SAFETY", "RECITATION", "OTHER", "CONTINUATION"]),
    "index": st.integers(0, 2),
    "safetyRatings": st.just([{"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"}]),
    "continuationToken": st.binary(min_size=1, max_size=6).map(lambda b: base64.b64encode(b).decode()),
    "groundingMetadata": st.just({"webSearchQueries": ["q"], "groundingChunks": [
        {"web": {"uri": "https://example.com", "title": "example.com"}}]}),
})
response = st.fixed_dictionaries({}, optional={
    "candidates": st.lists(candidate, max_size=2),
    "usageMetadata": usage,
    "modelVersion": st.just(MODEL),
    "responseId": st.text(max_size=5),
    "promptFeedback": st.just({"blockReason": "SAFETY"}),
})


def typed_chunks(text: str):
    """google-genai's reading (via the old code path), or the exception type."""
    import trio

    async def read():
        return await _typed_response(text, None)

    try:
        typed = trio.run(read)
    except Exception as exc:  # noqa: BLE001 - the reference may refuse the input
        return type(exc), None
    finish = typed.candidates[0].finish_reason if typed.candidates else None
    return chunks_of(typed), finish


def assert_same(text: str) -> bool:
    """Returns whether the fast path answered (for the text, and for its
    UTF-8 bytes, as SseEvents hands it over: the same)."""
    fast = fast_chunks(text)
    assert fast_chunks(text.encode("utf-8")) == fast
    if fast is None:
        return False
    reference, finish = typed_chunks(text)
    assert not isinstance(reference, type), f"google-genai refused what the fast path read: {reference}"
    assert fast.chunks == reference
    assert fast.finish_reason == (finish.value if finish is not None else None)
    return True


@pytest.mark.timeout(120)  # a few hundred examples on a loaded machine
@SETTINGS
@given(response)
def test_streamed_chunks_read_as_google_genai_reads_them(data):
    assert_same(json.dumps(data))


@pytest.mark.parametrize("data", [
    {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hello"}]}, "index": 0}]},
    {"candidates": [{"content": {"role": "model", "parts": [{"text": "hmm", "thought": True}]}}]},
    {"candidates": [{"content": {"role": "model", "parts": [
        {"text": "x", "thoughtSignature": base64.b64encode(b"\xff\xfe sig").decode()}]}}]},
    {"candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"name": "read_file", "args": {"path": "a.txt", "n": [1, 2.5, None]}, "id": "c1"}}]},
        "finishReason": "STOP"}],
     "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 7, "thoughtsTokenCount": 0,
                       "totalTokenCount": 12, "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 5}]},
     "modelVersion": MODEL, "responseId": "r1"},
    {"candidates": [{"content": {"role": "model", "parts": []}, "finishReason": "MAX_TOKENS"}]},
    {"candidates": []},
])
def test_the_usual_shapes_take_the_fast_path(data):
    assert assert_same(json.dumps(data))


@pytest.mark.parametrize("data", [
    {"error": {"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED"}},
    {"candidates": [{"finishReason": "SAFETY", "safetyRatings": [{"category": "X", "probability": "HIGH"}]}]},
    {"promptFeedback": {"blockReason": "SAFETY"}},
    {"candidates": [{"content": {"parts": [{"text": "a"}]}, "continuationToken": "YWJj"}]},
    {"candidates": [{"content": {"parts": [{"inlineData": {"mimeType": "image/png", "data": "AAAA"}}]}}]},
    {"candidates": [{"content": {"parts": [{"text": "x", "thoughtSignature": "__4g"}]}}]},  # URL-safe on the wire
    {"candidates": [{"content": {"parts": [{"text": "x"}]}, "groundingMetadata": {"webSearchQueries": ["q"]}}]},
])
def test_unusual_chunks_go_to_google_genai(data):
    assert fast_chunks(json.dumps(data)) is None
    assert plain_text(json.dumps(data)) is None


plain_response = st.fixed_dictionaries(
    {"candidates": st.just([{"content": {"role": "model", "parts": [{"text": "a plain piece"}]}, "index": 0}])},
    optional={"modelVersion": st.text(max_size=5), "responseId": st.text(max_size=5)})


@pytest.mark.timeout(120)
@SETTINGS
@given(st.one_of(response, plain_response))
def test_a_plain_text_is_what_the_fast_path_reads(data):
    """plain_text's shortcut (one plain text part, nothing else) gives
    exactly what fast_chunks gives, or leaves the response to it."""
    encoded = json.dumps(data)
    text = plain_text(encoded)
    if text is not None:
        assert fast_chunks(encoded) == FastChunk([PartChunk({"text": text}), TextChunk(text)], None)
        assert_same(encoded)


@pytest.mark.parametrize("data", [
    {"candidates": [{"content": {"parts": [{"text": ""}]}}]},
    {"candidates": [{"content": {"parts": [{"text": "a", "thought": False}]}}]},
    {"candidates": [{"content": {"parts": [{"text": "a"}]}, "finishReason": "STOP"}]},
    {"candidates": [{"content": {"parts": [{"text": "a"}]}}], "usageMetadata": {"promptTokenCount": 1}},
    {"candidates": [{"content": {"parts": [{"text": "a"}, {"text": "b"}]}}]},
    {"candidates": [{"content": {"parts": [{"text": "a"}]}}, {"content": {"parts": [{"text": "b"}]}}]},
])
def test_anything_more_than_one_plain_text_is_not_plain(data):
    assert plain_text(json.dumps(data)) is None


def test_a_full_chunk_gives_part_then_meaning_then_usage():
    data = {"candidates": [{"content": {"role": "model", "parts": [
        {"text": "think", "thought": True}, {"text": "say"}, {"functionCall": {"name": "f", "args": {}}}]}}],
        "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 2}}
    fast = fast_chunks(json.dumps(data))
    kinds = [type(c) for c in fast.chunks]
    assert kinds == [PartChunk, ThoughtChunk, PartChunk, TextChunk, PartChunk, FunctionCallChunk, UsageChunk]
    assert fast.chunks[-1].usage.total_tokens == 3


# --- requests ------------------------------------------------------------------------


@functools.cache
def reference_client() -> genai.Client:
    return genai.Client(api_key="k", http_options=types.HttpOptions(base_url="http://127.0.0.1:9"))


def reference_wire(content):
    """google-genai's conversion of one history entry, or None if it refuses."""
    client = reference_client()
    try:
        parameters = types._GenerateContentParameters(model=MODEL, contents=[content])
        body = models._GenerateContentParameters_to_mldev(client._api_client, parameters, None, parameters)
        body = _common.encode_unserializable_types(_common.convert_to_dict(body))
        # What goes on the wire is the JSON text google-genai writes.
        return json.loads(json.dumps(body["contents"][0]))
    except Exception:  # noqa: BLE001
        return None


history_part = st.fixed_dictionaries({}, optional={
    "text": st.one_of(st.text(max_size=12), json_leaf),
    "thought": st.one_of(st.booleans(), json_leaf),
    "thought_signature": signature,
    "function_call": st.fixed_dictionaries({}, optional={
        "name": st.one_of(st.text(max_size=8), json_leaf), "id": st.one_of(st.text(max_size=5), json_leaf),
        "args": st.one_of(st.dictionaries(st.text(max_size=6), json_value, max_size=3), json_value)}),
    "function_response": st.fixed_dictionaries({}, optional={
        "name": st.text(max_size=8), "id": st.one_of(st.text(max_size=5), st.none()),
        "response": st.one_of(st.dictionaries(st.text(max_size=6), json_value, max_size=3), json_value)}),
    "inline_data": st.fixed_dictionaries({"mime_type": st.just("image/png"),
                                          "data": st.binary(max_size=6).map(lambda b: base64.b64encode(b).decode())}),
})
history_entry = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "model"]), "parts": st.lists(history_part, max_size=3)},
    optional={"extra": st.just(1)},
)


@pytest.mark.timeout(120)
@SETTINGS
@given(history_entry)
def test_history_entries_written_as_google_genai_writes_them(content):
    fast = wire_content(content)
    if fast is None:
        return
    reference = reference_wire(content)
    assert reference is not None, "google-genai refused what the fast path wrote"
    assert json.loads(json.dumps(fast)) == reference


@pytest.mark.parametrize("content", [
    {"role": "user", "parts": [{"text": "<session_context>…"}, {"text": "hello"}]},
    {"role": "model", "parts": [{"text": "hm", "thought": True, "thought_signature": "__4gc2lnKy8="},
                                {"function_call": {"id": "c1", "args": {"path": "a"}, "name": "read_file"}}]},
    {"role": "user", "parts": [{"function_response": {"name": "read_file", "id": "c1",
                                                      "response": {"output": {"content": "x", "lines": 3}}}}]},
])
def test_the_usual_history_takes_the_fast_path(content):
    fast = wire_content(content)
    assert fast is not None
    assert json.loads(json.dumps(fast)) == reference_wire(content)
