"""gemini-cli's telemetry events and metrics, built from what happens here.

Names, attributes and log bodies are gemini-cli 0.61's
(``packages/core/src/telemetry/types.ts``, ``loggers.ts``, ``metrics.ts``),
for the events gemini-split has. Which text may leave the process is decided
here and nowhere else: prompt text, tool arguments and the model's requests
and answers only with ``logPrompts``; secret values (:func:`redact`) never.

The records go to a :class:`Sink` (:mod:`.otel`: the OpenTelemetry SDK).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Mapping
from datetime import datetime, timezone
from typing import Any, Protocol

from . import Recorder

log = logging.getLogger(__name__)

#: gemini-cli's instrumentation scope (and service) name: its dashboards and
#: queries select on it.
SCOPE = "gemini-cli"
#: Text attributes longer than this (a whole conversation as
#: ``request_text``) are cut, saying how much was left out.
MAX_TEXT = 1024 * 1024

#: name → (kind, description, unit), as gemini-cli declares them.
INSTRUMENTS: dict[str, tuple[str, str, str]] = {
    "gemini_cli.session.count": ("counter", "Count of CLI sessions started.", ""),
    "gemini_cli.tool.call.count": ("counter", "Counts tool calls, tagged by function name and success.", ""),
    "gemini_cli.tool.call.latency": ("histogram", "Latency of tool calls in milliseconds.", "ms"),
    "gemini_cli.api.request.count": ("counter", "Counts API requests, tagged by model and status.", ""),
    "gemini_cli.api.request.latency": ("histogram", "Latency of API requests in milliseconds.", "ms"),
    "gemini_cli.token.usage": ("counter", "Counts the total number of tokens used.", ""),
    "gemini_cli.chat_compression": ("counter", "Counts chat compression events.", ""),
    "gen_ai.client.token.usage": ("histogram", "Number of input and output tokens used.", "token"),
    "gen_ai.client.operation.duration": ("histogram", "GenAI operation duration.", "s"),
}


class Sink(Protocol):
    """Where records go: log records and metric instruments by name."""

    def emit(self, body: str, attributes: dict[str, Any]) -> None: ...

    def add(self, name: str, value: int, attributes: dict[str, Any]) -> None: ...

    def record(self, name: str, value: float, attributes: dict[str, Any]) -> None: ...

    def close(self, budget: float) -> None: ...


class EventRecorder(Recorder):
    """The recording :class:`~gemini_split.telemetry.Recorder` (see there
    for each method). ``role`` (``client``, ``server``, ``embedded``)
    decides whether metrics carry ``session.id`` (not a server's);
    ``common`` attributes go on every record; ``secrets`` never leave."""

    enabled = True

    def __init__(self, sink: Sink, *, log_prompts: bool, role: str, common: Mapping[str, Any],
                 secrets: Collection[str] = ()):
        self.sink = sink
        self.log_prompts = log_prompts
        self.role = role
        self.common = dict(common)
        self.secrets = tuple(secrets)
        self._session_counted = False

    # --- building blocks ------------------------------------------------------

    def _text(self, text: str) -> str:
        text = redact(text, self.secrets)
        if len(text) > MAX_TEXT:
            text = f"{text[:MAX_TEXT]}…[{len(text) - MAX_TEXT} more characters]"
        return text

    def _event(self, name: str, body: str, session_id: str | None, attributes: dict[str, Any]) -> None:
        record = dict(self.common)
        if session_id:
            record["session.id"] = session_id
        record["event.name"] = name
        record["event.timestamp"] = _now_iso()
        record.update((k, v) for k, v in attributes.items() if v is not None)
        for key, value in record.items():
            if isinstance(value, str):
                record[key] = self._text(value)
        try:
            self.sink.emit(self._text(body), record)
        except Exception:  # telemetry must never break what it watches
            log.debug("telemetry: could not record %s", name, exc_info=True)

    def _metric_attributes(self, session_id: str | None, attributes: dict[str, Any]) -> dict[str, Any]:
        out = dict(self.common)
        if session_id and self.role != "server":
            out["session.id"] = session_id
        out.update((k, v) for k, v in attributes.items() if v is not None)
        return out

    def _add(self, name: str, value: int, session_id: str | None, attributes: dict[str, Any]) -> None:
        try:
            self.sink.add(name, value, self._metric_attributes(session_id, attributes))
        except Exception:
            log.debug("telemetry: could not count %s", name, exc_info=True)

    def _record(self, name: str, value: float, session_id: str | None, attributes: dict[str, Any]) -> None:
        try:
            self.sink.record(name, value, self._metric_attributes(session_id, attributes))
        except Exception:
            log.debug("telemetry: could not record %s", name, exc_info=True)

    # --- the events -------------------------------------------------------------

    def config(self, attributes: dict[str, Any]) -> None:
        """``gemini_cli.config`` (the process's configuration at start) and,
        for a client, one ``gemini_cli.session.count``."""
        self._event("gemini_cli.config", "CLI configuration loaded.", None, attributes)
        if not self._session_counted and self.role != "server":  # a server counts no CLI start
            self._session_counted = True
            self._add("gemini_cli.session.count", 1, None, {})

    def user_prompt(self, prompt: str, *, prompt_id: str, session_id: str | None) -> None:
        attributes: dict[str, Any] = {"prompt_length": len(prompt), "prompt_id": prompt_id}
        if self.log_prompts:
            attributes["prompt"] = prompt
        self._event("gemini_cli.user_prompt", f"User prompt. Length: {len(prompt)}.", session_id, attributes)

    def tool_call(self, name: str, args: Any, *, duration_ms: int, success: bool, decision: str | None,
                  prompt_id: str | None, session_id: str | None, error: str | None = None,
                  error_type: str | None = None, mcp_server_name: str | None = None,
                  content_length: int | None = None) -> None:
        tool_type = "mcp" if mcp_server_name else "native"
        attributes: dict[str, Any] = {
            "function_name": name, "duration_ms": duration_ms, "success": success, "decision": decision,
            "prompt_id": prompt_id, "tool_type": tool_type, "mcp_server_name": mcp_server_name,
            "content_length": content_length,
        }
        if self.log_prompts and args:
            attributes["function_args"] = json.dumps(args, indent=2, ensure_ascii=False, default=str)
        if error_type:
            attributes.update({"error_type": error_type, "error.type": error_type})
        if error and self.log_prompts:  # a tool's message may quote the file it read
            attributes.update({"error": error, "error.message": error})
        body = (f"Tool call: {name}{f'. Decision: {decision}' if decision else ''}. Success: "
                f"{'true' if success else 'false'}. Duration: {duration_ms}ms.")
        self._event("gemini_cli.tool_call", body, session_id, attributes)
        self._add("gemini_cli.tool.call.count", 1, session_id, {
            "function_name": name, "success": success, "decision": decision, "tool_type": tool_type})
        self._record("gemini_cli.tool.call.latency", duration_ms, session_id, {"function_name": name})

    def api_request(self, *, model: str, prompt_id: str, session_id: str | None, contents: Any) -> None:
        attributes: dict[str, Any] = {"model": model, "prompt_id": prompt_id, "role": "main"}
        if self.log_prompts:
            attributes["request_text"] = _json(contents)
        self._event("gemini_cli.api_request", f"API request to {model}.", session_id, attributes)

    def api_response(self, *, model: str, duration_ms: int, usage: Any, prompt_id: str, session_id: str | None,
                     parts: Any) -> None:
        counts = {
            "input": getattr(usage, "prompt_tokens", 0),
            "output": getattr(usage, "output_tokens", 0),
            "cache": getattr(usage, "cached_tokens", 0),
            "thought": getattr(usage, "thinking_tokens", 0),
            "tool": getattr(usage, "tool_tokens", 0),
        }
        attributes: dict[str, Any] = {
            "model": model, "duration_ms": duration_ms,
            "input_token_count": counts["input"], "output_token_count": counts["output"],
            "cached_content_token_count": counts["cache"], "thoughts_token_count": counts["thought"],
            "tool_token_count": counts["tool"], "total_token_count": getattr(usage, "total_tokens", 0),
            "prompt_id": prompt_id, "status_code": 200, "http.status_code": 200, "role": "main",
        }
        if self.log_prompts:
            attributes["response_text"] = _json([{"role": "model", "parts": parts}])
        self._event("gemini_cli.api_response",
                    f"API response from {model}. Status: 200. Duration: {duration_ms}ms.", session_id, attributes)
        self._add("gemini_cli.api.request.count", 1, session_id, {"model": model, "status_code": 200})
        self._record("gemini_cli.api.request.latency", duration_ms, session_id, {"model": model})
        for kind, count in counts.items():
            self._add("gemini_cli.token.usage", count, session_id, {"model": model, "type": kind})
        convention = _convention(model)
        self._record("gen_ai.client.operation.duration", duration_ms / 1000, session_id, convention)
        for kind in ("input", "output"):
            self._record("gen_ai.client.token.usage", counts[kind], session_id,
                         {**convention, "gen_ai.token.type": kind})

    def api_error(self, *, model: str, error: str, error_type: str, status_code: int | None, duration_ms: int,
                  prompt_id: str, session_id: str | None) -> None:
        attributes: dict[str, Any] = {
            "error.message": error, "model_name": model, "duration": duration_ms, "model": model, "error": error,
            "status_code": status_code, "duration_ms": duration_ms, "prompt_id": prompt_id, "role": "main",
            "error.type": error_type, "error_type": error_type,
        }
        if status_code is not None:
            attributes["http.status_code"] = status_code
        self._event("gemini_cli.api_error",
                    f"API error for {model}. Error: {error}. Duration: {duration_ms}ms.", session_id, attributes)
        self._add("gemini_cli.api.request.count", 1, session_id, {
            "model": model, "status_code": status_code if status_code is not None else "error",
            "error_type": error_type})
        self._record("gemini_cli.api.request.latency", duration_ms, session_id, {"model": model})
        self._record("gen_ai.client.operation.duration", duration_ms / 1000, session_id,
                     {**_convention(model), "error.type": error_type})

    def chat_compression(self, *, tokens_before: int, tokens_after: int, prompt_id: str | None,
                         session_id: str | None) -> None:
        counts = {"tokens_before": tokens_before, "tokens_after": tokens_after}
        self._event("gemini_cli.chat_compression",
                    f"Chat compression (Saved {tokens_before - tokens_after} tokens)", session_id,
                    {**counts, "prompt_id": prompt_id})
        self._add("gemini_cli.chat_compression", 1, session_id, counts)

    def close(self, budget: float = 1.0) -> None:
        self.sink.close(budget)


def redact(text: str, secrets: Collection[str]) -> str:
    """``text`` with every secret in it replaced by ``[REDACTED]``."""
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, "[REDACTED]")
    return text


def _convention(model: str) -> dict[str, Any]:
    """The OpenTelemetry GenAI attributes gemini-cli puts on ``gen_ai.*`` metrics."""
    return {"gen_ai.operation.name": "generate_content", "gen_ai.provider.name": "gcp.gen_ai",
            "gen_ai.request.model": model, "gen_ai.response.model": model}


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _now_iso() -> str:
    """gemini-cli's ``event.timestamp``: ISO 8601 in UTC with milliseconds."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
