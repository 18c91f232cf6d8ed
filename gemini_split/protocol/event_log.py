"""The session event log and delta coalescing.

Plain synchronous code: no I/O, no clock, no event loop. (The connection's
state machine is in :mod:`.connection`.)
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from msgspec.structs import replace

from .codec import DEFAULT_MAX_MESSAGE_SIZE, encode
from .error_codes import ErrorCode, RemoteProtocolError
from .messages import (
    ServerEvent,
    TextDelta,
    ThinkingDelta,
    ToolDelta,
)


class ReplayUnavailable(RemoteProtocolError):
    def __init__(self, message: str):
        super().__init__(ErrorCode.REPLAY_UNAVAILABLE, message)


class EventLog:
    """Numbers a session's events and remembers the latest for replay.

    ``append`` gives each event the next ``seq`` (from 1) and encodes it once
    (the sender writes that text). ``since(n)`` returns every kept event with
    ``seq > n`` in order, or raises :class:`ReplayUnavailable` when some of
    them were already dropped. The log keeps the most recent events within
    two bounds: at most ``capacity`` events and at most ``max_bytes`` bytes
    of their encoded text (an event larger than that alone is not kept).
    """

    def __init__(self, capacity: int = 10_000, max_bytes: int = DEFAULT_MAX_MESSAGE_SIZE):
        self.capacity = capacity
        self.max_bytes = max_bytes
        self._events: deque[tuple[ServerEvent, int]] = deque()
        self.bytes = 0
        self.last_seq = 0

    def append(self, event: ServerEvent) -> tuple[ServerEvent, str]:
        """The event numbered, and its JSON text."""
        self.last_seq += 1
        event = replace(event, seq=self.last_seq)
        text = encode(event)
        size = len(text)
        self._events.append((event, size))
        self.bytes += size
        while self._events and (len(self._events) > self.capacity or self.bytes > self.max_bytes):
            self.bytes -= self._events.popleft()[1]
        return event, text

    def __len__(self) -> int:
        return len(self._events)

    def kept(self) -> list[ServerEvent]:
        """Every event still kept, oldest first."""
        return [e for e, _ in self._events]

    def since(self, last_seq: int) -> list[ServerEvent]:
        if last_seq >= self.last_seq:
            return []
        oldest = self._events[0][0].seq if self._events else self.last_seq + 1
        if last_seq + 1 < oldest:
            raise ReplayUnavailable(
                f"events {last_seq + 1}..{oldest - 1} are no longer kept; "
                "start a new session"
            )
        return [e for e, _ in self._events if e.seq > last_seq]


#: Characters one merged delta may hold: a lagging peer gets large frames,
#: never one over its message size limit, and merging stays linear.
MERGE_LIMIT = 256 * 1024


def coalesce(events: Iterable[ServerEvent], *, limit: int = MERGE_LIMIT) -> list[ServerEvent]:
    """Merge runs of adjacent deltas of the same stream into one event.

    Used by a sender that fell behind: the peer sees the same text in fewer,
    larger pieces (each at most ``limit`` characters, unless one delta alone
    is larger), and nothing else changes order. Text and thinking deltas
    merge per request; tool output per call and stream. Linear in the total
    size: the pieces of a run are joined once.
    """
    out: list[ServerEvent] = []
    run: list[str] = []  # contents of the run that ends out[-1]
    size = 0

    def close_run() -> None:
        if len(run) > 1:
            out[-1] = replace(out[-1], content="".join(run))

    for event in events:
        if out and run and same_stream(out[-1], event) and size + len(event.content) <= limit:
            run.append(event.content)
            size += len(event.content)
            continue
        close_run()
        out.append(event)
        run = [event.content] if isinstance(event, TextDelta | ThinkingDelta | ToolDelta) else []
        size = len(event.content) if run else 0
    if out:
        close_run()
    return out


def same_stream(a: ServerEvent, b: ServerEvent) -> bool:
    """Whether ``b`` continues the delta stream ``a`` belongs to."""
    if type(a) is not type(b) or a.request_id != b.request_id:
        return False
    if isinstance(a, TextDelta | ThinkingDelta):
        return a.agent_id == b.agent_id  # a sub-agent's text is its own stream
    if isinstance(a, ToolDelta):
        return a.call_id == b.call_id and a.stream == b.stream
    return False
