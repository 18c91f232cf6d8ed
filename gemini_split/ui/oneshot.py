"""One-shot output: ``--output-format text | json | stream-json``.

Field for field what gemini-cli's headless mode writes (its
``packages/core/src/output`` and ``uiTelemetry.ts``), so scripts written for
it work:

* ``text``: the answer on stdout as it streams, a newline between the model's
  messages when tools ran between them; warnings, retries and errors on
  stderr. On a terminal stderr also shows a spinner until the first token and
  a one-line status while a tool runs (never when stderr is a pipe or file).
* ``json``: one object at the end (2-space indented, as gemini-cli):
  ``session_id``, ``response`` (the text of the model's *last* message, after
  its last tool call), ``stats`` (below), ``warnings`` when there are any,
  ``error`` only on failure (``{type, message, code}``).
* ``stream-json``: one compact JSON object per line as things happen:
  ``init``, ``message``, ``tool_use``, ``tool_result``, ``error`` (warnings
  only), then ``result`` with ``status`` and ``stats``. A retried model call
  that then succeeds is not an ``error`` line: it is reported on stderr and
  counted in ``stats``.

``stats`` (json) is gemini-cli's ``SessionMetrics``: per model ``api``
(totalRequests, totalErrors, totalLatencyMs, errorsByType), ``tokens``
(input = prompt − cached, prompt, candidates, total, cached, thoughts, tool)
and ``roles.main`` with the same counts; ``tools`` (totalCalls, totalSuccess,
totalFail, totalDurationMs, totalDecisions and the same per name in
``byName``); ``files`` (totalLinesAdded/Removed by the edit tools).

Deliberately light on imports: this is on the one-shot path.
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timezone
from typing import IO, Any

import msgspec

from gemini_split.exit_status import ExitStatus, exit_status_for
from gemini_split.protocol import ServerEvent, Usage
from gemini_split.protocol.turn import (
    AgentBegan,
    AgentEnded,
    AgentOutput,
    Change,
    Notice,
    RetryScheduled,
    HistoryCompressed,
    TextAdded,
    ToolCallEnded,
    ToolCallStarted,
    Turn,
    TurnEnded,
)

from .output_formats import OUTPUT_FORMATS  # re-exported: the renderers below are these
from .output_formats import gemini_cli_error_type
from .safe_text import visible

#: gemini-cli's ToolCallDecision values, in its order.
DECISIONS = ("accept", "reject", "modify", "auto_accept")

# Patterns here are compiled on first use (re's own cache), not at import:
# a one-shot run that never needs them does not pay ~0.1-0.4 ms each.
_DIFF_STAT = r"\(\+(\d+) -(\d+) lines?\)"
_CREATED = r"^Created .*\((\d+) lines?\)\.$"


def _decisions() -> dict[str, int]:
    return dict.fromkeys(DECISIONS, 0)


class _ToolStats(msgspec.Struct):
    count: int = 0
    success: int = 0
    fail: int = 0
    duration_ms: int = 0
    decisions: dict[str, int] = msgspec.field(default_factory=_decisions)


class _ApiStats(msgspec.Struct):
    requests: int = 0
    errors: int = 0
    latency_ms: int = 0
    errors_by_type: dict[str, int] = msgspec.field(default_factory=dict)


class _AgentStats(msgspec.Struct):
    runs: int = 0
    turns: int = 0
    tool_calls: int = 0
    usage: Usage = msgspec.field(default_factory=Usage)
    outcomes: dict[str, int] = msgspec.field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        u = self.usage
        return {"runs": self.runs, "turns": self.turns, "toolCalls": self.tool_calls,
                "outcomes": dict(self.outcomes),
                "tokens": {"prompt": u.prompt_tokens, "candidates": u.output_tokens,
                           "thoughts": u.thinking_tokens, "cached": u.cached_tokens, "total": u.total_tokens}}


class RunStats(msgspec.Struct):
    """What a one-shot run did, computed as gemini-cli computes its stats."""

    model: str = ""
    usage: Usage = msgspec.field(default_factory=Usage)
    api: _ApiStats = msgspec.field(default_factory=_ApiStats)
    started: float = msgspec.field(default_factory=time.monotonic)
    tools: dict[str, _ToolStats] = msgspec.field(default_factory=dict)
    lines_added: int = 0
    lines_removed: int = 0
    #: (1.4) Per sub-agent name: its runs, turns, tool calls and tokens.
    agents: dict[str, _AgentStats] = msgspec.field(default_factory=dict)

    def tool(self, name: str) -> _ToolStats:
        return self.tools.setdefault(name, _ToolStats())

    @property
    def duration_ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)

    def add_usage(self, usage: Usage, api: Any = None) -> None:
        """A request's totals (``Finished``, or a failed request's error)."""
        self.usage = self.usage + usage
        if api is not None:
            self.api.requests += api.requests
            self.api.errors += api.errors
            self.api.latency_ms += api.latency_ms
            for kind, n in (api.errors_by_type or {}).items():
                self.api.errors_by_type[kind] = self.api.errors_by_type.get(kind, 0) + n

    def count(self, change: Change) -> None:
        """Fold one of a turn's changes into the counts: tool calls
        (count, outcome, duration, decision) and, at the turn's end, its
        usage and API calls."""
        stats = self
        if isinstance(change, ToolCallStarted):
            stats.tool(change.name).count += 1
        elif isinstance(change, ToolCallEnded):
            t = stats.tool(change.name)
            if change.duration is not None:
                t.duration_ms += int(change.duration * 1000)
            # gemini-cli counts a call that was allowed to run as "accept"
            # (whether it then succeeded or not), a refused one as "reject".
            refused = change.error is not None and change.error.code == "refused"
            t.decisions["reject" if refused else "accept"] += 1
            if change.ok:
                t.success += 1
                stats.count_edit(change.result)
            else:
                t.fail += 1
        elif isinstance(change, TurnEnded):
            self._add_request_totals(change)
        elif isinstance(change, AgentEnded):
            stats.count_agent(change.state)

    def _add_request_totals(self, ended: TurnEnded) -> None:
        api: Any = ended.api
        if api is None:
            # A server that does not report per-call stats: count what the
            # events show (each retry was a failed call).
            turns = ended.turns
            failed = ended.reason == "error"
            errors = ended.retries + (1 if failed else 0)
            api = _ApiStats(requests=turns + ended.retries + (1 if failed and not turns else 0),
                            errors=errors, errors_by_type={"model_error": errors} if errors else {})
        self.add_usage(ended.usage or Usage(), api)

    def count_edit(self, result: Any) -> None:
        """``files.totalLinesAdded/Removed`` from an edit tool's summary."""
        if not isinstance(result, str):
            return
        first = result.splitlines()[0] if result else ""
        if m := re.search(_DIFF_STAT, first):
            self.lines_added += int(m.group(1))
            self.lines_removed += int(m.group(2))
        elif m := re.match(_CREATED, first):
            self.lines_added += int(m.group(1))

    def _tokens(self) -> dict[str, int]:
        u = self.usage
        return {
            "input": max(0, u.prompt_tokens - u.cached_tokens),
            "prompt": u.prompt_tokens,
            "candidates": u.output_tokens,
            "total": u.total_tokens,
            "cached": u.cached_tokens,
            "thoughts": u.thinking_tokens,
            "tool": getattr(u, "tool_tokens", 0),
        }

    def as_gemini_cli_stats(self) -> dict[str, Any]:
        """gemini-cli's ``SessionMetrics`` (the ``stats`` of ``-o json``)."""
        models: dict[str, Any] = {}
        if self.api.requests or self.usage.total_tokens:
            api = {"totalRequests": self.api.requests, "totalErrors": self.api.errors,
                   "totalLatencyMs": self.api.latency_ms}
            tokens = self._tokens()
            models[self.model or "unknown"] = {
                "api": {**api, "errorsByType": dict(self.api.errors_by_type)},
                "tokens": tokens,
                "roles": {"main": {**api, "tokens": dict(tokens)}},
            }
        tools = self.tools.values()
        total_decisions = _decisions()
        for t in tools:
            for k, v in t.decisions.items():
                total_decisions[k] += v
        return {
            "models": models,
            "tools": {
                "totalCalls": sum(t.count for t in tools),
                "totalSuccess": sum(t.success for t in tools),
                "totalFail": sum(t.fail for t in tools),
                "totalDurationMs": sum(t.duration_ms for t in tools),
                "totalDecisions": total_decisions,
                "byName": {
                    name: {"count": t.count, "success": t.success, "fail": t.fail,
                           "durationMs": t.duration_ms, "decisions": dict(t.decisions)}
                    for name, t in self.tools.items()
                },
            },
            "files": {"totalLinesAdded": self.lines_added, "totalLinesRemoved": self.lines_removed},
            **({"agents": {name: a.as_json() for name, a in self.agents.items()}} if self.agents else {}),
        }

    def count_agent(self, state: Any) -> None:
        """A sub-agent finished: its turns, tool calls, tokens, outcome."""
        a = self.agents.setdefault(state.name, _AgentStats())
        a.runs += 1
        a.turns += state.turns
        a.tool_calls += state.tool_calls
        if state.usage is not None:
            a.usage = a.usage + state.usage
        a.outcomes[state.outcome or "error"] = a.outcomes.get(state.outcome or "error", 0) + 1

    def as_stream_stats(self) -> dict[str, Any]:
        """gemini-cli's ``StreamStats`` (``result.stats`` of stream-json)."""
        tokens = self._tokens()
        per_model = {"total_tokens": tokens["total"], "input_tokens": tokens["prompt"],
                     "output_tokens": tokens["candidates"], "cached": tokens["cached"], "input": tokens["input"]}
        has_model = bool(self.api.requests or self.usage.total_tokens)
        return {
            **(per_model if has_model else dict.fromkeys(per_model, 0)),
            "duration_ms": self.duration_ms,
            "tool_calls": sum(t.count for t in self.tools.values()),
            "models": {self.model or "unknown": per_model} if has_model else {},
        }


