"""The Gemini REST wire format's common shapes, read and written without pydantic.

google-genai turns every streamed chunk into typed pydantic objects (about
125 µs a chunk, measured: most of a server's CPU when it streams) and every
request's history back from dicts through the same types (about 0.1 ms a
part). The shapes a conversation almost always has are few: text and
thought parts, thought signatures, function calls and responses. This module
reads and writes exactly those with msgspec, and says ``None`` for anything
else, so the caller (:mod:`.gemini`) hands that chunk or that content to
google-genai's own typed conversion. The contract, checked by tests against
google-genai on the same bytes: whenever a function here returns a value, it
is the value google-genai's path would produce.

No google-genai import here: this module is pure and cheap to test.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, NamedTuple

import msgspec

from gemini_split.protocol import Usage

from .base import Chunk, FunctionCallChunk, PartChunk, TextChunk, ThoughtChunk, UsageChunk


# --- streamed responses ---------------------------------------------------------
#
# Parts and function calls forbid unknown fields: a part of any other kind
# (inline data, executable code, a function call with partial arguments…) is
# not ours to interpret, and goes to google-genai. Envelopes (response,
# candidate, content, usage) ignore the fields the agent loop never reads.


class _FunctionCall(msgspec.Struct, forbid_unknown_fields=True):
    name: str | None = None
    args: dict[str, Any] | None = None
    id: str | None = None


class _Part(msgspec.Struct, forbid_unknown_fields=True):
    text: str | None = None
    thought: bool | None = None
    thoughtSignature: str | None = None  # noqa: N815 - the wire's spelling
    functionCall: _FunctionCall | None = None  # noqa: N815


class _Content(msgspec.Struct):
    parts: list[_Part] | None = None


class _Candidate(msgspec.Struct):
    content: _Content | None = None
    finishReason: str | None = None  # noqa: N815
    continuationToken: str | None = None  # noqa: N815
    #: Read only to send such chunks to google-genai (a grounded answer).
    groundingMetadata: Any = None  # noqa: N815


class _UsageMetadata(msgspec.Struct):
    promptTokenCount: int | None = None  # noqa: N815
    candidatesTokenCount: int | None = None  # noqa: N815
    thoughtsTokenCount: int | None = None  # noqa: N815
    cachedContentTokenCount: int | None = None  # noqa: N815
    totalTokenCount: int | None = None  # noqa: N815
    toolUsePromptTokenCount: int | None = None  # noqa: N815


class _Response(msgspec.Struct):
    candidates: list[_Candidate] | None = None
    usageMetadata: _UsageMetadata | None = None  # noqa: N815
    #: Read only to send such chunks to google-genai.
    promptFeedback: Any = None  # noqa: N815
    error: Any = None


#: Finish reasons read here; any other (a safety block, a continuation…)
#: goes to google-genai.
FAST_FINISH_REASONS = frozenset({"STOP", "MAX_TOKENS"})


class FastChunk(NamedTuple):
    """What :func:`fast_chunks` read from one streamed response."""

    chunks: list[Chunk]
    finish_reason: str | None


_decode_response = msgspec.json.Decoder(_Response).decode


def fast_chunks(data: str | bytes) -> FastChunk | None:
    """The chunks of one streamed ``GenerateContentResponse`` (its JSON
    text), as :func:`gemini_split.server.model.gemini.chunks_of` makes them from
    google-genai's typed response, and its first candidate's finish reason;
    ``None`` when the response has anything this module does not read
    exactly like google-genai (the caller then uses google-genai): an
    error, prompt feedback, a continuation token, grounding metadata,
    another finish reason, a
    part of another kind, a value of another type.

    Raises nothing: text that is not JSON is ``None`` too."""
    try:
        response = _decode_response(data)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    if response.error is not None or response.promptFeedback is not None:
        return None
    out: list[Chunk] = []
    finish_reason = None
    candidates = response.candidates
    if candidates:
        candidate = candidates[0]
        finish_reason = candidate.finishReason
        if candidate.continuationToken is not None or candidate.groundingMetadata is not None or (
                finish_reason is not None and finish_reason not in FAST_FINISH_REASONS):
            return None
        parts = candidate.content.parts if candidate.content is not None else None
        for part in parts or ():
            dumped = _part_dump(part)
            if dumped is None:
                return None
            out.append(PartChunk(dumped))
            call = part.functionCall
            if call is not None:
                out.append(FunctionCallChunk(name=call.name or "", args=dict(call.args or {}), call_id=call.id))
            elif part.text:
                out.append(ThoughtChunk(part.text) if part.thought else TextChunk(part.text))
    meta = response.usageMetadata
    if meta is not None:
        out.append(UsageChunk(_usage(meta)))
    return FastChunk(out, finish_reason)


def plain_text(data: str | bytes) -> str | None:
    """The text of a streamed response that is one plain text part and
    nothing else (most of a long answer's events): no usage, finish
    reason, thought flag or signature, one candidate; ``None`` for any
    other response. Whenever it returns a text, :func:`fast_chunks` returns
    ``[PartChunk({"text": text}), TextChunk(text)]`` and no finish reason
    for the same bytes (tests/server/gemini checks it) — without building them."""
    try:
        response = _decode_response(data)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    candidates = response.candidates
    if (candidates is None or len(candidates) != 1 or response.usageMetadata is not None
            or response.error is not None or response.promptFeedback is not None):
        return None
    candidate = candidates[0]
    content = candidate.content
    if (content is None or candidate.finishReason is not None or candidate.continuationToken is not None
            or candidate.groundingMetadata is not None):
        return None
    parts = content.parts
    if parts is None or len(parts) != 1:
        return None
    part = parts[0]
    text = part.text
    if not text or part.thought is not None or part.thoughtSignature is not None or part.functionCall is not None:
        return None
    return text


def _part_dump(part: _Part) -> dict[str, Any] | None:
    """``Part.model_dump(mode="json", exclude_none=True)`` for our shapes."""
    out: dict[str, Any] = {}
    call = part.functionCall
    if call is not None:
        dumped: dict[str, Any] = {}
        if call.id is not None:
            dumped["id"] = call.id
        if call.args is not None:
            dumped["args"] = call.args
        if call.name is not None:
            dumped["name"] = call.name
        out["function_call"] = dumped
    if part.text is not None:
        out["text"] = part.text
    if part.thought is not None:
        out["thought"] = part.thought
    if part.thoughtSignature is not None:
        # pydantic reads the wire's base64 into bytes and dumps them
        # URL-safe; only a canonical standard encoding is taken here.
        signature = _standard_to_urlsafe(part.thoughtSignature)
        if signature is None:
            return None
        out["thought_signature"] = signature
    return out


def _standard_to_urlsafe(text: str) -> str | None:
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    if base64.b64encode(raw).decode("ascii") != text:
        return None
    return base64.urlsafe_b64encode(raw).decode("ascii")


def _usage(meta: _UsageMetadata) -> Usage:
    prompt = meta.promptTokenCount or 0
    output = meta.candidatesTokenCount or 0
    thinking = meta.thoughtsTokenCount or 0
    return Usage(
        prompt_tokens=prompt,
        output_tokens=output,
        thinking_tokens=thinking,
        cached_tokens=meta.cachedContentTokenCount or 0,
        total_tokens=meta.totalTokenCount or prompt + output + thinking,
        tool_tokens=meta.toolUsePromptTokenCount or 0,
    )


# --- requests ---------------------------------------------------------------------


def wire_content(content: Any) -> dict[str, Any] | None:
    """One history entry (google-genai's snake_case JSON form) in the
    request's wire form, as google-genai's ``_Content_to_mldev`` writes it;
    ``None`` for an entry of any other shape."""
    if type(content) is not dict or not set(content) <= {"role", "parts"}:
        return None
    role = content.get("role")
    parts = content.get("parts")
    if type(role) is not str or type(parts) is not list:
        return None
    out_parts = []
    for part in parts:
        wire = _wire_part(part)
        if wire is None:
            return None
        out_parts.append(wire)
    return {"parts": out_parts, "role": role}


def _wire_part(part: Any) -> dict[str, Any] | None:
    if type(part) is not dict:
        return None
    out: dict[str, Any] = {}
    for key, value in part.items():
        if key == "text":
            if type(value) is not str:
                return None
            out["text"] = value
        elif key == "thought":
            if type(value) is not bool:
                return None
            out["thought"] = value
        elif key == "thought_signature":
            if type(value) is not str or not _canonical_urlsafe(value):
                return None
            out["thoughtSignature"] = value
        elif key == "function_call":
            call = _plain_object(value, {"id", "args", "name"}, {"id": str, "name": str, "args": dict})
            if call is None:
                return None
            out["functionCall"] = call
        elif key == "function_response":
            response = _plain_object(value, {"id", "name", "response"}, {"id": str, "name": str, "response": dict})
            if response is None:
                return None
            out["functionResponse"] = response
        else:
            return None
    if not out:
        return None
    return out


def _plain_object(value: Any, keys: set[str], types: dict[str, type]) -> dict[str, Any] | None:
    """A copy of a small object whose values are JSON (strings, dicts of
    plain JSON), or None. Nested dicts must be JSON-safe as they are: no
    bytes, no None values google-genai would drop."""
    if type(value) is not dict or not set(value) <= keys:
        return None
    out = {}
    for key, item in value.items():
        if item is None:
            continue  # google-genai drops None fields
        if type(item) is not types[key]:
            return None
        if type(item) is dict and not _json_safe(item):
            return None
        out[key] = item
    return out


def _json_safe(value: Any, depth: int = 0) -> bool:
    """Only what json.dumps and msgspec write alike (no bytes, no NaN, no
    integer msgspec cannot write) and pydantic keeps as is (no None)."""
    if depth > 64:
        return False
    kind = type(value)
    if kind is str or kind is bool:
        return True
    if kind is int:
        return -(2**63) <= value < 2**63
    # None is not taken: google-genai may drop None values (exclude_none).
    if kind is float:
        return value == value and value not in (float("inf"), float("-inf"))
    if kind is dict:
        return all(type(k) is str and _json_safe(v, depth + 1) for k, v in value.items())
    if kind is list:
        return all(_json_safe(v, depth + 1) for v in value)
    return False


def _canonical_urlsafe(text: str) -> bool:
    try:
        raw = base64.urlsafe_b64decode(text.encode("ascii"))
    except (binascii.Error, ValueError, UnicodeEncodeError):
        return False
    return base64.urlsafe_b64encode(raw).decode("ascii") == text
