"""What this REPL session did, counted turn by turn for ``/stats``, and
what is said of it when the REPL ends (gemini-cli's exit summary)."""

from __future__ import annotations

import dataclasses
import shlex
import time
from collections.abc import Callable
from typing import Any

from rich.table import Table
from rich.text import Text

from gemini_split.protocol import Usage
from gemini_split.ui.oneshot import RunStats
from gemini_split.ui.render import TurnView
from gemini_split.ui.safe_text import visible

#: gemini-cli's words as it exits.
GOODBYE = "Agent powering down. Goodbye!"


@dataclasses.dataclass
class SessionStats:
    """What this session did, for /stats."""

    #: The session's id ("" until one is open).
    session_id: str = ""
    started: float = dataclasses.field(default_factory=time.monotonic)
    usage: Usage = dataclasses.field(default_factory=Usage)
    turns: int = 0
    tool_calls: int = 0
    model_time: float = 0.0
    #: Prompt tokens of the last turn, and whether that was one model call.
    last_prompt_tokens: int = 0
    last_turn_single_call: bool = True
    #: Per model (the name the turn ran on): requests, tokens and tool
    #: calls counted as gemini-cli counts them (``/stats model|tools``).
    by_model: dict[str, RunStats] = dataclasses.field(default_factory=dict)

    def counter(self, model: str) -> Callable[[Any], None]:
        """What a turn on ``model`` feeds its changes to."""
        return self.by_model.setdefault(model, RunStats(model=model)).count

    #: (1.4) Per sub-agent name: ``[runs, turns, tool calls, usage]``
    #: (their tokens are part of ``usage``, their calls of ``tool_calls``).
    agents: dict[str, list[Any]] = dataclasses.field(default_factory=dict)

    def add_turn(self, usage: Usage | None, view: TurnView) -> None:
        self.turns += 1
        self.tool_calls += view.tool_calls
        for agent in view.turn.agents.values():
            row = self.agents.setdefault(agent.name, [0, 0, 0, Usage()])
            row[0] += 1
            row[1] += agent.turns
            row[2] += agent.tool_calls
            row[3] = row[3] + (agent.usage or Usage())
        self.model_time += view.elapsed
        if usage is not None:
            self.usage = self.usage + usage
            self.last_prompt_tokens = usage.prompt_tokens
            self.last_turn_single_call = view.tool_calls == 0

    def wall_time(self) -> str:
        """How long the session has been open in this REPL: ``2 min 5 s``."""
        minutes, seconds = divmod(int(time.monotonic() - self.started), 60)
        return f"{minutes} min {seconds} s"

    @property
    def usage_reported(self) -> bool:
        """False when turns ran and the server reported no usage (gemini.v1
        over gRPC has no field for it): it did not spend zero tokens."""
        return not self.turns or bool(self.usage.prompt_tokens or self.usage.total_tokens)


def resume_command(session_id: str, server: str | None) -> str:
    """The command that resumes ``session_id`` later, as typed in a POSIX
    shell: ``gemini-split --resume ID``, with ``--server SERVER`` (a
    profile's name, ``local`` or an address, as the session was reached)
    for a session that is not in embedded mode's store."""
    return shlex.join(["gemini-split", "--resume", session_id, *(("--server", server) if server else ())])


def goodbye(stats: SessionStats, *, resume: str | None, deleted: bool = False) -> list[Any]:
    """What the REPL prints as it ends, for the session ``stats`` counted:
    its id, its turns, tokens and wall time in this REPL, and ``resume``
    (:func:`resume_command`; None when nothing was saved to resume). A
    session with nothing sent and nothing saved gets one line."""
    if not (stats.turns or resume or deleted):
        return [Text(f"{GOODBYE} Nothing was sent, so no session was saved.", style="dim")]
    u = stats.usage
    tokens = (f"{u.prompt_tokens:,} in · {u.output_tokens:,} out" if stats.usage_reported
              else "not reported by the server")
    rows = [
        ("session", visible(stats.session_id, newlines=False) + (" (deleted)" if deleted else "")),
        ("turns", f"{stats.turns} ({stats.tool_calls} tool call{'s' * (stats.tool_calls != 1)})"),
        ("tokens", tokens if stats.turns else "nothing sent"),
        ("time", stats.wall_time()),
    ]
    table = Table(show_header=False, box=None, padding=(0, 2), collapse_padding=True)
    for key, value in rows:
        table.add_row(Text(key, style="bold"), Text(value))
    lines: list[Any] = [Text(GOODBYE, style="bold"), table]
    if resume is not None:
        lines.append(Text.assemble("To resume this session: ", (visible(resume, newlines=False), "bold")))
    return lines
