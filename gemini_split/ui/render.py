"""Rich rendering of a session for the REPL.

:class:`TurnView` turns the protocol events of one turn into terminal
output: a spinner until the first token, the answer as markdown while it
streams, thinking dimmed and summarised, each tool call with its arguments,
status and streamed output, the token usage at the end, and errors in a
panel that says what to do.

On a terminal the moving parts live in a ``rich.live.Live`` region at the
bottom; text that is unlikely to change any more (all but the last few lines
of the markdown) is printed above it for good, so long answers scroll like
any other output and the live region stays small. When the output is not a
terminal nothing moves: text is written as it arrives, tool calls as lines.
"""

from __future__ import annotations

import io
import json
import re
import time
from collections.abc import Callable, Mapping
from typing import IO, Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markdown import CodeBlock, Markdown
from rich.panel import Panel
from rich.spinner import Spinner
from rich.syntax import Syntax
from rich.text import Text

from gemini_split.protocol import ErrorCode, ServerEvent, Usage
from gemini_split.protocol.turn import (
    AgentBegan,
    AgentEnded,
    AgentOutput,
    AgentState,
    ApprovalDecided,
    Notice,
    RetryScheduled,
    HistoryCompressed,
    TextAdded,
    ThoughtAdded,
    ToolCall,
    ToolCallEnded,
    ToolCallOutput,
    ToolCallStarted,
    Turn,
)

from .safe_text import visible

#: Lines of the streaming answer kept in the live region (they may still change).
LIVE_WINDOW = 6
#: Lines of a tool's output shown while it runs, and kept after it ends.
TOOL_TAIL = 8
#: Lines of a running sub-agent's latest text shown under its block.
AGENT_TAIL = 3
#: Characters of each of those lines shown: the last ones (the terminal's
#: edge may cut a line sooner; the block never wraps).
TAIL_LINE = 100
#: Seconds between two markdown re-renders while text streams.
RENDER_INTERVAL = 0.08


#: gemini-cli's built-in themes (its ``cli/themes.md``; settings.json
#: ``ui.theme``), in its order: name → (``dark`` | ``light``, the code
#: highlighting style it becomes here). Text elsewhere is drawn in the
#: terminal's own ANSI colours, which follow its light or dark palette.
THEMES: dict[str, tuple[str, str]] = {
    "ANSI": ("dark", "native"), "Atom One": ("dark", "one-dark"), "Ayu": ("dark", "monokai"),
    "Default": ("dark", "monokai"), "Dracula": ("dark", "dracula"), "GitHub": ("dark", "github-dark"),
    "Holiday": ("dark", "monokai"), "Shades Of Purple": ("dark", "paraiso-dark"),
    "Solarized Dark": ("dark", "solarized-dark"), "Tokyo Night": ("dark", "nord"),
    "ANSI Light": ("light", "default"), "Ayu Light": ("light", "friendly"), "Default Light": ("light", "default"),
    "GitHub Light": ("light", "friendly"), "Google Code": ("light", "default"),
    "Solarized Light": ("light", "solarized-light"), "Xcode": ("light", "xcode"),
}
#: gemini-cli's theme without colour: as ``NO_COLOR``.
NO_COLOR_THEME = "NoColor"
_OTHER_NAMES = {"default dark": "Default", "no color": NO_COLOR_THEME, "no-color": NO_COLOR_THEME}


def theme_named(name: str) -> str | None:
    """The theme ``name`` names (any case; gemini-cli's older names too), or None."""
    key = name.strip().lower()
    known = {n.lower(): n for n in (*THEMES, NO_COLOR_THEME)}
    return known.get(key) or _OTHER_NAMES.get(key)


def code_theme_for(theme: str | None) -> tuple[str | None, str | None]:
    """``(code highlighting style, warning)`` for a settings.json theme
    name (None for the NoColor theme); an unknown name keeps the default
    and says so."""
    if not theme:
        return "monokai", None
    name = theme_named(theme)
    if name == NO_COLOR_THEME:
        return None, None
    if name is not None:
        return THEMES[name][1], None
    return "monokai", f"settings.json: unknown ui.theme {theme!r}; using the default (known: {', '.join(THEMES)})"


