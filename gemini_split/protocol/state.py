"""Per-role connection state, the session event log, and delta coalescing.

All of it is plain synchronous code: no I/O, no clock, no event loop. The I/O
layers (``gemini_split.server``, ``gemini_split.client``) feed messages in and
act on what comes out.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from enum import Enum

from msgspec.structs import replace

from .codec import check_version
from .errors import ErrorCode, RemoteProtocolError
from .messages import (
    Connected,
    Error,
    Hello,
    Message,
    ServerEvent,
    TextDelta,
    ThinkingDelta,
    ToolDelta,
)


class Phase(Enum):
    AWAITING_HELLO = "awaiting_hello"  # server: nothing but hello yet
    AWAITING_CONNECTED = "awaiting_connected"  # client: hello sent
    OPEN = "open"


# The one table of what each role may receive in each phase. ``None`` means
# "any message the other role sends".
_RECEIVABLE: dict[tuple[str, Phase], frozenset[str] | None] = {
    ("server", Phase.AWAITING_HELLO): frozenset({Hello.TYPE}),
    ("server", Phase.OPEN): None,
    ("client", Phase.AWAITING_CONNECTED): frozenset({Connected.TYPE, Error.TYPE}),
    ("client", Phase.OPEN): None,
}


class ConnectionState:
    """What one side of a connection may receive next.

    ``role`` is ``"server"`` or ``"client"``. Call :meth:`receive` with each
    decoded message before acting on it: it raises
    :class:`RemoteProtocolError` (``unexpected_message`` or
    ``unsupported_version``) for a message the peer should not have sent now,
    and moves the phase on when the handshake completes.
    """

    def __init__(self, role: str):
        if role not in ("server", "client"):
            raise ValueError(f"role must be 'server' or 'client', not {role!r}")
        self.role = role
        self.phase = Phase.AWAITING_HELLO if role == "server" else Phase.AWAITING_CONNECTED

    def receive(self, message: Message) -> None:
        allowed = _RECEIVABLE.get((self.role, self.phase), frozenset())
        if allowed is not None and message.TYPE not in allowed:
            expected = " or ".join(sorted(allowed)) or "nothing"
            raise RemoteProtocolError(
                ErrorCode.UNEXPECTED_MESSAGE,
                f"expected {expected} in phase {self.phase.value}, got {message.TYPE}",
                field="type",
            )
        if message.SENDER not in (_peer(self.role), "either"):
            raise RemoteProtocolError(
                ErrorCode.UNEXPECTED_MESSAGE,
                f"{message.TYPE} is sent by a {message.SENDER}, not by a {_peer(self.role)}",
                field="type",
            )
        if isinstance(message, Hello | Connected):
            check_version(message.protocol_version)
            self.phase = Phase.OPEN


def _peer(role: str) -> str:
    return "client" if role == "server" else "server"


class ReplayUnavailable(RemoteProtocolError):
    def __init__(self, message: str):
        super().__init__(ErrorCode.REPLAY_UNAVAILABLE, message)


class EventLog:
    """Numbers a session's events and remembers the latest for replay.

    ``append`` gives each event the next ``seq`` (from 1). ``since(n)``
    returns every kept event with ``seq > n`` in order, or raises
    :class:`ReplayUnavailable` when some of them were already dropped (the
    log keeps the most recent ``capacity`` events).
    """

    def __init__(self, capacity: int = 10_000):
        self.capacity = capacity
        self._events: deque[ServerEvent] = deque(maxlen=capacity)
        self.last_seq = 0

    def append(self, event: ServerEvent) -> ServerEvent:
        self.last_seq += 1
        event = replace(event, seq=self.last_seq)
        self._events.append(event)
        return event

    def since(self, last_seq: int) -> list[ServerEvent]:
        if last_seq >= self.last_seq:
            return []
        oldest = self._events[0].seq if self._events else self.last_seq + 1
        if last_seq + 1 < oldest:
            raise ReplayUnavailable(
                f"events {last_seq + 1}..{oldest - 1} are no longer kept; "
                "start a new session"
            )
        return [e for e in self._events if e.seq > last_seq]


def coalesce(events: Iterable[ServerEvent]) -> list[ServerEvent]:
    """Merge runs of adjacent deltas of the same stream into one event.

    Used by a sender that fell behind: the peer sees the same text in fewer,
    larger pieces, and nothing else changes order. Text and thinking deltas
    merge per request; tool output per call and stream.
    """
    out: list[ServerEvent] = []
    for event in events:
        if out and _same_stream(out[-1], event):
            prev = out[-1]
            out[-1] = replace(prev, content=prev.content + event.content)
        else:
            out.append(event)
    return out


def _same_stream(a: ServerEvent, b: ServerEvent) -> bool:
    if type(a) is not type(b) or a.request_id != b.request_id:
        return False
    if isinstance(a, TextDelta | ThinkingDelta):
        return True
    if isinstance(a, ToolDelta):
        return a.call_id == b.call_id and a.stream == b.stream
    return False
