"""A session's unsent events, coalesced under back-pressure.

The agent loop ``put``s events; the connection's writer ``take``s whatever
has gathered. While the writer waits on a slow peer, adjacent deltas of one
stream merge (up to :data:`MERGE_LIMIT` characters each, joined once when
taken, so merging stays linear however much arrives), so a fast model never
makes the server buffer one frame per token. ``put`` waits once ``limit``
distinct events or ``max_bytes`` characters of delta content are pending: a
stalled peer slows only its own session, and a session holds a bounded
amount of unsent text.
"""

from __future__ import annotations

import trio

from gemini_split.protocol import ServerEvent, TextDelta, ThinkingDelta, ToolDelta
from msgspec.structs import replace

from gemini_split.protocol.event_log import MERGE_LIMIT, same_stream

_DELTAS = (TextDelta, ThinkingDelta, ToolDelta)

#: ``put`` yields to the other tasks at least this often, so a model that
#: never waits cannot hold the Trio thread while the outbox has room.
_FAIRNESS = 64


class Outbox:
    def __init__(self, limit: int = 1000, *, max_bytes: int = 4 * 1024 * 1024, merge_limit: int = MERGE_LIMIT):
        self.limit = limit
        self.max_bytes = max_bytes
        self.merge_limit = merge_limit
        self._pending: list[ServerEvent] = []
        #: Contents of the delta run that ends ``_pending[-1]`` (empty when
        #: the last event is not a delta); joined into it when taken.
        self._run: list[str] = []
        self._run_size = 0
        self._bytes = 0
        self._puts = 0
        self._readable = trio.Event()
        self._writable = trio.Event()
        self._writable.set()

    def __len__(self) -> int:
        return len(self._pending)

    async def put(self, event: ServerEvent) -> None:
        """Queue an event; wait while the outbox is full."""
        self._puts += 1
        if self._puts % _FAIRNESS == 0:
            await trio.lowlevel.checkpoint()
        while self._full():
            await self._writable.wait()
        self.put_nowait(event)

    def put_nowait(self, event: ServerEvent) -> None:
        """Queue an event whatever the limit (errors and replies must not
        wait behind a stalled stream)."""
        if isinstance(event, _DELTAS):
            size = len(event.content)
            self._bytes += size
            if self._run and same_stream(self._pending[-1], event) and self._run_size + size <= self.merge_limit:
                self._run.append(event.content)
                self._run_size += size
                self._note_full()
                return
            self._close_run()
            self._run = [event.content]
            self._run_size = size
        else:
            self._close_run()
            self._run = []
        self._pending.append(event)
        self._note_full()
        self._readable.set()

    async def take(self) -> list[ServerEvent]:
        """Every pending event, oldest first. Waits for one."""
        while not self._pending:
            self._readable = trio.Event()
            await self._readable.wait()
        self._close_run()
        batch, self._pending, self._run, self._bytes = self._pending, [], [], 0
        self._writable.set()
        return batch

    def _full(self) -> bool:
        return len(self._pending) >= self.limit or self._bytes >= self.max_bytes

    def _note_full(self) -> None:
        if self._full() and self._writable.is_set():
            self._writable = trio.Event()

    def _close_run(self) -> None:
        if len(self._run) > 1:
            self._pending[-1] = replace(self._pending[-1], content="".join(self._run))