class OneShotRenderer:
    """Base: folds the run's events in a :class:`Turn` and counts stats from
    its changes; subclasses decide what to print for each change.

    Call :meth:`start` once connected, feed every event to :meth:`on_event`,
    then :meth:`finish` (with the request's final event, or an error text for
    failures outside the protocol) which prints the ending and returns the
    exit status."""

    #: The terminal status line (text output on a terminal only).
    status: StatusLine | None = None

    def __init__(self, stdout: IO[str], stderr: IO[str], *, stderr_is_terminal: bool = False,
                 raw_output: bool = False):
        self.stdout = stdout
        self.stderr = stderr
        self.raw_output = raw_output
        self.stats = RunStats()
        #: The run's request, folded (its text since the last tool call is
        #: gemini-cli's ``response``).
        self.turn = Turn()
        self.warnings: list[str] = []
        self.session_id = ""

    @property
    def response(self) -> str:
        """The text of the model's messages since the last tool call."""
        return self.turn.text

    def start(self, *, session_id: str, model: str, prompt: str) -> None:
        self.session_id = session_id
        self.stats.model = model

    async def on_event(self, event: ServerEvent) -> None:
        for change in self.turn.apply(event, now=time.monotonic()):
            self._count(change)
            self.show(change)

    def _count(self, change: Change) -> None:
        self.stats.count(change)

    def show(self, change: Change) -> None:
        """Print what this format prints for a change as it happens."""

    def _retry_note(self, change: RetryScheduled) -> None:
        self._note(f"Model call failed ({change.error}); retry {change.attempt}/{change.max_attempts} "
                   f"in {change.delay:.1f}s")

    def finish(self, *, error_code: str | None = None, error_message: str | None = None,
               status: ExitStatus | None = None) -> ExitStatus:
        if status is None:
            status = exit_status_for(error_code) if error_code else ExitStatus.SUCCESS
        self.end(status, error_code, error_message)
        return status

    def end(self, status: ExitStatus, error_code: str | None, error_message: str | None) -> None:
        """Print the ending."""

    def _note(self, line: str) -> None:
        """A line on stderr (progress, retries, warnings); model-chosen
        parts are made safe for a terminal."""
        print(visible(line), file=self.stderr, flush=True)


