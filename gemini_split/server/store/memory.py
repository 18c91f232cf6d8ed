"""A session store that lives in this process only (``--state-dir :memory:``).

Sessions survive a dropped connection but not the process. It is also the
floor ``bench/sessions.py`` measures the SQLite store against.
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from . import DEFAULT_REPLAY_CAPACITY, EventMark, SessionRecord, SessionStore, SessionSummary, StoredEvent
from .pairing import MemoryPairing


class MemoryStore(SessionStore):
    def __init__(self, *, replay_capacity: int = DEFAULT_REPLAY_CAPACITY):
        self.replay_capacity = replay_capacity
        self._sessions: dict[str, SessionRecord] = {}
        self._events: dict[str, deque[StoredEvent]] = {}
        # The highest seq ever dropped per session (so gaps are detected).
        self._dropped: dict[str, int] = {}
        self._pairing = MemoryPairing()

    def paired_browsers(self) -> MemoryPairing:
        return self._pairing

    async def aclose(self) -> None:
        return None

    async def create(self, record: SessionRecord) -> None:
        self._sessions[record.id] = copy.deepcopy(record)
        self._events[record.id] = deque()
        self._dropped[record.id] = 0

    async def get(self, session_id: str) -> SessionRecord | None:
        record = self._sessions.get(session_id)
        return copy.deepcopy(record) if record is not None else None

    async def list_sessions(self, owner: str) -> list[SessionSummary]:
        mine = [r for r in self._sessions.values() if r.owner == owner]
        mine.sort(key=lambda r: r.updated, reverse=True)
        return [SessionSummary(r.id, r.title, r.created, r.updated, r.turns, r.model, r.project) for r in mine]

    async def delete(self, session_id: str) -> bool:
        self._events.pop(session_id, None)
        self._dropped.pop(session_id, None)
        return self._sessions.pop(session_id, None) is not None

    async def save_turn(self, session_id: str, *, history: list[dict[str, Any]], updated: float, turns: int,
                        title: str | None = None, model: str | None = None,
                        running_request: str | None = None, timeline: dict[str, Any] | None = None,
                        archive: list[dict[str, Any]] | None = None) -> None:
        record = self._sessions.get(session_id)
        if record is None:
            return
        changes: dict[str, Any] = {"history": copy.deepcopy(history), "updated": updated, "turns": turns,
                                   "running_request": running_request}
        if timeline is not None:
            changes["timeline"] = copy.deepcopy(timeline)
        if archive is not None:
            changes["archive"] = copy.deepcopy(archive)
        if title is not None:
            changes["title"] = title
        if model is not None:
            changes["model"] = model
        self._sessions[session_id] = replace(record, **changes)

    async def set_running(self, session_id: str, request_id: str | None, *, updated: float) -> None:
        record = self._sessions.get(session_id)
        if record is not None:
            record.running_request = request_id
            record.updated = updated

    async def set_token_hash(self, session_id: str, token_hash: str) -> None:
        record = self._sessions.get(session_id)
        if record is not None:
            record.token_hash = token_hash

    def append_events(self, session_id: str, events: Sequence[StoredEvent]) -> None:
        log = self._events.get(session_id)
        record = self._sessions.get(session_id)
        if log is None or record is None:
            return
        log.extend(events)
        while len(log) > self.replay_capacity:
            self._dropped[session_id] = log.popleft().seq
        if events:
            record.last_seq = max(record.last_seq, events[-1].seq)

    async def flush(self) -> None:
        return None

    async def events_after(self, session_id: str, last_seq: int, limit: int | None = None) -> list[StoredEvent] | None:
        log = self._events.get(session_id)
        if log is None:
            return None
        if last_seq < self._dropped.get(session_id, 0):
            return None
        after = [e for e in log if e.seq > last_seq]
        return after if limit is None else after[:limit]

    async def event_marks(self, session_id: str) -> list[EventMark] | None:
        log = self._events.get(session_id)
        if log is None:
            return None
        return [EventMark(e.seq, e.timestamp, e.request_id, e.type) for e in log]

    async def expire(self, idle_before: float) -> list[str]:
        gone = [sid for sid, r in self._sessions.items() if r.updated < idle_before]
        for sid in gone:
            await self.delete(sid)
        return gone
