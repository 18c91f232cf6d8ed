"""One-shot output: ``--output-format text | json | stream-json``.

* ``text``: the answer on stdout as it streams; progress (tool calls,
  retries) and warnings on stderr.
* ``json``: one object at the end: ``response``, ``stats``, ``error``.
* ``stream-json``: one JSON object per line as things happen: ``init``,
  ``message``, ``tool_use``, ``tool_result``, ``error``, ``result``.

The names and fields follow gemini-cli's headless output, so scripts written
for it work. Deliberately light on imports: this is on the one-shot path.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import IO, Any

from gemini_split.exit_status import ExitStatus, exit_status_for
from gemini_split.protocol import (
    Error,
    Finished,
    Retrying,
    ServerEvent,
    TextDelta,
    ToolCompleted,
    ToolError,
    ToolStarted,
    Usage,
)

from .output_formats import OUTPUT_FORMATS  # re-exported: the renderers below are these


@dataclass
class _ToolStats:
    count: int = 0
    success: int = 0
    fail: int = 0


@dataclass
class RunStats:
    """What a one-shot run did, for ``json`` and ``stream-json``."""

    model: str = ""
    usage: Usage = field(default_factory=Usage)
    turns: int = 0
    started: float = field(default_factory=time.monotonic)
    tools: dict[str, _ToolStats] = field(default_factory=dict)

    def tool(self, name: str) -> _ToolStats:
        return self.tools.setdefault(name, _ToolStats())

    @property
    def duration_ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)

    def as_gemini_cli_stats(self) -> dict[str, Any]:
        u = self.usage
        return {
            "models": {
                self.model or "unknown": {
                    "api": {"totalRequests": self.turns, "totalLatencyMs": self.duration_ms},
                    "tokens": {
                        "prompt": u.prompt_tokens,
                        "candidates": u.output_tokens,
                        "thoughts": u.thinking_tokens,
                        "cached": u.cached_tokens,
                        "total": u.total_tokens,
                    },
                }
            },
            "tools": {
                "totalCalls": sum(t.count for t in self.tools.values()),
                "totalSuccess": sum(t.success for t in self.tools.values()),
                "totalFail": sum(t.fail for t in self.tools.values()),
                "byName": {
                    name: {"count": t.count, "success": t.success, "fail": t.fail}
                    for name, t in self.tools.items()
                },
            },
        }


class OneShotRenderer:
    """Base: tracks stats and the answer; subclasses decide what to print.

    Call :meth:`start` once connected, feed every event to :meth:`on_event`,
    then :meth:`finish` (with the request's final event, or an error text for
    failures outside the protocol) which prints the ending and returns the
    exit status."""

    def __init__(self, stdout: IO[str], stderr: IO[str]):
        self.stdout = stdout
        self.stderr = stderr
        self.stats = RunStats()
        self.response: list[str] = []
        self.session_id = ""

    def start(self, *, session_id: str, model: str, prompt: str) -> None:
        self.session_id = session_id
        self.stats.model = model

    async def on_event(self, event: ServerEvent) -> None:
        if isinstance(event, TextDelta):
            self.response.append(event.content)
        elif isinstance(event, ToolStarted):
            self.stats.tool(event.tool).count += 1
        elif isinstance(event, ToolCompleted):
            self.stats.tool(event.tool).success += 1
        elif isinstance(event, ToolError):
            self.stats.tool(event.tool).fail += 1
        elif isinstance(event, Finished):
            self.stats.usage = event.usage
            self.stats.turns = event.turns
        self.show(event)

    def show(self, event: ServerEvent) -> None:
        """Print what this format prints for an event as it arrives."""

    def finish(self, *, error_code: str | None = None, error_message: str | None = None,
               status: ExitStatus | None = None) -> ExitStatus:
        if status is None:
            status = exit_status_for(error_code) if error_code else ExitStatus.SUCCESS
        self.end(status, error_code, error_message)
        return status

    def end(self, status: ExitStatus, error_code: str | None, error_message: str | None) -> None:
        """Print the ending."""


class TextRenderer(OneShotRenderer):
    def show(self, event: ServerEvent) -> None:
        if isinstance(event, TextDelta):
            self.stdout.write(event.content)
            self.stdout.flush()
        elif isinstance(event, ToolStarted):
            self._progress(f"→ {event.tool}({_short_args(event.parameters)})")
        elif isinstance(event, ToolError):
            self._progress(f"✗ {event.tool}: {event.error.message}")
        elif isinstance(event, Retrying):
            self._progress(f"model call failed ({event.error}); retry {event.attempt}/{event.max_attempts} in {event.delay:.1f}s")

    def end(self, status: ExitStatus, error_code: str | None, error_message: str | None) -> None:
        text = "".join(self.response)
        if text and not text.endswith("\n"):
            self.stdout.write("\n")
            self.stdout.flush()
        if error_message:
            self._progress(f"Error: {error_message}")

    def _progress(self, line: str) -> None:
        print(line, file=self.stderr, flush=True)


class JsonRenderer(OneShotRenderer):
    def end(self, status: ExitStatus, error_code: str | None, error_message: str | None) -> None:
        error = None
        if error_message:
            error = {"type": error_code or "error", "message": error_message, "code": int(status)}
        out = {
            "session_id": self.session_id,
            "response": "".join(self.response),
            "stats": self.stats.as_gemini_cli_stats(),
            "error": error,
        }
        self.stdout.write(json.dumps(out, ensure_ascii=False, indent=2) + "\n")
        self.stdout.flush()


class StreamJsonRenderer(OneShotRenderer):
    def start(self, *, session_id: str, model: str, prompt: str) -> None:
        super().start(session_id=session_id, model=model, prompt=prompt)
        self._line({"type": "init", "session_id": session_id, "model": model})
        self._line({"type": "message", "role": "user", "content": prompt})

    def show(self, event: ServerEvent) -> None:
        if isinstance(event, TextDelta):
            self._line({"type": "message", "role": "assistant", "content": event.content, "delta": True})
        elif isinstance(event, ToolStarted):
            self._line({"type": "tool_use", "tool_name": event.tool, "tool_id": event.call_id, "parameters": event.parameters})
        elif isinstance(event, ToolCompleted):
            self._line({"type": "tool_result", "tool_id": event.call_id, "status": "success", "output": _as_text(event.result)})
        elif isinstance(event, ToolError):
            self._line({
                "type": "tool_result", "tool_id": event.call_id, "status": "error",
                "output": event.error.message, "error": {"type": event.error.code, "message": event.error.message},
            })
        elif isinstance(event, Retrying):
            self._line({"type": "error", "severity": "warning",
                        "message": f"retry {event.attempt}/{event.max_attempts} in {event.delay:.1f}s: {event.error}"})
        elif isinstance(event, Error) and not event.request_id:
            self._line({"type": "error", "severity": "warning", "message": event.message})

    def end(self, status: ExitStatus, error_code: str | None, error_message: str | None) -> None:
        result: dict[str, Any] = {"type": "result", "status": "success" if status == ExitStatus.SUCCESS else "error"}
        if error_message:
            self._line({"type": "error", "severity": "error", "message": error_message})
            result["error"] = {"type": error_code or "error", "message": error_message}
        u = self.stats.usage
        result["stats"] = {
            "total_tokens": u.total_tokens,
            "input_tokens": u.prompt_tokens,
            "output_tokens": u.output_tokens,
            "duration_ms": self.stats.duration_ms,
            "tool_calls": sum(t.count for t in self.stats.tools.values()),
        }
        self._line(result)

    def _line(self, obj: dict[str, Any]) -> None:
        obj = {"type": obj["type"], "timestamp": _now_iso(), **obj}
        self.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
        self.stdout.flush()


def make_renderer(output_format: str, stdout: IO[str], stderr: IO[str]) -> OneShotRenderer:
    cls = {"text": TextRenderer, "json": JsonRenderer, "stream-json": StreamJsonRenderer}[output_format]
    return cls(stdout, stderr)


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _as_text(result: Any) -> str:
    return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)


def _short_args(params: dict[str, Any], limit: int = 80) -> str:
    text = ", ".join(f"{k}={v!r}" for k, v in params.items())
    return text if len(text) <= limit else text[: limit - 1] + "…"