class TextRenderer(OneShotRenderer):
    def __init__(self, stdout: IO[str], stderr: IO[str], *, stderr_is_terminal: bool = False,
                 raw_output: bool = False):
        super().__init__(stdout, stderr, raw_output=raw_output)
        self._wrote_any = False
        self._at_line_start = True
        self.status = StatusLine(stderr) if stderr_is_terminal else None

    def show(self, change: Change) -> None:
        if isinstance(change, TextAdded):
            if not change.text:
                return
            if self.status is not None:
                self.status.clear(done_waiting=True)
            self.stdout.write(change.text if self.raw_output else _safe(change.text))
            self.stdout.flush()
            self._wrote_any = True
            self._at_line_start = change.text.endswith("\n")
        elif isinstance(change, ToolCallStarted) and change.agent_id:
            # A sub-agent's call: nested under the call of the agent.
            name = _agent_name(self.turn, change.agent_id)
            if self.status is not None:
                self.status.set(f"{name} → {change.name}({_short_args(change.args)})")
            else:
                self._note(f"  ↳ {name}: {change.name}({_short_args(change.args)})")
        elif isinstance(change, ToolCallEnded) and change.agent_id:
            if change.error is not None:
                self._note(f"    ✗ {_agent_name(self.turn, change.agent_id)}: {change.name}: {change.error.message}")
        elif isinstance(change, AgentEnded):
            if self.status is not None:
                self.status.clear()
            a = change.state
            mark = "✓" if a.outcome == "completed" else "✗"
            self._note(f"  {mark} {a.name} {a.outcome} ({a.turns} turns, {a.tool_calls} tool calls): {a.summary}")
        elif isinstance(change, ToolCallStarted):
            self._end_line()
            if self.status is not None:
                self.status.set(f"{change.name}({_short_args(change.args)})")
            else:
                self._note(f"→ {change.name}({_short_args(change.args)})")
        elif isinstance(change, ToolCallEnded) and change.ok:
            if self.status is not None:
                self.status.set(None)
        elif isinstance(change, ToolCallEnded):
            if self.status is not None:
                self.status.clear()
            self._note(f"✗ {change.name}: {change.error.message if change.error else ''}")
        elif isinstance(change, RetryScheduled):
            if self.status is not None:
                self.status.clear()
            self._retry_note(change)
        elif isinstance(change, HistoryCompressed):
            if self.status is not None:
                self.status.clear()
            self._note(change.describe())

    def _end_line(self) -> None:
        """gemini-cli's ensureTrailingNewline before tools run, so the next
        message starts on a line of its own."""
        if self._wrote_any and not self._at_line_start:
            self.stdout.write("\n")
            self.stdout.flush()
            self._at_line_start = True

    def end(self, status: ExitStatus, error_code: str | None, error_message: str | None) -> None:
        if self.status is not None:
            self.status.close()
        self._end_line()
        if error_message:
            self._note(f"Error: {error_message}")


