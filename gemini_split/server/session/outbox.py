"""A session's unsent events, coalesced under back-pressure.

The agent loop ``put``s events; the connection's writer ``take``s whatever
has gathered. While the writer waits on a slow peer, deltas of one stream
merge (up to :data:`MERGE_LIMIT` characters each, joined once when taken, so
merging stays linear however much arrives), so a fast model never makes the
server buffer one frame per token. Deltas of several streams interleaved
(sub-agents streaming at once, issue 32) merge per stream within the run of
deltas at the end of the outbox when nothing else of the same agent came
after (its text never moves past its thought, a call's stdout past its
stderr), and no delta moves past an event that is not a delta. ``put`` waits once ``limit``
distinct events or ``max_bytes`` characters of delta content are pending: a
stalled peer slows only its own session, and a session holds a bounded
amount of unsent text.
"""

from __future__ import annotations

import trio

from gemini_split.protocol import ServerEvent, TextDelta, ThinkingDelta, ToolDelta
from msgspec.structs import replace

from gemini_split.protocol.event_log import MERGE_LIMIT

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
        #: The deltas at the end of ``_pending`` (after its last event that
        #: is not one), by stream: the index of the stream's delta there and
        #: the contents merged into it, joined into it when taken.
        self._runs: dict[tuple, tuple[int, list[str]]] = {}
        self._run_sizes: dict[tuple, int] = {}
        #: The stream of each agent's last delta there, by (request, agent).
        self._last: dict[tuple, tuple] = {}
        self._bytes = 0
        self._puts = 0
        self._readable = trio.Event()
        self._woken = False
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
            key = stream_key(event)
            owner = (event.request_id, event.agent_id)  # type: ignore[attr-defined]
            run = self._runs.get(key)
            if run is not None and self._last.get(owner) == key and self._run_sizes[key] + size <= self.merge_limit:
                run[1].append(event.content)
                self._run_sizes[key] += size
                self._note_full()
                return
            if run is not None:
                self._close(run)
            self._runs[key] = (len(self._pending), [event.content])
            self._run_sizes[key] = size
            self._last[owner] = key
        else:
            self._close_runs()
        self._pending.append(event)
        self._note_full()
        self._readable.set()

    def wake(self) -> None:
        """Make the taker's next (or current) :meth:`take` return, with
        nothing if nothing is pending (its owner has other work)."""
        self._woken = True
        self._readable.set()

    async def take(self) -> list[ServerEvent]:
        """Every pending event, oldest first. Waits for one (or for
        :meth:`wake`: then possibly none)."""
        while not self._pending and not self._woken:
            self._readable = trio.Event()
            await self._readable.wait()
        self._woken = False
        if not self._pending:
            return []
        self._close_runs()
        batch, self._pending, self._bytes = self._pending, [], 0
        self._writable.set()
        return batch

    def _full(self) -> bool:
        return len(self._pending) >= self.limit or self._bytes >= self.max_bytes

    def _note_full(self) -> None:
        if self._full() and self._writable.is_set():
            self._writable = trio.Event()

    def _close(self, run: tuple[int, list[str]]) -> None:
        index, contents = run
        if len(contents) > 1:
            self._pending[index] = replace(self._pending[index], content="".join(contents))

    def _close_runs(self) -> None:
        if self._runs:
            for run in self._runs.values():
                self._close(run)
            self._runs.clear()
            self._run_sizes.clear()
            self._last.clear()


def stream_key(event: ServerEvent) -> tuple:
    """What a delta's stream is (:func:`same_stream` as a key): its type and
    request, and its agent (text, thought) or call and stream (tool output)."""
    if isinstance(event, ToolDelta):
        return (ToolDelta, event.request_id, event.call_id, event.stream)
    return (type(event), event.request_id, event.agent_id)  # type: ignore[attr-defined]
