"""The model side of the agent loop, behind one small interface.

The agent loop sees a :class:`Model`: give it the conversation (Gemini
``Content`` objects as JSON dicts) and the tools, get back a stream of
chunks. :mod:`gemini_split.server.model.gemini` implements it with google-genai;
:mod:`gemini_split.server.model.scripted` replays a script, so tests and demos run
without a network.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import msgspec

from gemini_split.errors import GeminiSplitError
from gemini_split.protocol import ToolSpec, Usage


@dataclass(frozen=True)
class ModelRequest:
    model: str
    #: The conversation: ``{"role": "user"|"model", "parts": [...]}`` dicts in
    #: google-genai's JSON form (snake_case keys).
    contents: list[dict[str, Any]]
    tools: list[ToolSpec] = field(default_factory=list)
    system_instruction: str | None = None
    #: Ground the answer with Google Search (the API's ``google_search``
    #: tool) instead of offering function tools.
    google_search: bool = False
    #: The generation's temperature (None: the model's default); a
    #: sub-agent's definition may set it.
    temperature: float | None = None


class _Chunk(msgspec.Struct, frozen=True):
    """A model's stream yields thousands of these a second: msgspec Structs
    (immutable, compared by value) cost a tenth of a frozen dataclass."""


class TextChunk(_Chunk):
    text: str


class ThoughtChunk(_Chunk):
    text: str


class FunctionCallChunk(_Chunk):
    name: str
    args: dict[str, Any]
    #: The model's own call id, when it gives one (echoed in the response).
    call_id: str | None = None


class UsageChunk(_Chunk):
    usage: Usage


class PartChunk(_Chunk):
    """The model's raw part, kept verbatim for the conversation history (it
    may carry a thought signature the model needs to see again)."""

    part: dict[str, Any]


class GroundingChunk(_Chunk):
    """The Google Search grounding of a grounded answer: the API's
    ``groundingMetadata`` in google-genai's JSON form (snake_case:
    ``grounding_chunks``, ``grounding_supports``, ``web_search_queries``)."""

    metadata: dict[str, Any]


Chunk = TextChunk | ThoughtChunk | FunctionCallChunk | UsageChunk | PartChunk | GroundingChunk


class ModelError(GeminiSplitError):
    """The model call failed. ``retryable`` errors are worth repeating after
    a pause (429, 5xx, a dropped connection); ``status`` is the HTTP status
    when there was one; ``retry_after`` the delay the API asked for."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after


class ModelAuthError(ModelError):
    """The API refused the key (401/403, or a 400 that says the key is bad)."""


class Model(ABC):
    """Streams one model call. Implementations must be safe to use from many
    sessions at once."""

    @abstractmethod
    def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        """Yield the chunks of one call, in order, then return.

        For each model part: a :class:`PartChunk` with the raw part, then the
        :class:`TextChunk`, :class:`ThoughtChunk` or
        :class:`FunctionCallChunk` it means; a :class:`UsageChunk` when the
        API reports usage; a :class:`GroundingChunk` when a
        ``google_search`` request's answer carries grounding metadata. Raises :class:`ModelError` on failure. Cancelling
        the consumer stops the call at once."""

    def warm_up(self, model: str) -> None:
        """Build now, before the first request, whatever the first call of
        ``model`` would otherwise build on its way (a server calls it once
        at start). No I/O."""

    async def release_idle(self) -> None:
        """Close the connections no request is using now (the server went
        quiet: kept-alive connections hold memory an idle server does not
        need). The next request opens new ones; requests running now go on.
        Nothing to do for a model without connections."""

    async def aclose(self) -> None:
        """Release connections. Idempotent."""
