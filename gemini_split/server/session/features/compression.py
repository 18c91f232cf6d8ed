"""Compressing a session's history, as gemini-cli compresses a chat.

The older part of the conversation becomes a summary the model writes (a
``<state_snapshot>``, gemini-cli's form); the project context (the first
turn's ``<session_context>``) and the last exchanges — about the last 30 %
of the history, from a prompt the user typed on — are kept whole, so the
history stays one the API accepts. The system instruction is not in the
history and is untouched. One implementation for ``/compress`` (a
``compress`` request: :class:`CompressBody`) and for the automatic path
(:class:`AutoCompression`, before each model call of a request's main
agent, once the last prompt passed ``threshold`` of the model's context
window).

:func:`compress` either returns the new history or raises
:class:`CompressionFailed` with the reason; the history it was given is
never changed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from gemini_split import telemetry
from gemini_split.protocol import Compressed, ErrorCode, Usage

from ...model.base import Model, ModelError, ModelRequest, TextChunk, UsageChunk
from ..chain import AgentRun, Emit
from ..priority import Pace
from ..request.run import Outcome, RequestFailed

log = logging.getLogger(__name__)

#: gemini-cli's default ``model.compressionThreshold``.
DEFAULT_THRESHOLD = 0.5
#: The share of the history (by size) kept whole after a compression.
KEEP_FRACTION = 0.3
#: The model's answer after the summary, as gemini-cli writes it.
ACKNOWLEDGEMENT = "Got it. Thanks for the additional context!"
#: Context windows (tokens) by model name prefix; gemini-cli's table.
_CONTEXT_WINDOWS = (("gemini-1.5-pro", 2_097_152),)
DEFAULT_CONTEXT_WINDOW = 1_048_576

SUMMARY_INSTRUCTION = """\
You are the component that summarizes internal chat history into a given structure.

When the conversation history grows too large, you will be invoked to distill the entire history into a concise, \
structured XML snapshot. This snapshot is CRITICAL, as it will become the agent's *only* memory of the past. The \
agent will resume its work based solely on this snapshot. All crucial details, plans, errors, and user directives \
MUST be preserved.

First, you will think through the entire history in a private <scratchpad>. Review the user's overall goal, the \
agent's actions, tool outputs, file modifications, and any unresolved questions. Identify every piece of \
information that is essential for future actions.

After your reasoning is complete, generate the final <state_snapshot> XML object. Be incredibly dense with \
information. Omit any irrelevant conversational filler.

The structure MUST be as follows:

<state_snapshot>
    <overall_goal>The user's high-level objective, in one sentence.</overall_goal>
    <key_knowledge>Crucial facts, conventions and constraints the agent must remember, as bullet points.</key_knowledge>
    <file_system_state>Files created, read, modified or deleted, and what was learned about them.</file_system_state>
    <recent_actions>The last few significant actions and their outcomes.</recent_actions>
    <current_plan>The step-by-step plan, each step marked [DONE], [IN PROGRESS] or [TODO].</current_plan>
</state_snapshot>
"""
SUMMARY_REQUEST = "First, reason in your scratchpad. Then, generate the <state_snapshot>."


class CompressionFailed(RequestFailed):
    """Nothing was compressed; the message says why (the history is as it
    was). A ``compress`` request ends with it (``invalid_request``)."""

    code = ErrorCode.INVALID_REQUEST


@dataclass(frozen=True)
class Compression:
    """A compressed history and what it cost."""

    history: list[dict[str, Any]]
    before_tokens: int
    after_tokens: int
    #: The summary call's usage (added to the request's).
    usage: Usage


def context_window(model_name: str) -> int:
    """The model's context window in tokens (gemini-cli's figures)."""
    for prefix, window in _CONTEXT_WINDOWS:
        if model_name.startswith(prefix):
            return window
    return DEFAULT_CONTEXT_WINDOW


def due(last_prompt_tokens: int, model_name: str, threshold: float | None) -> bool:
    """Whether the history must be compressed before the next model call:
    the last prompt took more than ``threshold`` (None: the default) of the
    model's context window."""
    limit = (threshold if threshold is not None else DEFAULT_THRESHOLD) * context_window(model_name)
    return last_prompt_tokens > limit


async def compress(history: list[dict[str, Any]], *, model: Model, model_name: str,
                   prompt_tokens: int | None) -> Compression:
    """The history with its older part summarised by ``model``.
    ``prompt_tokens``: the last prompt's size as the API counted it (None:
    estimated here, as the size after is). Raises :class:`CompressionFailed`."""
    sizes = [_size(message) for message in history]
    split = _split_point(history, sizes)
    if split is None:
        raise CompressionFailed("there is nothing to compress yet: the history is the last exchange alone")
    older, kept = history[:split], history[split:]
    summary, usage = await _summary(older, model=model, model_name=model_name)
    new = [_first_turn(older[0], summary), {"role": "model", "parts": [{"text": ACKNOWLEDGEMENT}]}, *kept]
    before_size, after_size = sum(sizes), sum(_size(m) for m in new)
    if after_size >= before_size:
        raise CompressionFailed("the summary would be longer than what it replaces; the history is unchanged")
    before = prompt_tokens if prompt_tokens else before_size // 4  # as estimated_tokens
    return Compression(new, before, max(1, round(before * after_size / before_size)), usage)


