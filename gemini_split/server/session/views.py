"""A view: one connection attached to a session, with its own outbox.

The session's pump numbers, logs and encodes each event once and offers
the same ``(event, text)`` pairs to every view (:meth:`View.offer`); the
view's writer (``server/service.py``) takes them (:meth:`View.take`) and
writes them at the connection's pace. Replies meant for one connection go
straight to its view (:meth:`View.send_direct`). See ``server/session/manager.py``
for the whole shape.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import trio

from gemini_split.protocol import ClientInfo, ServerEvent, ToolSpec, encode
from gemini_split.stamping import stamp

DRIVER = "driver"
OBSERVER = "observer"

#: Seconds per attached view between two batches a session hands its views.
FAN_OUT_INTERVAL_PER_VIEW = 50e-6
#: Seconds between two batches of a session at the least, however few views.
MIN_BATCH_INTERVAL = 1e-3


def fan_out_interval(views: int) -> float:
    """The least time between two batches of a session with ``views``
    views: :data:`MIN_BATCH_INTERVAL`, or ``views`` ×
    :data:`FAN_OUT_INTERVAL_PER_VIEW` when that is longer, so its writes
    cost about the same CPU per second however many clients watch it.
    Meanwhile a delta stream merges in the session's outbox: 100 watchers
    get a frame every 5 ms (the text whole, in fewer, larger deltas). The
    floor is for a model faster than a write per chunk: a delta per chunk
    cost every event its own seq, store row and socket write (a scripted
    model's 20,000-chunk answer reached one client at ~10k chunks/s with
    ~70 µs of daemon CPU per chunk; merged per millisecond, ~60k/s at
    ~18 µs); a person cannot see a millisecond, and the first delta of an
    answer waits at most that long."""
    return max(MIN_BATCH_INTERVAL, views * FAN_OUT_INTERVAL_PER_VIEW)


@dataclass(eq=False)
class View:
    """One connection attached to a session, and its own outbox.

    ``close(reason)`` closes the connection. ``limit`` events or
    ``max_bytes`` characters of encoded text may wait unsent; a view still
    past either when the next batch comes is refused it and the session
    cuts the view off (:attr:`cut_off` says why). ``role`` is ``driver`` or ``observer``: an observer is
    read-only — the connection's :class:`~gemini_split.protocol.Connection`
    refuses its prompts, cancels and tool answers, and anything else that
    takes a decision from a view (server-side approvals) must check
    :attr:`may_act`. ``tools``: what the client last announced (None:
    nothing yet)."""

    close: Callable[[str], Awaitable[None]]
    label: str = "client"
    role: str = DRIVER
    limit: int = 1000
    max_bytes: int = 4 * 1024 * 1024
    tools: list[ToolSpec] | None = None
    #: The client answers approval questions (capability ``tool_approvals``).
    approves: bool = False
    #: (1.4) The client runs the user's tool hooks for server-run tools
    #: (capability ``tool_hooks``, and it speaks 1.4), for up to
    #: ``hook_timeout`` seconds a round (None: the default).
    tool_hooks: bool = False
    hook_timeout: float | None = None
    #: (1.4) The client answers ``ask_user`` questions (capability ``ask_user``).
    answers_questions: bool = False
    detached: trio.Event = field(default_factory=trio.Event)
    #: Why the view was cut off (None while it keeps up).
    cut_off: str | None = None
    #: Whether the view is one of its session's views now.
    attached: bool = False
    #: The seq its live part starts after (its attach point): what was
    #: logged by then reaches it by its replay, never live.
    live_after: int = 0
    #: Called when the writer has written everything (the pump's pacing).
    on_caught_up: Callable[[], None] | None = None
    _queue: list[tuple[ServerEvent, str]] = field(default_factory=list)
    _bytes: int = 0
    _writing: bool = False
    _readable: trio.Event = field(default_factory=trio.Event)

    @property
    def may_act(self) -> bool:
        """Whether this client may prompt, cancel, answer or decide."""
        return self.role != OBSERVER

    @property
    def info(self) -> ClientInfo:
        return ClientInfo(label=self.label, role=self.role)  # type: ignore[arg-type]

    @property
    def caught_up(self) -> bool:
        """Nothing queued and nothing being written."""
        return not self._queue and not self._writing

    def offers(self, tool: str) -> bool:
        """Whether the client may run ``tool`` (unknown until it says)."""
        return self.tools is None or any(spec.name == tool for spec in self.tools)

    def offer(self, batch: list[tuple[ServerEvent, str]]) -> bool:
        """Queue logged events; False (nothing queued) when this view is
        still behind by more than its bounds — more than ``limit`` events
        or ``max_bytes`` characters wait unsent — and the session then cuts
        it off. Any other view takes the batch, so a view holds at most its
        bounds plus one of the session's batches (themselves bounded by the
        session's outbox): a client a batch or two behind while the session
        runs at a faster view's pace is not cut off. Every view gets the
        same events, each the session's own text (encoded once)."""
        if self._queue and (len(self._queue) > self.limit or self._bytes > self.max_bytes):
            return False
        self._queue.extend(batch)
        self._bytes += sum(len(text) for _, text in batch)
        self._readable.set()
        return True

    def send_direct(self, event: ServerEvent) -> None:
        """Queue an event for this connection only (a reply): stamped,
        unnumbered, never logged; whatever the limit."""
        event = stamp(event)
        text = encode(event)
        self._queue.append((event, text))
        self._bytes += len(text)
        self._readable.set()

    async def take(self) -> list[tuple[ServerEvent, str]]:
        """Everything queued, oldest first (waits for something). Calling
        it again says the previous batch is written."""
        self._writing = False
        while not self._queue:
            if self.on_caught_up is not None:
                self.on_caught_up()
            self._readable = trio.Event()
            await self._readable.wait()
        batch, self._queue, self._bytes = self._queue, [], 0
        self._writing = True
        return batch

    def __len__(self) -> int:
        return len(self._queue)


@dataclass(frozen=True)
class AttachPoint:
    """Where a view's live events start: after ``last_seq``, with this
    request running (as the log says), these tool calls unanswered and
    these approval questions undecided; ``clients``: everyone attached
    then, the new view included."""

    last_seq: int
    active_request_id: str | None
    pending_tool_calls: tuple[str, ...]
    clients: tuple[ClientInfo, ...]
    pending_approvals: tuple[str, ...] = ()