class JsonRenderer(OneShotRenderer):
    def show(self, change: Change) -> None:
        if isinstance(change, RetryScheduled):
            self._retry_note(change)
        elif isinstance(change, HistoryCompressed):
            self._note(change.describe())

    def end(self, status: ExitStatus, error_code: str | None, error_message: str | None) -> None:
        out: dict[str, Any] = {"session_id": self.session_id}
        if not error_message:
            out["response"] = self.response
        out["stats"] = self.stats.as_gemini_cli_stats()
        if self.warnings:
            out["warnings"] = list(self.warnings)
        if error_message:
            out["error"] = {"type": error_code or "error", "message": error_message, "code": int(status)}
        import json  # here: text output (the default) never needs it (~1.5 ms to import)

        self.stdout.write(json.dumps(out, ensure_ascii=False, indent=2) + "\n")
        self.stdout.flush()


class StreamJsonRenderer(OneShotRenderer):
    """gemini-cli's stream-json. (1.4) A sub-agent's events carry
    ``agent_id`` and ``agent_name`` (gemini-cli's telemetry names); its
    run is bracketed by ``agent_start`` / ``agent_finish`` lines (with
    gemini-cli's ``turn_count``, ``terminate_reason``, ``duration_ms``)."""

    def start(self, *, session_id: str, model: str, prompt: str) -> None:
        super().start(session_id=session_id, model=model, prompt=prompt)
        self._line({"type": "init", "session_id": session_id, "model": model})
        self._line({"type": "message", "role": "user", "content": prompt})

    def _agent(self, agent_id: int) -> dict[str, Any]:
        if not agent_id:
            return {}
        agent = self.turn.agents.get(agent_id)
        return {"agent_id": agent_id, "agent_name": agent.name if agent is not None else ""}

    def show(self, change: Change) -> None:
        if isinstance(change, TextAdded):
            self._line({"type": "message", "role": "assistant", "content": change.text, "delta": True})
        elif isinstance(change, AgentOutput):
            if not change.thought:
                self._line({"type": "message", "role": "assistant", "content": change.text, "delta": True,
                            **self._agent(change.agent_id)})
        elif isinstance(change, AgentBegan):
            a = change.state
            self._line({"type": "agent_start", "agent_id": a.agent_id, "agent_name": a.name,
                        "parent_tool_id": a.parent_call_id, "model": a.model, "task": a.task,
                        "tools": list(a.tools), "refused_tools": list(a.refused_tools)})
        elif isinstance(change, AgentEnded):
            a = change.state
            usage = a.usage or Usage()
            self._line({"type": "agent_finish", "agent_id": a.agent_id, "agent_name": a.name,
                        "parent_tool_id": a.parent_call_id, "outcome": a.outcome,
                        "terminate_reason": TERMINATE_REASONS.get(a.outcome or "", "ERROR"),
                        "turn_count": a.turns, "tool_calls": a.tool_calls,
                        "duration_ms": int(change.duration * 1000) if change.duration is not None else None,
                        "summary": a.summary,
                        "stats": {"total_tokens": usage.total_tokens, "input_tokens": usage.prompt_tokens,
                                  "output_tokens": usage.output_tokens}})
        elif isinstance(change, ToolCallStarted):
            self._line({"type": "tool_use", "tool_name": change.name, "tool_id": change.call_id,
                        "parameters": change.args, **self._agent(change.agent_id)})
        elif isinstance(change, ToolCallEnded) and change.error is None:
            self._line({"type": "tool_result", "tool_id": change.call_id, "status": "success",
                        "output": _as_text(change.result), **self._agent(change.agent_id)})
        elif isinstance(change, ToolCallEnded):
            error = change.error
            self._line({
                "type": "tool_result", "tool_id": change.call_id, "status": "error",
                "output": error.message,
                "error": {"type": gemini_cli_error_type(error.code, change.name), "message": error.message},
                **self._agent(change.agent_id),
            })
        elif isinstance(change, RetryScheduled):
            self._retry_note(change)
        elif isinstance(change, HistoryCompressed):
            self._note(change.describe())
        elif isinstance(change, Notice):
            self._line({"type": "error", "severity": "warning", "message": change.message})

    def end(self, status: ExitStatus, error_code: str | None, error_message: str | None) -> None:
        result: dict[str, Any] = {"type": "result", "status": "success" if status == ExitStatus.SUCCESS else "error"}
        if error_message:
            result["error"] = {"type": error_code or "error", "message": error_message}
        result["stats"] = self.stats.as_stream_stats()
        self._line(result)

    def _line(self, obj: dict[str, Any]) -> None:
        import json  # here: text output (the default) never needs it (~1.5 ms to import)

        obj = {"type": obj["type"], "timestamp": _now_iso(), **obj}
        self.stdout.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")
        self.stdout.flush()