def make_console(stdout: IO[str], environ: Mapping[str, str]) -> Console:
    """The REPL's console: colour unless ``NO_COLOR`` is set (no-color.org:
    it forbids colour, not emphasis, so bold, dim and italic stay), live
    updates only when ``stdout`` is a terminal."""
    no_color = bool(environ.get("NO_COLOR"))
    return Console(
        file=stdout,
        no_color=no_color,
        color_system="auto",
        highlight=False,
        emoji=False,
    )


# --- small renderables --------------------------------------------------------


def short_args(params: Mapping[str, Any], limit: int = 120) -> str:
    """A tool call's arguments on one line, control characters visible."""
    text = ", ".join(f"{visible(str(k), newlines=False)}={_short_value(v)}" for k, v in params.items())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _short_value(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = visible(text, newlines=False)  # repr leaves C1 and bidi controls as they are
    return text if len(text) <= 60 else text[:59] + "…"


def usage_line(usage: Usage, seconds: float) -> Text:
    """The dim line after an answer: its tokens and time. A server that
    reported no usage (gemini.v1 over gRPC) gets the time alone, not zeros."""
    if not (usage.prompt_tokens or usage.total_tokens):
        return Text(f"{seconds:.1f} s · token counts not reported by the server", style="dim")
    parts = [f"{usage.prompt_tokens:,} in", f"{usage.output_tokens:,} out"]
    if usage.thinking_tokens:
        parts.append(f"{usage.thinking_tokens:,} thinking")
    if usage.cached_tokens:
        parts.append(f"{usage.cached_tokens:,} cached")
    return Text(f"tokens: {' · '.join(parts)} · {usage.total_tokens:,} total · {seconds:.1f} s", style="dim")


_ERROR_HINTS = {
    ErrorCode.MODEL_AUTH: "The server's Gemini API key was refused: check GEMINI_API_KEY where the agent loop runs.",
    ErrorCode.UNAUTHORIZED: "The server refused the token: check --token, the profile (/server list) or GEMINI_SERVER_TOKEN.",
    ErrorCode.RATE_LIMITED: "The model is rate limited: wait a minute and ask again, or switch model with /model.",
    ErrorCode.MODEL_UNAVAILABLE: "The model is unavailable right now: ask again later or switch with /model.",
    ErrorCode.MODEL_ERROR: "The model call failed: ask again; if it keeps failing, try /model or /clear.",
    ErrorCode.TURN_LIMIT: "The agent hit its model-call limit for one prompt: ask it to continue, or split the task.",
    ErrorCode.CONNECTION_LOST: "The connection is gone: /clear reconnects, /server connect NAME picks another server.",
    ErrorCode.SHUTTING_DOWN: "The server is shutting down: /server connect to another, or /clear to retry later.",
    ErrorCode.BUSY: "The session is still busy with an earlier request: wait a moment, or /clear for a new one.",
    ErrorCode.MESSAGE_TOO_LARGE: "The message is too large for the server: send less at once.",
}


def error_panel(message: str, *, code: str | None = None, hint: str | None = None, title: str = "Error") -> Panel:
    """A red panel: what happened, and on the next line what to do. The
    message may quote a model-chosen path or a server's words: its control
    characters are shown, not obeyed."""
    body = Text(visible(message))
    hint = hint or (_ERROR_HINTS.get(ErrorCode(code)) if code in ErrorCode._value2member_map_ else None)
    if hint:
        body.append("\n")
        body.append(hint, style="bold")
    subtitle = code if code else None
    return Panel(body, title=title, title_align="left", subtitle=subtitle, subtitle_align="right",
                 border_style="red", expand=False)


# --- one turn -------------------------------------------------------------------


class _ToolCall:
    """How the REPL shows one of the turn's calls (:class:`ToolCall`): its
    header line and the tail of its output."""

    __slots__ = ("call",)

    def __init__(self, call: ToolCall):
        self.call = call

    @property
    def name(self) -> str:
        return self.call.name

    @property
    def params(self) -> dict[str, Any]:
        return self.call.args

    def all_lines(self) -> list[str]:
        return self.call.all_lines()

    def header(self, status: str, style: str, detail: str = "") -> Text:
        text = Text()
        mark = {"running": "⏺", "done": "✓", "failed": "✗", "refused": "⊘", "cancelled": "✗"}.get(status, "•")
        text.append(f"{mark} ", style=style)
        text.append(visible(self.name, newlines=False), style="bold")
        text.append(f"({short_args(self.params)})", style="cyan")
        text.append(f"  {status}", style=style)
        if detail:
            text.append(f": {visible(detail, newlines=False)}", style=style)
        return text

    def tail(self, limit: int) -> Text:
        lines = self.all_lines()
        text = Text(style="dim")
        if len(lines) > limit:
            text.append(f"  │ … {len(lines) - limit} earlier lines (/output shows all)\n")
            lines = lines[-limit:]
        text.append("\n".join(f"  │ {visible(line)}" for line in lines))
        return text


class TurnView:
    """Renders one turn. Feed :meth:`on_event`; call :meth:`close` at the end
    (and :meth:`pause` / :meth:`resume` around anything else that writes to
    the terminal, such as an approval question).

    Not thread-safe: call it from the Trio thread only (rich's own refresh
    thread only redraws what :meth:`_refresh` handed it)."""

    def __init__(self, console: Console, *, code_theme: str | None = "monokai",
                 waiting: str = "Waiting for the model…"):
        """``waiting``: the spinner's words until the first output."""
        self.console = console
        self.code_theme = code_theme or "monokai"
        self.live_enabled = console.is_terminal and not console.is_dumb_terminal
        self._live: Live | None = None
        self._started = time.monotonic()
        self._got_output = False
        self._text = ""  # the markdown not yet printed for good: the last, unfinished block(s)
        self._printed_lines = 0  # of its rendering, already printed above the live region
        self._gap = False  # a blank line is owed between the blocks printed and the next
        self._plain_written = 0  # of _text, written without live (non-terminal)
        self._thinking = ""
        self._thinking_shown = False
        #: The turn, folded: the running calls, the answer, the count of calls.
        self.turn = Turn()
        self._last_render = 0.0
        self._status = waiting
        self._show_status = False
        #: What the turn produced, for Ctrl-T (the answer and the count
        #: of calls, for /stats and /copy, are the turn model's).
        self.last_thought = ""
        #: The turn's tool calls that ended, in order (``/output``).
        self.finished_tools: list[_ToolCall] = []
        #: (1.4) Each sub-agent's activity, collapsed while it runs (one
        #: block: its current tool) and summed up in one line when done;
        #: these lines are what Ctrl-T expands.
        self.agent_log: dict[int, list[Text]] = {}
        #: Called with every change the turn's events make (``/stats``
        #: counts them), before it is shown.
        self.on_change: Callable[[Any], None] | None = None

    @property
    def answer(self) -> str:
        """All of the model's text, its messages apart by a blank line."""
        return self.turn.answer

    @property
    def tool_calls(self) -> int:
        return self.turn.tool_calls

    # --- lifecycle ---------------------------------------------------------------

    def start(self) -> None:
        if self.live_enabled:
            # Transient: whatever is meant to stay is printed above it for good.
            # "ellipsis": a live region taller than the screen cannot be
            # redrawn in place (the top scrolled away) and would repeat.
            self._live = Live(console=self.console, refresh_per_second=10, transient=True,
                              redirect_stdout=False, redirect_stderr=False, vertical_overflow="ellipsis")
            self._live.start()
            self._refresh(force=True)

    def pause(self) -> None:
        """Stop the live region (its last frame stays) so something else may
        write to the terminal."""
        self._flush_text(final=True)
        if self._live is not None:
            self._live.stop()
            self._live = None

    def resume(self) -> None:
        if self.live_enabled and self._live is None:
            self.start()

    def close(self) -> None:
        """End of the turn: print whatever is still moving, for good."""
        self._flush_text(final=True)
        self._flush_thinking()
        for call in list(self.turn.running.values()):
            self.turn.forget(call.call_id)
            self._end_tool(_ToolCall(call), "cancelled", "yellow")
        if self._live is not None:
            self._live.stop()
            self._live = None
        elif self._text and not self._text.endswith("\n"):
            self.console.file.write("\n")
            self.console.file.flush()

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self._started

    def set_status(self, text: str) -> None:
        """The spinner's words (e.g. "Cancelling…")."""
        self._status = text
        self._show_status = True
        if self._live is None:
            self.console.print(Text(text, style="yellow"))
        self._refresh(force=True)

    # --- events ------------------------------------------------------------------

    def on_event(self, event: ServerEvent) -> None:
        for change in self.turn.apply(event, now=time.monotonic()):
            if self.on_change is not None:
                self.on_change(change)
            self._show(change)

    def _show(self, change: Any) -> None:
        if getattr(change, "agent_id", 0) or isinstance(change, AgentBegan | AgentEnded | AgentOutput):
            self._show_agent(change)
            return
        if isinstance(change, TextAdded):
            self._got_output = True
            self._flush_thinking()
            self._text += change.text
            if self._live is None:
                self._write_plain_text()
            else:
                self._refresh()
        elif isinstance(change, ThoughtAdded):
            self._got_output = True
            self._thinking += change.text
            self._refresh()
        elif isinstance(change, ToolCallStarted):
            self._got_output = True
            self._flush_thinking()
            self._flush_text(final=True)
            self._text, self._printed_lines, self._plain_written = "", 0, 0
            if self._live is None:
                self.console.print(_ToolCall(self.turn.running[change.call_id]).header("running", "yellow"))
            self._refresh(force=True)
        elif isinstance(change, ToolCallOutput):
            if change.call is not None:
                if self._live is None:
                    self.console.file.write(visible(change.text))
                    self.console.file.flush()
                self._refresh()
        elif isinstance(change, ToolCallEnded) and change.call is not None:
            call = _ToolCall(change.call)
            if change.error is None:
                if not call.all_lines():
                    change.call.add_output(_result_summary(change.result))
                self._end_tool(call, "done", "green")
            else:
                code = change.error.code
                status = code if code in ("refused", "cancelled") else "failed"
                style = {"refused": "yellow", "cancelled": "yellow"}.get(status, "red")
                self._end_tool(call, status, style, detail=change.error.message)
        elif isinstance(change, RetryScheduled):
            self._print(Text(
                f"↻ model call failed ({visible(change.error, newlines=False)}); retry {change.attempt}/{change.max_attempts} "
                f"in {change.delay:.1f} s", style="yellow"))
        elif isinstance(change, HistoryCompressed):
            self._print(Text(f"✦ {change.describe()}", style="dim"))
        elif isinstance(change, Notice) and not change.fatal:
            self._print(Text(f"warning from the server: {visible(change.message)}", style="yellow"))
        elif isinstance(change, ApprovalDecided) and change.decision != "cancelled":
            # A server-side call's question settled elsewhere (this client's
            # own answers are said by the approval menu).
            self._print(Text(decision_said(change), style="yellow"))

    def _show_agent(self, change: Any) -> None:
        """A sub-agent's change: kept in its (collapsed) block; only its end
        is printed, as one line (Ctrl-T at the prompt expands the blocks)."""
        self._got_output = True
        log = self.agent_log.setdefault(change.agent_id, [])
        name = _agent_label(self.turn, change.agent_id)
        if isinstance(change, AgentBegan):
            log.append(Text(f"▸ {name} started on {visible(change.state.model, newlines=False)}: "
                            f"{visible(change.state.task, newlines=False)[:200]}", style="bold"))
        elif isinstance(change, AgentOutput) and not change.thought:
            if log and log[-1].style == "italic":
                log[-1].append(visible(change.text))
            else:
                log.append(Text(visible(change.text), style="italic"))
        elif isinstance(change, ToolCallEnded) and change.call is not None:
            call = _ToolCall(change.call)
            status = "done" if change.error is None else (
                change.error.code if change.error.code in ("refused", "cancelled") else "failed")
            log.append(call.header(status, "green" if change.error is None else "yellow",
                                   "" if change.error is None else change.error.message))
        elif isinstance(change, RetryScheduled):
            log.append(Text(f"↻ retry {change.attempt}/{change.max_attempts}: {visible(change.error)}",
                            style="yellow"))
        elif isinstance(change, AgentEnded):
            self._print(agent_summary(change.state))
        self._refresh(force=True)

    def expanded_agents(self) -> list[RenderableType]:
        """Ctrl-T: every sub-agent of the turn, expanded."""
        out: list[RenderableType] = []
        for agent_id, lines in self.agent_log.items():
            out.append(Text(f"── sub-agent {agent_id}: {_agent_label(self.turn, agent_id)} ──", style="dim bold"))
            out.extend(lines)
        return out

    # --- internals -------------------------------------------------------------------

    def _print(self, renderable: RenderableType) -> None:
        if self._live is not None:
            self._live.console.print(renderable)
        else:
            self.console.print(renderable)

    def _end_tool(self, call: _ToolCall, status: str, style: str, detail: str = "") -> None:
        self.finished_tools.append(call)
        parts: list[RenderableType] = [call.header(status, style, detail)]
        if self._live is None:
            if call.call.partial:
                self.console.file.write("\n")  # the streamed output's last line
            if not call.call.streamed and call.all_lines():
                parts.append(call.tail(TOOL_TAIL))
        elif call.all_lines():
            parts.append(call.tail(TOOL_TAIL))
        self._print(Group(*parts))
        self._refresh(force=True)

    def _flush_thinking(self) -> None:
        if self._thinking and not self._thinking_shown:
            self._thinking_shown = True
            self.last_thought = self._thinking
            words = len(self._thinking.split())
            first = visible(" ".join(self._thinking.split()))
            first = first if len(first) <= 100 else first[:99] + "…"
            self._print(Text(f"✻ Thought ({words} words): {first}  (Ctrl-T at the prompt shows it all)",
                             style="dim italic"))
        self._thinking = ""
        self._thinking_shown = False

    def _write_plain_text(self) -> None:
        new = self._text[self._plain_written:]
        self._plain_written = len(self._text)
        self.console.file.write(visible(new))
        self.console.file.flush()

    def _markdown_lines(self, text: str | None = None) -> list[str]:
        """``text`` (the unprinted markdown by default) rendered, as lines
        with ANSI codes, without trailing blanks on a line or at the end."""
        text = self._text if text is None else text
        buffer = io.StringIO()
        console = Console(
            file=buffer, width=self.console.width, force_terminal=True,
            color_system=self.console.color_system, no_color=self.console.no_color,
            highlight=False, emoji=False,
        )
        console.print(_Markdown(visible(text), code_theme=self.code_theme))
        lines = [_TRAILING_BLANKS.sub(r"\1", line) for line in buffer.getvalue().splitlines()]
        while lines and not Text.from_ansi(lines[-1]).plain.strip():
            lines.pop()
        return lines

    def _flush_text(self, *, final: bool) -> None:
        """Print for good what will not change any more: every finished
        markdown block (a blank line or a closing code fence ends one), and
        the rendered lines of the unfinished block but its last
        :data:`LIVE_WINDOW` (all of it when ``final``). A line is printed
        once and never redrawn, and the live region drops it before it is
        printed, so nothing shows twice, not even for one frame."""
        if self._live is None:
            return
        out: list[str] = []
        cut = len(self._text) if final else block_boundary(self._text)
        if cut:
            done, self._text = self._text[:cut], self._text[cut:]
            lines = self._markdown_lines(done) if done.strip() else []
            out += self._gapped(lines[self._printed_lines:])
            self._printed_lines = 0
            self._gap = bool(lines) and not final
        if final:
            self._text, self._printed_lines, self._gap = "", 0, False
        elif self._text.strip() and not self._text.lstrip().startswith("|"):
            # (a table re-renders whole as rows arrive: it stays live)
            lines = self._markdown_lines()
            stable = max(0, len(lines) - LIVE_WINDOW)
            if stable > self._printed_lines:
                out += self._gapped(lines[self._printed_lines:stable])
                self._printed_lines = stable
        if out:
            # The live region first forgets what is printed: printing above
            # it redraws it, and it must not show those lines again.
            # (refresh: printing redraws the last *drawn* renderable.)
            self._live.update(self._live_renderable(), refresh=True)
            self._live.console.print(Text.from_ansi("\n".join(out)))

    def _gapped(self, lines: list[str]) -> list[str]:
        if lines and self._gap:
            self._gap = False
            return ["", *lines]
        return lines

    def _refresh(self, *, force: bool = False) -> None:
        if self._live is None:
            return
        now = time.monotonic()
        if not force and now - self._last_render < RENDER_INTERVAL:
            return
        self._last_render = now
        self._flush_text(final=False)
        self._live.update(self._live_renderable(), refresh=True)

    def _live_renderable(self) -> RenderableType:
        parts: list[RenderableType] = []
        if self._text.strip():
            lines = self._markdown_lines()[self._printed_lines:]
            if self._gap and not self._printed_lines:
                lines = ["", *lines]
            parts.append(Text.from_ansi("\n".join(lines)))
        if self._thinking:
            last = visible(" ".join(self._thinking.split()))[-max(20, self.console.width - 16):]
            parts.append(Text(f"✻ Thinking… {last}", style="dim italic", no_wrap=True, overflow="ellipsis"))
        agents = {a.parent_call_id: a for a in self.turn.running_agents()}
        for running in self.turn.running.values():
            if running.agent_id:
                continue  # in its agent's block
            call = _ToolCall(running)
            parts.append(Spinner("dots", call.header("running", "yellow"), style="yellow"))
            if call.all_lines():
                parts.append(call.tail(TOOL_TAIL))
            agent = agents.get(running.call_id)
            if agent is not None:
                parts.append(agent_block(agent))
        if not self._got_output or self._show_status:
            parts.append(Spinner("dots", Text(self._status, style="dim"), style="cyan"))
        return Group(*parts)


def _agent_label(turn: Turn, agent_id: int) -> str:
    agent = turn.agents.get(agent_id)
    return visible(agent.name, newlines=False) if agent is not None else f"sub-agent {agent_id}"


def agent_block(agent: AgentState, *, expandable: bool = True) -> Text:
    """A running sub-agent, collapsed: its name, what it runs now, its
    counts, and under them the last :data:`AGENT_TAIL` lines of the text it
    is writing (each cut at the terminal's edge: the block's height never
    grows with the text). The one view of a running sub-agent: the REPL's
    own turn and ``attach --watch`` both draw it. ``expandable``: say that
    Ctrl-T at the prompt shows it all (the REPL)."""
    text = Text("  └ ", style="dim", no_wrap=True, overflow="ellipsis")
    text.append(visible(agent.name, newlines=False), style="bold magenta")
    if agent.tool:
        text.append(f" → {visible(agent.tool, newlines=False)}", style="cyan")
    else:
        text.append(" thinking…", style="dim")
    hint = " · Ctrl-T at the prompt expands" if expandable else ""
    text.append(f"  ({agent.tool_calls} tool calls{hint})", style="dim")
    for line in text_tail(agent.text, AGENT_TAIL):
        text.append(f"\n    │ {visible(line, newlines=False)}", style="dim italic")
    return text


def text_tail(text: str, lines: int) -> list[str]:
    """The last ``lines`` non-blank lines of ``text``, each its last
    :data:`TAIL_LINE` characters (the newest words of a line still being
    written), with a ``…`` where something before was left out. Reads the
    end of ``text`` only: the cost does not grow with it."""
    end = text[-lines * (TAIL_LINE + 1):]
    kept = [line for line in end.splitlines() if line.strip()]
    shown = [line if len(line) <= TAIL_LINE else "…" + line[-TAIL_LINE:] for line in kept[-lines:]]
    if shown and not shown[0].startswith("…") and (len(kept) > lines or len(end) < len(text)):
        shown[0] = "…" + shown[0]
    return shown


def agent_summary(agent: AgentState) -> Text:
    """A finished sub-agent in one line: outcome, counts, tokens, summary."""
    ok = agent.outcome == "completed"
    text = Text(f"  {'✓' if ok else '✗'} ", style="green" if ok else "yellow")
    text.append(visible(agent.name, newlines=False), style="bold magenta")
    tokens = agent.usage.total_tokens if agent.usage is not None else 0
    text.append(f" {agent.outcome} · {agent.turns} turns · {agent.tool_calls} tool calls · {tokens:,} tokens",
                style="dim")
    if agent.summary:
        text.append(f": {visible(agent.summary, newlines=False)}")
    return text


_TRAILING_BLANKS = re.compile(r" +((?:\x1b\[[0-9;]*m)*)$")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")


class _CodeBlock(CodeBlock):
    """A fenced code block without rich's padding and background: copying
    it from the terminal gives the code (no leading space, no trailing
    blanks)."""

    def __rich_console__(self, console: Console, options: Any) -> Any:
        yield Syntax(str(self.text).rstrip(), self.lexer_name, theme=self.theme, word_wrap=True, padding=0,
                     background_color="default")


class _Markdown(Markdown):
    elements = {**Markdown.elements, "fence": _CodeBlock, "code_block": _CodeBlock}


def block_boundary(text: str) -> int:
    """Where the finished markdown blocks of a streaming ``text`` end (0 if
    none has): after a closing code fence, or at the start of an unindented
    line that follows a blank line outside a code fence (an indented one
    may continue a list item)."""
    best = pos = 0
    fence: str | None = None
    blank_end = 0
    for line in text.splitlines(keepends=True):
        end = pos + len(line)
        stripped = line.strip()
        if fence is not None:
            match = _FENCE.match(line)
            if match and line.endswith("\n") and stripped == match.group(1) and match.group(1)[0] == fence[0] \
                    and len(match.group(1)) >= len(fence):
                fence, best = None, end
        elif not stripped:
            if line.endswith("\n"):
                blank_end = end
        else:
            if blank_end and not line[0].isspace():
                best = blank_end
            blank_end = 0
            match = _FENCE.match(line)
            if match and line.endswith("\n"):
                fence = match.group(1)
        pos = end
    return best


def _result_summary(result: Any) -> str:
    """A tool result's first line, and how many more there are: a file of
    one line ending in a newline is one line, not "+1 lines"."""
    text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
    lines = visible(text).split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()  # the final newline ends the last line; it starts none
    first = lines[0] if len(lines[0]) <= 100 else lines[0][:99] + "…"
    extra = len(lines) - 1
    more = f"  (+{extra} more line{'s' if extra != 1 else ''})" if extra else ""
    return f"{first}{more}"


def decision_said(change: ApprovalDecided, *, by: str | None = None) -> str:
    """How a settled approval question is said: who decided what
    ("✓ approved by browser"); ``by``: the decider as the screen names it
    (:func:`gemini_split.ui.follow.named`), else its label."""
    by = (visible(change.by, newlines=False) if by is None else by) or "another client"
    said = {"approve": f"✓ approved by {by}", "approve_always": f"✓ approved (always) by {by}",
            "deny": f"✗ refused by {by}", "expired": "✗ nobody approved it in time"}
    text = said.get(change.decision, visible(change.decision, newlines=False))
    # (1.6) The user's text, not the model's, is what runs.
    return f"{text}, with their changes to the edit" if change.modified else text
