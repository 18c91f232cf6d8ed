"""google_web_search as gemini-cli does it: a grounded Gemini request (the
API's googleSearch tool) run by the server, the answer with citation markers
and a Sources list — through the real CLI, the real google-genai client and
the fake Gemini server's grounding metadata."""

from __future__ import annotations

import json

import pytest

from gemini_split.server.model.web_search import with_citations
from gemini_split.testing.fake_gemini import FakeGemini

from .helpers import API_KEY, Sandbox, declared_tools

pytestmark = pytest.mark.timeout(60)

SEARCH = {"function_calls": [{"name": "google_web_search", "args": {"query": "trio structured concurrency"}}]}
GROUNDED = {
    "text": "Trio is a Python library. It has nurseries.",
    "grounding": {
        "sources": [{"title": "Trio docs", "uri": "https://trio.readthedocs.io"},
                    {"title": "PyPI", "uri": "https://pypi.org/project/trio"}],
        "supports": [{"end_index": 25, "sources": [0, 1]}, {"end_index": 43, "sources": [0]}],
        "queries": ["trio structured concurrency"],
    },
}


@pytest.fixture
def box(tmp_path) -> Sandbox:
    return Sandbox(tmp_path).setup()


def _function_responses(request):
    return [p["functionResponse"] for c in request["body"]["contents"] for p in c["parts"] if "functionResponse" in p]


def test_search_is_a_grounded_request_and_the_model_reads_cited_results(box):
    with FakeGemini(script=[SEARCH, GROUNDED, {"text": "Done."}], api_key=API_KEY) as fake:
        result = box.run(["-p", "what is trio?", "-o", "json"], fake=fake)
        first, search, last = fake.requests
    assert result.status == 0, result.stderr
    assert "google_web_search" in declared_tools(first)
    # The search request: only the query, only Google Search as a tool.
    assert search["body"]["tools"] == [{"googleSearch": {}}]
    assert search["body"]["contents"] == [{"role": "user", "parts": [{"text": "trio structured concurrency"}]}]
    (response,) = _function_responses(last)
    assert response["name"] == "google_web_search"
    assert response["response"] == {"output": (
        'Web search results for "trio structured concurrency":\n\n'
        "Trio is a Python library.[1][2] It has nurseries.[1]\n\n"
        "Sources:\n[1] Trio docs (https://trio.readthedocs.io)\n[2] PyPI (https://pypi.org/project/trio)"
    )}
    out = json.loads(result.stdout)
    assert out["response"] == "Done."
    assert out["stats"]["tools"]["byName"]["google_web_search"]["success"] == 1


def test_stream_json_shows_the_search_as_a_tool_call(box):
    with FakeGemini(script=[SEARCH, GROUNDED, {"text": "Done."}], api_key=API_KEY) as fake:
        result = box.run(["-p", "what is trio?", "-o", "stream-json"], fake=fake)
    events = result.json_lines()
    use = next(e for e in events if e["type"] == "tool_use")
    assert (use["tool_name"], use["parameters"]) == ("google_web_search", {"query": "trio structured concurrency"})
    done = next(e for e in events if e["type"] == "tool_result")
    assert done["tool_id"] == use["tool_id"] and done["status"] == "success"


def test_excluded_in_settings_means_never_offered(box):
    box.user_settings({"tools": {"exclude": ["google_web_search"]}})
    with FakeGemini(script=[{"text": "ok"}], api_key=API_KEY) as fake:
        assert box.run(["-p", "hi"], fake=fake).status == 0
        (request,) = fake.requests
    assert "google_web_search" not in declared_tools(request)
    assert "read_file" in declared_tools(request)


def test_offered_in_plan_mode_because_it_only_reads(box):
    with FakeGemini(script=[{"text": "ok"}], api_key=API_KEY) as fake:
        assert box.run(["-p", "hi", "--approval-mode", "plan"], fake=fake).status == 0
        (request,) = fake.requests
    assert "google_web_search" in declared_tools(request)
    assert "run_shell_command" not in declared_tools(request)


def test_a_failed_search_tells_the_model_and_the_run_goes_on(box):
    failing = {"error": {"status": 400, "message": "Search is not available for this model"}}
    with FakeGemini(script=[SEARCH, failing, {"text": "Sorry."}], api_key=API_KEY) as fake:
        result = box.run(["-p", "search", "-o", "json"], fake=fake)
        (response,) = _function_responses(fake.requests[-1])
    assert result.status == 0, result.stderr
    error = response["response"]["error"]
    assert error["code"] == "web_search_failed"
    assert 'Error during web search for query "trio structured concurrency"' in error["message"]
    assert "Search is not available for this model" in error["message"]


