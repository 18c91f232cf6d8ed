"""A view: one connection attached to a session, with its own outbox.

The session's pump numbers, logs and encodes each event once and offers
the same ``(event, text)`` pairs to every view (:meth:`View.offer`); the
view's writer (``server/service.py``) takes them (:meth:`View.take`) and
writes them at the connection's pace. Replies meant for one connection go
straight to its view (:meth:`View.send_direct`). See ``server/sessions.py``
for the whole shape.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import trio

from msgspec.structs import replace

from gemini_split.protocol import ClientInfo, ServerEvent, TextDelta, ThinkingDelta, ToolDelta, ToolSpec, encode
from gemini_split.protocol.state import MERGE_LIMIT, same_stream
from gemini_split.stamping import stamp

_DELTAS = (TextDelta, ThinkingDelta, ToolDelta)

DRIVER = "driver"
OBSERVER = "observer"

#: Seconds per attached view between two batches a session hands its views.
FAN_OUT_INTERVAL_PER_VIEW = 50e-6


def fan_out_interval(views: int) -> float:
    """The least time between two batches of a session with ``views``
    views: a session hands its views at most one batch per
    ``views`` × :data:`FAN_OUT_INTERVAL_PER_VIEW`, so its writes cost about
    the same CPU per second however many clients watch it. Meanwhile a
    delta stream merges in the session's outbox: 100 watchers get a frame
    every 5 ms (the text whole, in fewer, larger deltas); one or two
    clients (0.1 ms) see no difference."""
    return views * FAN_OUT_INTERVAL_PER_VIEW


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
    detached: trio.Event = field(default_factory=trio.Event)
    #: Why the view was cut off (None while it keeps up).
    cut_off: str | None = None
    #: Whether the view is one of its session's views now.
    attached: bool = False
    #: Called when the writer has written everything (the pump's pacing).
    on_caught_up: Callable[[], None] | None = None
    _queue: list[tuple[ServerEvent, str]] = field(default_factory=list)
    #: Contents of the deltas merged into the last queued event, and the
    #: last of them (see :meth:`offer`); ``_run_size``: its characters.
    _run: list[str] = field(default_factory=list)
    _run_last: ServerEvent | None = None
    _run_size: int = 0
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
        still behind by more than its bounds — more than ``limit`` distinct
        events or ``max_bytes`` characters wait unsent — and the session then
        cuts it off. Any other view takes the batch, so a view holds at most
        its bounds plus one of the session's batches (themselves bounded by
        the session's outbox): a client a batch or two behind while the
        session runs at a faster view's pace is not cut off.

        A view that is behind (events wait unsent) gets adjacent deltas of
        one stream merged into one event, as the session's outbox merges
        them before they are logged: the merged event carries the last
        one's ``seq`` (a client resuming after it misses nothing) and is
        encoded for this view alone, once, when its writer takes it. So a
        slow client gets the same text in fewer frames, and is cut off for
        what it holds, not for how many deltas made it."""
        was_empty = not self._queue
        if not was_empty and (len(self._queue) > self.limit or self._bytes > self.max_bytes):
            return False
        for event, text in batch:
            if not was_empty and isinstance(event, _DELTAS) and same_stream(self._queue[-1][0], event) \
                    and self._run_size + len(event.content) <= MERGE_LIMIT:
                if not self._run:
                    self._run = [self._queue[-1][0].content]
                    self._run_size = len(self._run[0])
                self._run.append(event.content)
                self._run_size += len(event.content)
                self._run_last = event
            else:
                self._append(event, text)
            self._bytes += len(text)
        self._readable.set()
        return True

    def _append(self, event: ServerEvent, text: str) -> None:
        self._close_run()
        self._queue.append((event, text))
        self._run_size = len(event.content) if isinstance(event, _DELTAS) else 0

    def _close_run(self) -> None:
        """Encode the merged delta that ends the queue (if one does)."""
        if self._run:
            assert self._run_last is not None
            merged = replace(self._run_last, content="".join(self._run))
            self._queue[-1] = (merged, encode(merged))
            self._run, self._run_last = [], None

    def send_direct(self, event: ServerEvent) -> None:
        """Queue an event for this connection only (a reply): stamped,
        unnumbered, never logged; whatever the limit."""
        event = stamp(event)
        text = encode(event)
        self._append(event, text)
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
        self._close_run()
        batch, self._queue, self._bytes, self._run_size = self._queue, [], 0, 0
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
