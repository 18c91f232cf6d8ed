"""A model that replays a script: tests and demos without a network.

The script is a list of turns (:mod:`gemini_split.server.model.script_format`), the
format the fake Gemini server takes too; each model call consumes the
next turn:

* ``{"text": "...", "chunks": N, "thought": "..."}`` – text in N pieces,
  after an optional thought;
* ``{"function_calls": [{"name": ..., "args": {...}}], "text": "..."}``;
* ``{"error": {"status": 503, "message": "..."}}``;
* ``"system_contains": "…"`` – the turn is only for a call whose system
  instruction contains that text (a sub-agent's; see the fake server);
* any turn may add ``"delay"`` and ``"chunk_delay"`` (seconds; a
  ``chunk_delay`` under a microsecond only lets other tasks run between
  chunks).

Scripts are loaded and validated by the fake server's own ``load_script``,
so a typo in a key is an error, not a silently different script; the keys
that only make sense over HTTP (``raw``, ``abort_after``, ``usage``,
``finish_reason``) are accepted and ignored here.

When the script runs out the model echoes: ``Tool results: …`` after tool
results, else ``Echo: <last user text>``.

Use it from the command line with ``--model scripted:PATH.json``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import trio

from gemini_split.protocol import Usage

from .base import (
    Chunk,
    FunctionCallChunk,
    GroundingChunk,
    Model,
    ModelAuthError,
    ModelError,
    ModelRequest,
    PartChunk,
    TextChunk,
    ThoughtChunk,
    UsageChunk,
)
from .script_format import grounding_metadata, load_script, turn_matches


class ScriptedModel(Model):
    def __init__(self, turns: list[dict[str, Any]]):
        self.turns = list(turns)
        self.requests: list[ModelRequest] = []

    @classmethod
    def from_file(cls, path: str) -> ScriptedModel:
        """Raises ``OSError`` or ``ValueError`` (with the turn and key at
        fault) for a file that is not a valid script."""
        return cls(load_script(path))

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        self.requests.append(request)
        turn = next((t for t in self.turns if turn_matches(t, request.system_instruction or "")), None)
        if turn is not None:
            self.turns.remove(turn)
        else:
            turn = _echo_turn(request)
        if turn.get("delay"):
            await trio.sleep(float(turn["delay"]))
        if "error" in turn:
            error = turn["error"]
            status = int(error.get("status", 500))
            message = error.get("message", "scripted error")
            if status in (401, 403):
                raise ModelAuthError(f"the API refused the key ({status}): {message}", status=status)
            raise ModelError(f"scripted error {status}: {message}", status=status, retryable=status in (429, 500, 502, 503, 504))
        chunk_delay = float(turn.get("chunk_delay", 0))
        if turn.get("thought"):
            yield PartChunk({"text": turn["thought"], "thought": True})
            yield ThoughtChunk(turn["thought"])
        text = turn.get("text", "")
        for piece in _split(text, int(turn.get("chunks", 1))):
            if chunk_delay:
                await _pause(chunk_delay)
            yield PartChunk({"text": piece})
            yield TextChunk(piece)
        for call in turn.get("function_calls", []):
            part = {"function_call": {"name": call["name"], "args": call.get("args", {})}}
            yield PartChunk(part)
            yield FunctionCallChunk(name=call["name"], args=call.get("args", {}))
        grounding = grounding_metadata(turn) if request.google_search else None
        if grounding is not None:
            yield GroundingChunk(_snake_grounding(grounding))
        words = max(1, len(text.split()))
        yield UsageChunk(Usage(prompt_tokens=10, output_tokens=words, total_tokens=10 + words))


def _snake_grounding(meta: dict[str, Any]) -> dict[str, Any]:
    """The wire form's camelCase keys as google-genai's JSON form has them."""
    return {
        "grounding_chunks": meta["groundingChunks"],
        "grounding_supports": [
            {"segment": {"start_index": s["segment"]["startIndex"], "end_index": s["segment"]["endIndex"],
                         "text": s["segment"]["text"]},
             "grounding_chunk_indices": s["groundingChunkIndices"]}
            for s in meta["groundingSupports"]
        ],
        **({"web_search_queries": meta["webSearchQueries"]} if "webSearchQueries" in meta else {}),
    }


#: Delays below this are a pause point, not a wait: a Trio sleep that short
#: still goes through the timer queue (and the next poll), about 10× the cost
#: of a checkpoint; benchmarks use ``chunk_delay: 1e-9`` for "a chunk at a
#: time, as fast as possible".
_PAUSE_ONLY = 1e-6


async def _pause(seconds: float) -> None:
    if seconds < _PAUSE_ONLY:
        await trio.lowlevel.checkpoint()
    else:
        await trio.sleep(seconds)


def _split(text: str, pieces: int) -> list[str]:
    if not text:
        return []
    pieces = max(1, min(pieces, len(text)))
    size, extra = divmod(len(text), pieces)
    out, start = [], 0
    for i in range(pieces):
        end = start + size + (1 if i < extra else 0)
        out.append(text[start:end])
        start = end
    return out


def _echo_turn(request: ModelRequest) -> dict[str, Any]:
    last = request.contents[-1] if request.contents else {"parts": []}
    responses = [p["function_response"].get("response") for p in last.get("parts", []) if "function_response" in p]
    if responses:
        return {"text": "Tool results: " + " ".join(json.dumps(r, separators=(",", ":")) for r in responses)}
    # The first turn's session context (gemini-cli's <session_context> part) is not echoed.
    texts = [p.get("text", "") for p in last.get("parts", [])
             if "text" in p and not p.get("text", "").startswith("<session_context>")]
    return {"text": "Echo: " + "".join(texts)}
