"""The last messages of a session, for late joiners (seed 003's replay).

Each ``session/update`` a session sends is kept with its time (Unix ms), a
running number, and whether it opens a turn (the user's message,
``user_message_chunk``). A WebSocket client joining late asks with query
parameters: ``limit=N`` (the last N *whole* turns — never a response cut
mid-stream: a turn whose start has left the ring is not replayed by
``limit``), ``since=MS`` (only messages after that time), ``before=MS``
(only messages before it). Which messages match is decided by the native
protocol's own :func:`~gemini_split.server.replay.plan_replay` — one
implementation of limit/since/before for every face — over the ring's
marks; the query is read by the native listener's
:func:`~gemini_split.server.replay.replay_from_query`, so both take and
refuse the same values. Pure: the caller gives the clock.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from gemini_split.protocol import Replay
from gemini_split.server.replay import TURN_START, plan_replay
from gemini_split.server.store import EventMark

DEFAULT_CAPACITY = 2000
#: The mark of a message that does not open a turn.
_UPDATE = "session_update"


@dataclass(frozen=True)
class Entry:
    mark: EventMark
    message: Any


class Ring:
    """At most ``capacity`` messages, oldest dropped first."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY):
        if capacity < 1:
            raise ValueError("the replay ring needs room for at least one message")
        self._entries: deque[Entry] = deque(maxlen=capacity)
        self._seq = 0

    def __len__(self) -> int:
        return len(self._entries)

    def append(self, message: Any, *, user_turn: bool = False, now_ms: int | None = None) -> None:
        """Keep ``message``; ``user_turn``: it opens a new turn."""
        ms = int(time.time() * 1000) if now_ms is None else now_ms
        self._seq += 1
        self._entries.append(Entry(EventMark(self._seq, ms, None, TURN_START if user_turn else _UPDATE), message))

    def replay(self, replay: Replay) -> list[Any]:
        """The kept messages ``replay`` asks for, oldest first."""
        entries = list(self._entries)
        plan = plan_replay([e.mark for e in entries], replay, upto=self._seq)
        if not entries or not plan.seqs:
            return []
        first = entries[0].mark.seq
        return [entries[seq - first].message for seq in plan.seqs]
