"""A session's unsent events, coalesced under back-pressure.

The agent loop ``put``s events; the connection's writer ``take``s whatever
has gathered, numbered by the session's event log. While the writer waits on a
slow peer, adjacent deltas merge, so a fast model never makes the server
buffer one frame per token, and a stalled peer makes ``put`` wait once
``limit`` distinct events are pending.
"""

from __future__ import annotations

import trio

from gemini_split.protocol import EventLog, ServerEvent, coalesce
from gemini_split.stamping import stamp


class Outbox:
    def __init__(self, log: EventLog, limit: int = 1000):
        self.log = log
        self.limit = limit
        self._pending: list[ServerEvent] = []
        self._readable = trio.Event()
        self._writable = trio.Event()
        self._writable.set()

    async def put(self, event: ServerEvent) -> None:
        while len(self._pending) >= self.limit:
            await self._writable.wait()
        self.put_nowait(event)

    def put_nowait(self, event: ServerEvent) -> None:
        """Queue an event whatever the limit (errors and replies must not
        wait behind a stalled stream)."""
        if self._pending:
            merged = coalesce([self._pending[-1], event])
            if len(merged) == 1:
                self._pending[-1] = merged[0]
                return
        self._pending.append(event)
        if len(self._pending) >= self.limit:
            self._writable = trio.Event()
        self._readable.set()

    async def take(self) -> list[ServerEvent]:
        """Every pending event, numbered, oldest first. Waits for one."""
        while not self._pending:
            self._readable = trio.Event()
            await self._readable.wait()
        batch, self._pending = self._pending, []
        self._writable.set()
        return [self.log.append(stamp(event)) for event in batch]
