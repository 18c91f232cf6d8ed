"""``google_web_search``: gemini-cli's web search, run by the server.

Only the server talks to Gemini, so this tool runs where the agent loop
runs, whatever the session's other tools do: a grounded model request (the
API's ``google_search`` tool) with the query as its only content, then the
answer with gemini-cli's citation markers (``[1][2]`` inserted at the end of
each supported segment — UTF-8 byte offsets, as the API gives them) and a
``Sources:`` list, exactly as gemini-cli's ``web-search.ts`` formats it.

A client asks for it by naming it in ``tool_discovery.server_tools`` when
the server lists it among ``connected.capabilities``; so ``tools.core``,
``tools.exclude`` and ``--allowed-tools`` decide it on the client like any
other tool. It only reads, so it never needs approval (gemini-cli's
``Kind.Search``). It uses the session's model: the operator's
``--allowed-models`` apply to it too (gemini-cli uses a fixed flash model).
"""

from __future__ import annotations

from typing import Any

from gemini_split.protocol import ToolFailure, ToolSpec, Usage

from .base import GroundingChunk, Model, ModelError, ModelRequest, TextChunk, UsageChunk

NAME = "google_web_search"

#: gemini-cli's declaration (``default-legacy.ts``), word for word.
SPEC = ToolSpec(
    name=NAME,
    description=(
        "Performs a web search using Google Search (via the Gemini API) and returns the results. "
        "This tool is useful for finding information on the internet based on a query."
    ),
    parameters={
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "The search query to find information on the web."},
        },
        "required": ["query"],
    },
)


async def google_web_search(
    args: dict[str, Any], *, model: Model, model_name: str
) -> tuple[str | None, ToolFailure | None, Usage]:
    """Run one search. Returns ``(text for the model, None, usage)``, or
    ``(None, failure, usage)`` when the query is empty or the API call
    failed (code ``web_search_failed``, the API's message)."""
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        return None, ToolFailure(code="invalid_arguments", message="The 'query' parameter cannot be empty."), Usage()
    request = ModelRequest(
        model=model_name, contents=[{"role": "user", "parts": [{"text": query}]}], google_search=True
    )
    texts: list[str] = []
    grounding: dict[str, Any] | None = None
    usage = Usage()
    try:
        async for chunk in model.stream(request):
            if isinstance(chunk, TextChunk):
                texts.append(chunk.text)
            elif isinstance(chunk, GroundingChunk):
                grounding = chunk.metadata
            elif isinstance(chunk, UsageChunk):
                usage = chunk.usage
    except ModelError as exc:
        message = f'Error during web search for query "{query}": {exc}'
        return None, ToolFailure(code="web_search_failed", message=message), usage
    text = "".join(texts)
    if not text.strip():
        return f'No search results or information found for query: "{query}"', None, usage
    return f'Web search results for "{query}":\n\n{with_citations(text, grounding)}', None, usage


def with_citations(text: str, grounding: dict[str, Any] | None) -> str:
    """``text`` with ``[n]`` markers after each grounded segment and the
    ``Sources:`` list appended (unchanged without sources)."""
    if not grounding:
        return text
    sources = grounding.get("grounding_chunks") or []
    if not sources:
        return text
    insertions: list[tuple[int, str]] = []
    for support in grounding.get("grounding_supports") or []:
        segment = support.get("segment")
        indices = support.get("grounding_chunk_indices")
        if segment and indices:
            end = segment.get("end_index")
            if isinstance(end, int) and end >= 0:
                insertions.append((end, "".join(f"[{i + 1}]" for i in indices)))
    data = text.encode("utf-8")
    # From the end backwards, so earlier offsets stay valid; an offset past
    # the end (or inside a later insertion) is clamped, as gemini-cli does.
    pieces: list[bytes] = []
    last = len(data)
    for end, marker in sorted(insertions, key=lambda item: item[0], reverse=True):
        position = min(end, last)
        pieces.append(data[position:last])
        pieces.append(marker.encode())
        last = position
    pieces.append(data[:last])
    cited = b"".join(reversed(pieces)).decode("utf-8", "replace")
    listing = [
        f"[{i + 1}] {(s.get('web') or {}).get('title') or 'Untitled'} ({(s.get('web') or {}).get('uri') or 'No URI'})"
        for i, s in enumerate(sources)
    ]
    return cited + "\n\nSources:\n" + "\n".join(listing)