def test_an_empty_query_is_refused_without_a_request(box):
    empty = {"function_calls": [{"name": "google_web_search", "args": {"query": "  "}}]}
    with FakeGemini(script=[empty, {"text": "ok"}], api_key=API_KEY) as fake:
        box.run(["-p", "search"], fake=fake)
        assert len(fake.requests) == 2  # no search request between the two turns
        (response,) = _function_responses(fake.requests[-1])
    assert response["response"]["error"] == {"code": "invalid_arguments",
                                              "message": "The 'query' parameter cannot be empty."}


def test_no_results_says_so(box):
    with FakeGemini(script=[SEARCH, {"text": " "}, {"text": "ok"}], api_key=API_KEY) as fake:
        box.run(["-p", "search"], fake=fake)
        (response,) = _function_responses(fake.requests[-1])
    assert response["response"] == {
        "output": 'No search results or information found for query: "trio structured concurrency"'}


def test_grounding_only_comes_with_a_search_request():
    """The fake answers as the API does: no googleSearch tool, no metadata."""
    import httpx

    with FakeGemini(script=[GROUNDED, GROUNDED], api_key=API_KEY) as fake:
        url = f"{fake.url}/v1beta/models/gemini-2.5-flash:generateContent"
        headers = {"x-goog-api-key": API_KEY}
        body = {"contents": [{"role": "user", "parts": [{"text": "q"}]}]}
        plain = httpx.post(url, json=body, headers=headers).json()
        searched = httpx.post(url, json={**body, "tools": [{"googleSearch": {}}]}, headers=headers).json()
    assert "groundingMetadata" not in plain["candidates"][0]
    meta = searched["candidates"][0]["groundingMetadata"]
    assert meta["groundingChunks"][1] == {"web": {"title": "PyPI", "uri": "https://pypi.org/project/trio"}}
    assert meta["groundingSupports"][0]["segment"]["endIndex"] == 25
    assert meta["webSearchQueries"] == ["trio structured concurrency"]


# --- the citation format, against gemini-cli's algorithm -----------------------------


def test_citations_use_utf8_byte_offsets():
    text = "Café au lait. Crème brûlée."  # é, è, û are two bytes each
    end_first = len("Café au lait.".encode())
    grounding = {
        "grounding_chunks": [{"web": {"title": "A", "uri": "https://a"}}, {"web": {}}],
        "grounding_supports": [
            {"segment": {"end_index": end_first}, "grounding_chunk_indices": [0]},
            {"segment": {"end_index": len(text.encode())}, "grounding_chunk_indices": [1, 0]},
        ],
    }
    assert with_citations(text, grounding) == (
        "Café au lait.[1] Crème brûlée.[2][1]\n\nSources:\n[1] A (https://a)\n[2] Untitled (No URI)"
    )


def test_no_sources_leaves_the_text_alone():
    assert with_citations("plain", None) == "plain"
    assert with_citations("plain", {"grounding_supports": [{"segment": {"end_index": 2},
                                                             "grounding_chunk_indices": [0]}]}) == "plain"


def test_an_offset_past_the_end_is_clamped():
    grounding = {"grounding_chunks": [{"web": {"title": "T", "uri": "u"}}],
                 "grounding_supports": [{"segment": {"end_index": 10_000}, "grounding_chunk_indices": [0]}]}
    assert with_citations("abc", grounding) == "abc[1]\n\nSources:\n[1] T (u)"


async def test_the_scripted_model_grounds_as_google_genai_parses_the_wire_form():
    """``--model scripted:FILE`` gives the same metadata google-genai makes
    of the fake server's wire form, so the offline path cites the same way."""
    from google.genai import types

    from gemini_split.server.model.base import GroundingChunk, ModelRequest
    from gemini_split.server.model.script_format import grounding_metadata
    from gemini_split.server.model.scripted import ScriptedModel

    request = ModelRequest(model="m", contents=[{"role": "user", "parts": [{"text": "q"}]}], google_search=True)
    chunks = [c async for c in ScriptedModel([GROUNDED]).stream(request)]
    (grounding,) = [c for c in chunks if isinstance(c, GroundingChunk)]
    parsed = types.GroundingMetadata.model_validate(grounding_metadata(GROUNDED))
    assert grounding.metadata == parsed.model_dump(mode="json", exclude_none=True)
    plain = ModelRequest(model="m", contents=request.contents)
    assert not [c async for c in ScriptedModel([GROUNDED]).stream(plain) if isinstance(c, GroundingChunk)]
