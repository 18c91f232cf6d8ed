"""Rendering what other clients of a session do (``gemini-split attach``).

A :class:`Follower` turns session events that are not this client's own
turn into terminal lines: who joined or left, another client's prompt, its
answer, the tools it ran. Everything another client or the model wrote is
shown through :func:`~gemini_split.ui.safe_text.visible`: an escape
sequence in a prompt or an answer is displayed, never obeyed. A client is
named by its label, except this one, which is "you" (:func:`named`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from gemini_split.tools.builtin import ask_user
from gemini_split.tools.base import ToolFailed
from gemini_split.protocol import ClientsChanged, Rewound, ServerEvent
from gemini_split.protocol.turn import (
    AgentEnded,
    ApprovalAsked,
    ApprovalDecided,
    HistoryCompressed,
    TextAdded,
    ToolCallRequested,
    ToolCallStarted,
    Turn,
    TurnBegan,
    TurnEnded,
)

from .safe_text import visible

#: Characters of a prompt shown in a heading.
PROMPT_SHOWN = 200
#: How a client's screen names the client itself.
YOU = "you"


def named(label: str, me: str | None) -> str:
    """How the client labelled ``label`` is named on the screen of the
    client labelled ``me`` (its ``connected.label``, which the server makes
    unique among a session's clients): "you" for itself, else its label,
    made inert ("" for none)."""
    return YOU if me and label == me else visible(label, newlines=False)


class Follower:
    """``live``: write answers as they stream (watch mode, nothing else on
    the screen); otherwise a whole line at a time as the lines complete
    (the REPL, above its open prompt, which a line cannot continue). Either
    way, text the model wrote before a tool call (or an approval question)
    is shown before it, who settled a question is said, and streamed text is
    written as it came: the terminal wraps it, never rich (an answer that is
    JSON stays copyable).

    Live on a terminal, the running sub-agents are drawn at the bottom as
    the REPL draws its own (:func:`~.render.agent_block`: the latest lines
    of their text, bounded) until they end; :meth:`close` takes that away.

    :meth:`hold` keeps the events until :meth:`release` (an attach's
    replay waits for the banner, and for :attr:`me` to be known)."""

    def __init__(self, console: Console, *, live: bool):
        self.console = console
        self.live = live
        #: Not live: the model's text received and not printed yet (the
        #: end of a line still being written).
        self._pending = ""
        #: The latest attached clients, for a toolbar: ``[(label, role)]``.
        self.attached: list[tuple[str, str]] = []
        #: The session ``attached`` is about (set by whoever fills it).
        self.session: str | None = None
        #: This client's label (``connected.label``): what it did is said
        #: as "you" (set by whoever connects).
        self.me: str | None = None
        #: The other clients' turn being shown (their text waits here
        #: until a tool call or the end, unless live).
        self.turn = Turn()
        #: Live: whether the last thing written was streamed text not yet
        #: ended by a newline.
        self._mid_line = False
        #: Not live: whether a line of the current text was printed already.
        self._printed_text = False
        self._held: list[Callable[[], None]] | None = None
        #: Live on a terminal: the running sub-agents' region (None while none runs).
        self._agents_live: Live | None = None
        self._draws_agents = live and console.is_terminal and not console.is_dumb_terminal

    def hold(self) -> None:
        """Keep every event from now on until :meth:`release`."""
        if self._held is None:
            self._held = []

    def release(self) -> None:
        """Show the events held, in order, and stop holding."""
        held, self._held = self._held or [], None
        for show in held:
            show()

    def named(self, label: str) -> str:
        """``label`` as this client's screen says it: "you" for :attr:`me`."""
        return named(label, self.me)

    def _print(self, *objects: Any, **kwargs: Any) -> None:
        if self._mid_line:
            self.console.file.write("\n")
            self._mid_line = False
        self.console.print(*objects, **kwargs)

    def _write(self, text: str) -> None:
        """Streamed text, as it came (the terminal wraps it)."""
        self._stop_agents()  # text written as it comes cannot share the screen's bottom
        self.console.file.write(text)
        self.console.file.flush()
        self._mid_line = not text.endswith("\n")

    def _end_line(self) -> None:
        if self._mid_line:
            self.console.file.write("\n")
            self.console.file.flush()
            self._mid_line = False

    def _draw_agents(self) -> None:
        """Live on a terminal: redraw the running sub-agents at the bottom
        (printed lines go above them); gone when none runs."""
        if not self._draws_agents:
            return
        from .render import agent_block

        running = self.turn.running_agents() if self.turn.ended is None else []
        if not running:
            self._stop_agents()
            return
        view = Group(*(agent_block(agent, expandable=False) for agent in running))
        if self._agents_live is None:
            self._end_line()
            self._agents_live = Live(view, console=self.console, refresh_per_second=10, transient=True,
                                     redirect_stdout=False, redirect_stderr=False, vertical_overflow="ellipsis")
            self._agents_live.start()
        else:
            self._agents_live.update(view)

    def _stop_agents(self) -> None:
        if self._agents_live is not None:
            self._agents_live.stop()
            self._agents_live = None

    def close(self) -> None:
        """Take the running sub-agents' region away (the watch is over)."""
        self._stop_agents()

    def _stream(self, text: str) -> None:
        """Not live: print the model's text a whole line at a time as it
        comes (a line above the REPL's open prompt cannot be continued);
        the end of a line waits for its newline, or :meth:`_flush`."""
        self._pending += text
        head, newline, rest = self._pending.rpartition("\n")
        if not newline:
            return
        self._pending = rest
        if head.strip() or self._printed_text:
            self._print(Text(visible(head.lstrip("\n") if not self._printed_text else head)))
            self._printed_text = True

    def _flush(self) -> None:
        """Not live: print what is left of the text so far (before a tool
        call or a question about one, and at the turn's end), so the model's
        words always come before what they led to."""
        text, self._pending = self._pending, ""
        if not self.live and text.strip():
            self._print(Text(visible(text.strip("\n") if not self._printed_text else text.rstrip("\n"))))
        self._printed_text = False

    def on_event(self, event: ServerEvent, *, own_request: str | None = None) -> None:
        """Show ``event`` unless it belongs to ``own_request`` (this
        client's turn, rendered by its own view); kept for later while
        held."""
        if self._held is not None:
            self._held.append(lambda: self._show(event, own_request))
        else:
            self._show(event, own_request)

    def _show(self, event: ServerEvent, own_request: str | None) -> None:
        if isinstance(event, ClientsChanged):
            entry = (event.client.label, event.client.role)
            if event.replayed:
                return  # connected said who is attached now
            if event.change == "joined":
                self.attached.append(entry)
            elif entry in self.attached:
                self.attached.remove(entry)
            watching = " (watching)" if event.client.role == "observer" else ""
            self._print(Text(f"· {self.named(event.client.label)}{watching} {event.change} · "
                             f"{event.clients} attached", style="dim"))
            return
        if isinstance(event, Rewound):
            # One line: what was shown above that point is no longer part
            # of the conversation (a REPL redraws it under the line).
            self._end_line()
            self._stop_agents()
            self.turn = Turn()
            prompt = visible(" ".join(event.prompt.split())[:PROMPT_SHOWN], newlines=False)
            left = f"{event.points} prompt{'s' if event.points != 1 else ''} left"
            back = sum(1 for f in event.files if f.action in ("restored", "deleted"))
            files = f", {back} file{'s' if back != 1 else ''} put back" if back else ""
            how = "restored to before a tool call of" if event.repropose_call_id else "rewound to before"
            self._print(Text(f"⟲ {self.named(event.by) or 'someone'} {how}: {prompt} ({left}{files})", style="yellow"))
            return
        if event.request_id is not None and event.request_id == own_request:
            return
        changes = self.turn.apply(event)
        self._show_changes(changes)
        if any(getattr(c, "agent_id", 0) or isinstance(c, TurnEnded) for c in changes):
            self._draw_agents()

    def _show_changes(self, changes: list[Any]) -> None:
        for change in changes:
            if isinstance(change, TurnBegan):
                prompt = visible(change.prompt[:PROMPT_SHOWN]) + ("…" if len(change.prompt) > PROMPT_SHOWN else "")
                self._print(Text.assemble((f"» {self.named(change.client) or 'someone'}: ", "bold cyan"), prompt))
            elif isinstance(change, TextAdded):
                if self.live:
                    self._write(visible(change.text))
                else:
                    self._stream(change.text)
            elif isinstance(change, ApprovalAsked):
                self._flush()  # the question is drawn after the words that led to it
            elif isinstance(change, ApprovalDecided) and change.decision != "cancelled":
                from .render import decision_said

                self._print(Text(f"  {decision_said(change, by=self.named(change.by))}", style="dim"))
            elif isinstance(change, ToolCallStarted | ToolCallRequested) and change.agent_id:
                # (1.4) A sub-agent's call: nested under its agent, never the answer's text.
                if not getattr(change, "handover", False):
                    agent = self.turn.agents.get(change.agent_id)
                    name = visible(agent.name if agent is not None else f"sub-agent {change.agent_id}")
                    self._print(Text(f"    ↳ {name} ⚙ {visible(change.name)}", style="dim"))
            elif isinstance(change, AgentEnded):
                from .render import agent_summary

                self._print(Text.assemble("  ", agent_summary(change.state)))
            elif isinstance(change, ToolCallStarted | ToolCallRequested) and not getattr(change, "handover", False):
                # A client's tool is asked for (tool_execution_request), a
                # server's starts (tool_started, the only event of it others
                # see): what the model said before calling it comes first.
                self._flush()
                self._print(Text(f"  ⚙ {visible(change.name)}", style="dim"))
                for line in question_lines(change.name, change.args):
                    self._print(Text(f"    {line}", style="cyan"))
            elif isinstance(change, HistoryCompressed):
                self._print(Text(f"  ✦ {change.describe()}", style="dim"))
            elif isinstance(change, TurnEnded) and change.request_id is not None:
                self._flush()
                if self.live:
                    self._end_line()
                if change.reason == "error":
                    self._print(Text(f"  error ({visible(change.error_code or '')}): "
                                     f"{visible(change.error_message or '')}", style="red"))
                elif change.reason == "cancelled":
                    self._print(Text("  cancelled", style="yellow"))

    def summary(self, *, excluding: str | None = None) -> str:
        """``laptop, phone (watching)``: who is attached (``excluding``: all
        but one client of that label, this one)."""
        attached = list(self.attached)
        mine = next((entry for entry in attached if entry[0] == excluding), None)
        if mine is not None:
            attached.remove(mine)
        return ", ".join(visible(label) + (" (watching)" if role == "observer" else "")
                         for label, role in attached)


#: Characters of an ``ask_user`` question shown in its line.
QUESTION_SHOWN = 200


def question_lines(tool: str, args: Any) -> list[str]:
    """The model's ``ask_user`` questions as one line each (``? Header:
    question (option / option)``), made inert and bounded: what a watcher
    sees of a question another client is asked. Empty for other tools or
    questions the tool refuses."""
    if tool != ask_user.NAME or not isinstance(args, dict):
        return []
    try:
        questions = ask_user.parse_questions(args.get("questions"))
    except ToolFailed:
        return []
    lines = []
    for q in questions:
        text = " ".join(q.question.split())
        text = text[:QUESTION_SHOWN] + ("…" if len(text) > QUESTION_SHOWN else "")
        options = ["Yes", "No"] if q.type == "yesno" else [o.label for o in q.options]
        choices = f" ({' / '.join(' '.join(o.split())[:40] for o in options)})" if options else ""
        lines.append(visible(f"? {' '.join(q.header.split())[:40]}: {text}{choices}", newlines=False))
    return lines
