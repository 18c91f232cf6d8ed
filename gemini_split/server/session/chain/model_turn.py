"""One model turn: the model called with the run's history, its output
streamed as events, retried on transient errors, its parts appended to the
history."""

from __future__ import annotations

import logging
import random
from typing import Any

import trio

from gemini_split import telemetry
from gemini_split.protocol import Retrying, TextDelta, ThinkingDelta, Usage

from ...config import ServerConfig
from ...model.base import (
    FunctionCallChunk,
    Model,
    ModelError,
    ModelRequest,
    PartChunk,
    TextChunk,
    ThoughtChunk,
    UsageChunk,
)
from .state import AgentRun, Emit, api_error_type

log = logging.getLogger(__name__)


async def model_turn(run: AgentRun, *, model: Model, config: ServerConfig, emit: Emit) -> list[FunctionCallChunk]:
    """One model call of ``run`` (its history, tools and instruction),
    retried on transient errors; the model's parts are appended to the
    history (on cancellation too, minus unanswerable calls). Returns the
    calls it made."""
    request = ModelRequest(
        model=run.model_name,
        contents=list(run.history),
        tools=run.tools + run.extra_tools,
        system_instruction=run.system_instruction,
        temperature=run.temperature,
    )
    agent_id = run.agent_id
    if run.turns == 1 and log.isEnabledFor(logging.DEBUG):
        # One record per line: the log keeps each record to one bounded line.
        text = request.system_instruction or ""
        log.debug("system instruction (%d characters):", len(text))
        for line in text.splitlines():
            log.debug("  | %s", line)
    pace = run.pace
    recorder = telemetry.current()
    attempt = 1
    while True:
        parts: list[dict[str, Any]] = []
        calls: list[FunctionCallChunk] = []
        usage = Usage()
        recorder.api_request(model=run.model_name, prompt_id=run.request_id, session_id=run.session_id,
                             contents=request.contents)
        began = trio.current_time()
        try:
            async for chunk in model.stream(request):
                if isinstance(chunk, PartChunk):
                    parts.append(chunk.part)
                elif isinstance(chunk, TextChunk):
                    await emit(TextDelta(request_id=run.request_id, content=chunk.text, agent_id=agent_id))
                    if pace is not None:
                        await pace.pace()
                elif isinstance(chunk, ThoughtChunk):
                    await emit(ThinkingDelta(request_id=run.request_id, content=chunk.text, agent_id=agent_id))
                    if pace is not None:
                        await pace.pace()
                elif isinstance(chunk, FunctionCallChunk):
                    calls.append(chunk)
                    if pace is not None:
                        pace.output()
                elif isinstance(chunk, UsageChunk):
                    # Streaming APIs report running totals; the last one counts.
                    usage = chunk.usage
            run.usage = run.usage + usage
            run.last_prompt_tokens = usage.prompt_tokens or run.last_prompt_tokens
            run.api.record(trio.current_time() - began)
            recorder.api_response(model=run.model_name, duration_ms=int((trio.current_time() - began) * 1000),
                                  usage=usage, prompt_id=run.request_id, session_id=run.session_id,
                                  parts=parts)
        except ModelError as exc:
            run.api.record(trio.current_time() - began, error_type=api_error_type(exc))
            recorder.api_error(model=run.model_name, error=str(exc), error_type=api_error_type(exc),
                               status_code=exc.status, duration_ms=int((trio.current_time() - began) * 1000),
                               prompt_id=run.request_id, session_id=run.session_id)
            if parts or not exc.retryable or attempt >= config.max_attempts:
                # Output already reached the user: repeating would duplicate it.
                _keep_partial(run, parts)
                raise
            delay = _backoff(attempt, config, exc.retry_after)
            await emit(Retrying(
                request_id=run.request_id, attempt=attempt + 1,
                max_attempts=config.max_attempts, delay=round(delay, 2), error=str(exc), agent_id=agent_id,
            ))
            log.info("model call failed (%s); retry %d/%d in %.1fs", exc, attempt + 1, config.max_attempts, delay)
            await trio.sleep(delay)
            attempt += 1
            continue
        except BaseException:
            _keep_partial(run, parts)
            raise
        if parts:
            run.history.append({"role": "model", "parts": merge_text_parts(parts)})
        return calls


def _keep_partial(run: AgentRun, parts: list[dict[str, Any]]) -> None:
    """Keep streamed text of an interrupted call; drop its function calls,
    which will never get responses."""
    kept = [p for p in parts if "function_call" not in p]
    if kept:
        run.history.append({"role": "model", "parts": merge_text_parts(kept)})


def merge_text_parts(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Join adjacent plain text parts (same ``thought`` flag, nothing else on
    them) into one.

    A streamed answer arrives as one part per chunk; kept as is, a long
    answer becomes thousands of parts that every later request re-sends and
    re-validates. Parts carrying anything else (a thought signature, a
    function call) are kept exactly as the model sent them. Linear: each
    run of texts is joined once (a 50 MB answer must not block the server)."""
    merged: list[dict[str, Any]] = []
    run: list[str] = []  # texts of the plain run that ends merged[-1]

    def close_run() -> None:
        if len(run) > 1:
            merged[-1] = {**merged[-1], "text": "".join(run)}

    for part in parts:
        prev = merged[-1] if merged else None
        if run and _plain_text(part) and prev.get("thought") == part.get("thought"):
            run.append(part["text"])
            continue
        close_run()
        merged.append(part)
        run = [part["text"]] if _plain_text(part) else []
    close_run()
    return merged


def _plain_text(part: dict[str, Any]) -> bool:
    return isinstance(part.get("text"), str) and set(part) <= {"text", "thought"}


def _backoff(attempt: int, config: ServerConfig, retry_after: float | None) -> float:
    """The wait before retry ``attempt + 1``, as gemini-cli waits: the base
    delay doubling per attempt up to the ceiling, ±30 % jitter (it spreads
    many sessions retrying after one outage); a wait the API asked for
    (``RetryInfo``) is waited at least, plus up to 20 %."""
    delay = min(config.retry_base_delay * (2 ** (attempt - 1)), config.retry_max_delay)
    if retry_after is not None:
        return max(delay, retry_after) * (1 + 0.2 * random.random())
    return delay * random.uniform(0.7, 1.3)
