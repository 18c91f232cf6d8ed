"""The last messages of a session, for late joiners (seed 003's replay).

Each ``session/update`` a session sends is kept with its time (Unix ms) and
the turn it belongs to; a turn starts with the user's message
(``user_message_chunk``). A WebSocket client joining late asks with query
parameters: ``limit=N`` (the last N *whole* turns — never a response cut
mid-stream: a turn whose start has left the ring is not replayed by
``limit``), ``since=MS`` (only messages after that time), ``before=MS``
(only messages before it). Pure: the caller gives the clock.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Any

DEFAULT_CAPACITY = 2000


@dataclass(frozen=True)
class Entry:
    ms: int
    turn: int
    starts_turn: bool
    message: Any


class Ring:
    """At most ``capacity`` messages, oldest dropped first."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY):
        if capacity < 1:
            raise ValueError("the replay ring needs room for at least one message")
        self._entries: deque[Entry] = deque(maxlen=capacity)
        self._turn = 0

    def __len__(self) -> int:
        return len(self._entries)

    def append(self, message: Any, *, user_turn: bool = False, now_ms: int | None = None) -> None:
        """Keep ``message``; ``user_turn``: it opens a new turn."""
        if user_turn:
            self._turn += 1
        ms = int(time.time() * 1000) if now_ms is None else now_ms
        self._entries.append(Entry(ms, self._turn, user_turn, message))

    def replay(self, *, limit: int | None = None, since: int | None = None,
               before: int | None = None) -> list[Any]:
        """The kept messages that match, oldest first."""
        entries = [e for e in self._entries
                   if (since is None or e.ms > since) and (before is None or e.ms < before)]
        if limit is not None:
            if limit <= 0:
                return []
            whole = {e.turn for e in self._entries if e.starts_turn}
            turns = sorted({e.turn for e in entries if e.turn in whole})[-limit:]
            keep = set(turns)
            entries = [e for e in entries if e.turn in keep]
        return [e.message for e in entries]


def parse_replay_query(query: dict[str, str]) -> dict[str, int | None]:
    """``limit``, ``since``, ``before`` from a query string's parameters;
    raises :class:`ValueError` naming a value that is not a whole number."""
    out: dict[str, int | None] = {"limit": None, "since": None, "before": None}
    for name in out:
        value = query.get(name)
        if value is None or value == "":
            continue
        try:
            number = int(value)
        except ValueError:
            raise ValueError(f"{name} must be a whole number, not {value[:40]!r}") from None
        if number < 0:
            raise ValueError(f"{name} must not be negative")
        out[name] = number
    return out
