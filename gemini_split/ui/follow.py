"""Rendering what other clients of a session do (``gemini-split attach``).

A :class:`Follower` turns session events that are not this client's own
turn into terminal lines: who joined or left, another client's prompt, its
answer, the tools it ran. Everything another client or the model wrote is
shown through :func:`~gemini_split.ui.safe_text.visible`: an escape
sequence in a prompt or an answer is displayed, never obeyed.
"""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from gemini_split.protocol import (
    ClientsChanged,
    Error,
    Finished,
    RequestStarted,
    ServerEvent,
    TextDelta,
    ToolCallAnswered,
    ToolExecutionRequest,
)

from .safe_text import visible

#: Characters of a prompt shown in a heading.
PROMPT_SHOWN = 200


class Follower:
    """``live``: write answers as they stream (watch mode, nothing else on
    the screen); otherwise print each answer whole when it ends (the REPL,
    whose prompt must not be broken up)."""

    def __init__(self, console: Console, *, live: bool):
        self.console = console
        self.live = live
        #: The latest attached clients, for a toolbar: ``[(label, role)]``.
        self.attached: list[tuple[str, str]] = []
        #: The session ``attached`` is about (set by whoever fills it).
        self.session: str | None = None
        self._answer: dict[str, list[str]] = {}

    def on_event(self, event: ServerEvent, *, own_request: str | None = None) -> None:
        """Show ``event`` unless it belongs to ``own_request`` (this
        client's turn, rendered by its own view)."""
        if isinstance(event, ClientsChanged):
            entry = (event.client.label, event.client.role)
            if event.replayed:
                return  # connected said who is attached now
            if event.change == "joined":
                self.attached.append(entry)
            elif entry in self.attached:
                self.attached.remove(entry)
            watching = " (watching)" if event.client.role == "observer" else ""
            self.console.print(Text(f"· {visible(event.client.label)}{watching} {event.change} · "
                                    f"{event.clients} attached", style="dim"))
            return
        if event.request_id is not None and event.request_id == own_request:
            return
        if isinstance(event, RequestStarted):
            prompt = visible(event.prompt[:PROMPT_SHOWN]) + ("…" if len(event.prompt) > PROMPT_SHOWN else "")
            self.console.print(Text.assemble((f"» {visible(event.client) or 'someone'}: ", "bold cyan"), prompt))
            self._answer[event.request_id or ""] = []
        elif isinstance(event, TextDelta):
            if self.live:
                self.console.print(Text(visible(event.content)), end="")
            else:
                self._answer.setdefault(event.request_id or "", []).append(event.content)
        elif isinstance(event, ToolExecutionRequest) and not event.handover:
            self.console.print(Text(f"  ⚙ {visible(event.tool)}", style="dim"))
        elif isinstance(event, ToolCallAnswered):
            pass
        elif isinstance(event, Finished | Error) and event.request_id is not None:
            text = "".join(self._answer.pop(event.request_id, []))
            if self.live:
                self.console.print()
            elif text:
                self.console.print(Text(visible(text)))
            if isinstance(event, Error):
                self.console.print(Text(f"  error ({visible(event.code)}): {visible(event.message)}", style="red"))
            elif event.reason == "cancelled":
                self.console.print(Text("  cancelled", style="yellow"))

    def summary(self) -> str:
        """``laptop, phone (watching)``: who is attached."""
        return ", ".join(visible(label) + (" (watching)" if role == "observer" else "")
                         for label, role in self.attached)
