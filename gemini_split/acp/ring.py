"""The last messages of a session, for late joiners (seed 003's replay).

Each ``session/update`` a session sends is kept with its time (Unix ms), a
running number, and whether it opens a turn (the user's message,
``user_message_chunk``). A WebSocket client joining late asks with query
parameters: ``limit=N`` (the last N *whole* turns — never a response cut
mid-stream: a turn whose start has left the ring is not replayed by
``limit``), ``since=MS`` (only messages after that time), ``before=MS``
(only messages before it). Which messages match is decided by the native
protocol's own :func:`~gemini_split.protocol.replay.plan_replay` — one
implementation of limit/since/before for every face — over the ring's
marks; the query is read by the native listener's
:func:`~gemini_split.protocol.replay.replay_from_query`, so both take and
refuse the same values. Pure: the caller gives the clock.

Memory is bounded twice: a ring keeps at most ``capacity`` messages, and
all the rings of one owner (a user's sessions) share a :class:`Budget` of
bytes — the size of each message as sent, counted by the caller. When an
owner's rings hold more than the budget, the oldest messages of the ring
holding the most go first (so one busy session cannot make another's
replay empty while it still has room of its own to give).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from gemini_split.protocol import Replay
from gemini_split.protocol.replay import TURN_START, EventMark, plan_replay

DEFAULT_CAPACITY = 2000
#: Bytes the rings of one owner keep together, by default.
DEFAULT_BUDGET = 32 * 1024 * 1024
#: The mark of a message that does not open a turn.
_UPDATE = "session_update"


@dataclass(frozen=True)
class Entry:
    mark: EventMark
    message: Any
    size: int = 0


class Budget:
    """The bytes one owner's rings may hold together (``limit``), and which
    rings share it."""

    def __init__(self, limit: int = DEFAULT_BUDGET):
        if limit < 1:
            raise ValueError("a replay budget needs room for at least one byte")
        self.limit = limit
        self.used = 0
        self.rings: list[Ring] = []

    def trim(self) -> None:
        """Drop the oldest messages of the fullest ring until the rings fit."""
        while self.used > self.limit:
            fullest = max(self.rings, key=lambda ring: ring.bytes, default=None)
            if fullest is None or not fullest.drop_oldest():
                return


class Ring:
    """At most ``capacity`` messages, oldest dropped first; with a
    ``budget``, at most what the budget leaves (see the module docstring).
    :meth:`release` gives the ring's bytes back when its session ends."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY, budget: Budget | None = None):
        if capacity < 1:
            raise ValueError("the replay ring needs room for at least one message")
        self.capacity = capacity
        self._entries: deque[Entry] = deque()
        self._seq = 0
        #: Bytes of the messages kept.
        self.bytes = 0
        self.budget = budget if budget is not None else Budget(2**62)
        self.budget.rings.append(self)

    def __len__(self) -> int:
        return len(self._entries)

    def append(self, message: Any, *, user_turn: bool = False, now_ms: int | None = None, size: int = 0) -> None:
        """Keep ``message`` (``size`` bytes); ``user_turn``: it opens a new turn."""
        ms = int(time.time() * 1000) if now_ms is None else now_ms
        self._seq += 1
        self._entries.append(Entry(EventMark(self._seq, ms, None, TURN_START if user_turn else _UPDATE), message, size))
        self.bytes += size
        self.budget.used += size
        while len(self._entries) > self.capacity:
            self.drop_oldest()
        self.budget.trim()

    def drop_oldest(self) -> bool:
        """Forget the oldest message; False when there is none."""
        if not self._entries:
            return False
        entry = self._entries.popleft()
        self.bytes -= entry.size
        self.budget.used -= entry.size
        return True

    def release(self) -> None:
        """Forget everything and leave the budget (the session has ended)."""
        while self.drop_oldest():
            pass
        if self in self.budget.rings:
            self.budget.rings.remove(self)

    def replay(self, replay: Replay) -> list[Any]:
        """The kept messages ``replay`` asks for, oldest first."""
        entries = list(self._entries)
        plan = plan_replay([e.mark for e in entries], replay, upto=self._seq)
        if not entries or not plan.seqs:
            return []
        first = entries[0].mark.seq
        return [entries[seq - first].message for seq in plan.seqs]