def _split_point(history: list[dict[str, Any]], sizes: list[int]) -> int | None:
    """The index of the first message kept whole: a prompt the user typed
    (not a tool's answer), after at least 70 % of the history's size and
    after the first message; None if there is none."""
    total = sum(sizes)
    seen = 0
    for index, message in enumerate(history):
        if index > 0 and seen >= total * (1 - KEEP_FRACTION) and _typed_prompt(message):
            return index
        seen += sizes[index]
    # A history of one long exchange: keep the last typed prompt on.
    last = max((i for i, m in enumerate(history) if i > 0 and _typed_prompt(m)), default=None)
    return last


def _typed_prompt(message: dict[str, Any]) -> bool:
    parts = message.get("parts") or []
    return message.get("role") == "user" and bool(parts) and all(
        isinstance(p, dict) and "function_response" not in p and "functionResponse" not in p for p in parts)


def _first_turn(first: dict[str, Any], summary: str) -> dict[str, Any]:
    """The new first message: the session's project context, kept whole,
    then the summary."""
    context = [p for p in first.get("parts") or []
               if isinstance(p, dict) and str(p.get("text", "")).startswith("<session_context>")]
    return {"role": "user", "parts": [*context, {"text": summary}]}


async def _summary(older: list[dict[str, Any]], *, model: Model, model_name: str) -> tuple[str, Usage]:
    request = ModelRequest(model=model_name, contents=[*older, {"role": "user", "parts": [{"text": SUMMARY_REQUEST}]}],
                           system_instruction=SUMMARY_INSTRUCTION)
    texts: list[str] = []
    usage = Usage()
    async for chunk in model.stream(request):
        if isinstance(chunk, TextChunk):
            texts.append(chunk.text)
        elif isinstance(chunk, UsageChunk):
            usage = chunk.usage
    summary = "".join(texts).strip()
    if not summary:
        raise CompressionFailed("the model wrote no summary; the history is unchanged")
    return summary, usage


def estimated_tokens(history: list[dict[str, Any]]) -> int:
    """A history's size in tokens, estimated (four bytes of JSON a token)
    where the API's count is not known (a session restored from the store)."""
    return sum(_size(message) for message in history) // 4


def _size(message: dict[str, Any]) -> int:
    return len(msgspec.json.encode(message))


class AutoCompression:
    """The automatic compression, told each model turn of a request's main
    agent before it runs (gemini-cli's automatic chat compression): when
    the last prompt passed the session's threshold, the history is
    compressed first, said with a ``compressed`` event and told to
    ``on_compressed(old, new)`` (the rewind timeline keeps what it
    dropped). A failure leaves the history as it was, is logged, and is
    not tried again this request."""

    def __init__(self, *, model: Model, emit: Emit,
                 on_compressed: Callable[[list[dict[str, Any]], list[dict[str, Any]]], None]):
        self.model = model
        self.emit = emit
        self.on_compressed = on_compressed
        self.failed = False

    async def __call__(self, run: AgentRun) -> None:
        threshold = getattr(run.context, "compression_threshold", None)
        if self.failed or not due(run.last_prompt_tokens, run.model_name, threshold):
            return
        try:
            done = await compress(run.history, model=self.model, model_name=run.model_name,
                                  prompt_tokens=run.last_prompt_tokens)
        except (CompressionFailed, ModelError) as exc:
            log.warning("request %s: the history was not compressed: %s", run.request_id, exc)
            self.failed = True
            return
        self.on_compressed(list(run.history), done.history)
        run.history[:] = done.history
        run.usage = run.usage + done.usage
        run.last_prompt_tokens = done.after_tokens
        telemetry.current().chat_compression(tokens_before=done.before_tokens, tokens_after=done.after_tokens,
                                             prompt_id=run.request_id, session_id=run.session_id)
        await self.emit(Compressed(request_id=run.request_id, before_tokens=done.before_tokens,
                                   after_tokens=done.after_tokens, automatic=True))


class CompressBody:
    """A ``compress`` request (``/compress``): the session's history
    compressed (saved before ``compressed`` is sent) or, on any failure,
    as it was. ``session``: its ``history``, ``model``, ``model_name``,
    ``last_prompt_tokens``, ``timeline`` and ``id``."""

    paced = False

    def __init__(self, session: Any, request_id: str):
        self.session = session
        self.request_id = request_id
        self.done: Compression | None = None

    async def run(self, pace: Pace | None) -> None:
        session = self.session
        self.done = await compress(session.history, model=session.model, model_name=session.model_name,
                                   prompt_tokens=session.last_prompt_tokens or None)

    def ended(self) -> None:
        pass

    def outcome(self) -> Outcome:
        done, session = self.done, self.session
        if done is None:
            return Outcome(save=False)
        session.timeline.compressed(list(session.history), done.history)
        session.history[:] = done.history
        session.last_prompt_tokens = done.after_tokens
        telemetry.current().chat_compression(tokens_before=done.before_tokens, tokens_after=done.after_tokens,
                                             prompt_id=self.request_id, session_id=session.id)
        return Outcome(usage=done.usage, told=(Compressed(request_id=self.request_id,
                                                          before_tokens=done.before_tokens,
                                                          after_tokens=done.after_tokens),))