#: gemini-cli's ``terminate_reason`` for each ``agent_finished.outcome``.
TERMINATE_REASONS = {"completed": "GOAL", "max_turns": "MAX_TURNS", "timeout": "TIMEOUT",
                     "cancelled": "ABORTED", "interrupted": "ABORTED", "error": "ERROR"}


class StatusLine:
    """One line on a terminal's stderr, rewritten in place: a spinner while
    waiting for the model's first token, then the running tool. Cleared
    before any answer text is written (stdout may be the same terminal)."""

    FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"

    def __init__(self, stream: IO[str]):
        self.stream = stream
        self.waiting = True
        self.tool: str | None = None
        self._frame = 0
        self._shown = False
        self._closed = False

    @property
    def text(self) -> str | None:
        if self.tool:
            return f"Running {self.tool}"
        return "Thinking…" if self.waiting else None

    def tick(self) -> None:
        """Advance the spinner (called every ~100 ms while the run lasts)."""
        if self._closed:
            return
        text = self.text
        if text is None:
            return
        self._frame = (self._frame + 1) % len(self.FRAMES)
        self._draw(f"{self.FRAMES[self._frame]} {text}")

    def set(self, tool: str | None) -> None:
        self.tool = tool
        if tool is None:
            self.clear()
        else:
            self.tick()

    def clear(self, *, done_waiting: bool = False) -> None:
        if done_waiting:
            self.waiting = False
        if self._shown:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self._shown = False

    def close(self) -> None:
        self.clear(done_waiting=True)
        self._closed = True

    def _draw(self, line: str) -> None:
        self.stream.write("\r\x1b[2K" + visible(line, newlines=False)[:200])
        self.stream.flush()
        self._shown = True


def make_renderer(output_format: str, stdout: IO[str], stderr: IO[str], *,
                  stderr_is_terminal: bool = False, raw_output: bool = False) -> OneShotRenderer:
    cls = {"text": TextRenderer, "json": JsonRenderer, "stream-json": StreamJsonRenderer}[output_format]
    return cls(stdout, stderr, stderr_is_terminal=stderr_is_terminal, raw_output=raw_output)


def _safe(text: str) -> str:
    """Model text for a terminal or a file: escape sequences and other
    controls shown, never obeyed (``--raw-output`` turns this off)."""
    return visible(text)


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _as_text(result: Any) -> str:
    if isinstance(result, str):
        return result
    import json  # here: most results are text (json costs ~1.5 ms to import)

    return json.dumps(result, ensure_ascii=False)


def _agent_name(turn: Turn, agent_id: int) -> str:
    agent = turn.agents.get(agent_id)
    return agent.name if agent is not None else f"sub-agent {agent_id}"


def _short_args(params: dict[str, Any], limit: int = 80) -> str:
    text = ", ".join(f"{k}={v!r}" for k, v in params.items())
    return text if len(text) <= limit else text[: limit - 1] + "…"
