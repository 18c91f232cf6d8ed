"""What this REPL session did, counted turn by turn for ``/stats``."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from gemini_split.protocol import Usage
from gemini_split.ui.oneshot import RunStats
from gemini_split.ui.render import TurnView


@dataclasses.dataclass
class SessionStats:
    """What this session did, for /stats."""

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
