"""The way of a session's events, from ``emit`` to every view.

A :class:`Broadcast` owns it whole: the session's :class:`~.outbox.Outbox`
(where emitted events wait, deltas merge and a model that outruns every
view waits), its :class:`~gemini_split.protocol.EventLog` (each event
numbered and encoded once), the :class:`~gemini_split.protocol.RequestTracker`
run over what was logged (what a view attaching is told), the attached
:class:`~.views.View` objects, and the one pump task that moves events
from the outbox to the log and to every view (:meth:`Broadcast.pump`).
The :class:`~.session.Session` only emits into it, and hears back through
three hooks (an event logged, a batch handed out, a view gone); the
:class:`~.manager.SessionManager` runs the pump and unloads the session
when the pump returns. See ``server/session/manager.py`` for the whole shape.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import trio

from gemini_split.protocol import ClientsChanged, ErrorCode, EventLog, RequestTracker, ServerEvent
from gemini_split.stamping import stamp

from .outbox import Outbox
from .views import AttachPoint, View, fan_out_interval

log = logging.getLogger(__name__)

Batch = list[tuple[ServerEvent, str]]


class Broadcast:
    """The events of the session named ``name`` (for the log): ``log``
    numbers them, ``outbox`` holds them until the pump takes them."""

    def __init__(self, name: str, log: EventLog, outbox: Outbox):
        self.name = name
        self.log = log
        self.outbox = outbox
        #: The request, its unanswered client tool calls and its open
        #: approval questions as the event log stands.
        self.logged = RequestTracker()
        #: The attached views, in the order they joined.
        self.views: list[View] = []
        #: trio.current_time() of the last sign of life while no view is
        #: attached (kept by the session manager and the pump).
        self.idle_since = 0.0
        #: Closes a view cut off for overflowing (set by the session manager).
        self.cut_off: Callable[[View, str], None] = lambda view, reason: None
        #: The session's hooks: a batch was logged (before any view has
        #: it), a batch was handed to the views, a view left.
        self.on_logged: Callable[[Batch], None] = lambda batch: None
        self.after_fan_out: Callable[[], None] = lambda: None
        self.on_view_left: Callable[[View], None] = lambda view: None
        #: Among replicas: returns once the session's events up to a seq
        #: are in the shared store (set by the session manager). Events then
        #: reach views only once stored, so a runner that dies never has
        #: shown one the next runner (numbering on from the store) numbers
        #: again. None: they are handed out as soon as they are logged.
        self.durable: Callable[[int], Awaitable[None]] | None = None
        #: Logged and not yet handed to the views, in seq order.
        self._unsent: Batch = []
        self._caught_up = trio.Event()
        #: Batches the pump has taken, and the callbacks waiting for one of
        #: them to be written (see :meth:`when_delivered`), by its number.
        self._taken = 0
        self._on_written: list[tuple[int, Callable[[], None]]] = []

    # --- in ----------------------------------------------------------------------

    async def emit(self, event: ServerEvent) -> None:
        """Queue ``event`` for every view, waiting while the outbox is full."""
        await self.outbox.put(event)

    def emit_nowait(self, event: ServerEvent) -> None:
        self.outbox.put_nowait(event)

    @property
    def pending(self) -> bool:
        """Whether emitted events wait for the pump."""
        return len(self.outbox) > 0

    def when_delivered(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (once, from the pump) when everything emitted
        so far has been written by a view — the pump's next batch if events
        wait for it (in the outbox, or logged and not yet stored among
        replicas), else the one its views are writing — or when no view
        is left to write it; at once if that is so already."""
        waiting = self.pending or bool(self._unsent)  # the next batch the pump hands out holds them
        if not self.views or (not waiting and self._caught_up.is_set()):
            callback()
            return
        self._on_written.append((self._taken + 1 if waiting else self._taken, callback))

    def _delivered(self, upto: int | None = None) -> None:
        """Batches up to ``upto`` are written (None: all, or nobody is left
        to write them)."""
        if self._on_written:
            due = [f for batch, f in self._on_written if upto is None or batch <= upto]
            if due:
                self._on_written = [(b, f) for b, f in self._on_written if upto is not None and b > upto]
                for callback in due:
                    callback()

    def log_events(self, events: list[ServerEvent]) -> Batch:
        """Number events and encode each once (the event log), follow them
        in the tracker and tell the session (which hands them to the
        store). The pump hands them to the views attached now (after any
        logged before them; among replicas once they are stored). Returns
        them with their text."""
        batch = self._log(events)
        self.outbox.wake()
        return batch

    def _log(self, events: list[ServerEvent]) -> Batch:
        batch = [self.log.append(stamp(event)) for event in events]
        for event, _ in batch:
            self.logged.apply(event)
        self.on_logged(batch)
        self._unsent.extend(batch)
        return batch

    def _hand_out(self, count: int | None = None) -> None:
        """Hand the first ``count`` (default: all) unsent logged events to
        the views."""
        if count is None or count >= len(self._unsent):
            batch, self._unsent = self._unsent, []
        else:
            batch, self._unsent = self._unsent[:count], self._unsent[count:]
        self.fan_out(batch)

    # --- views ---------------------------------------------------------------------

    def add_view(self, view: View) -> AttachPoint:
        """Attach ``view``: it gets every event logged from now on; the
        others hear ``clients_changed``. Returns where its live part starts."""
        clients = tuple(v.info for v in self.views) + (view.info,)
        # Logged before the new view is added, so its live part starts
        # after its own arrival; handed to the others at once (among
        # replicas, by the pump once stored: after what was logged before).
        self._log([ClientsChanged(change="joined", client=view.info, clients=len(clients))])
        if self.durable is None:
            self._hand_out()
        else:
            self.outbox.wake()
        # What was logged by now is the new view's replay, never its live part.
        view.live_after = self.log.last_seq
        view.attached = True
        view.on_caught_up = self._caught_up.set
        self.views.append(view)
        return AttachPoint(
            last_seq=self.log.last_seq, active_request_id=self.logged.active_request_id,
            pending_tool_calls=self.logged.pending_tool_calls,
            pending_approvals=self.logged.pending_approvals, clients=clients,
        )

    def remove_view(self, view: View) -> bool:
        """Detach ``view`` (idempotent; False if it was not attached). The
        others hear ``clients_changed``; the session hears it left."""
        if not view.attached:
            return False
        view.attached = False
        self.views.remove(view)
        self._caught_up.set()  # the pump may have been waiting for this one
        if not self.views:
            self._delivered()  # nobody is left to write them
        self.emit_nowait(ClientsChanged(change="left", client=view.info, clients=len(self.views)))
        self.on_view_left(view)
        return True

    def fan_out(self, batch: Batch) -> None:
        """Hand logged events to every view; cut off a view that cannot
        take them (its outbox is full: the client stopped reading)."""
        if not batch:
            return
        first = batch[0][0].seq or 0
        for view in list(self.views):
            part = batch if view.live_after < first else [
                item for item in batch if (item[0].seq or 0) > view.live_after]
            if not part:
                continue
            if not view.offer(part):
                view.cut_off = (f"cut off: this client fell {len(view) + len(batch)} events behind the session "
                                f"({ErrorCode.SLOW_CONSUMER.value}); reconnect to resume")
                log.warning("session %s: %s cut off: its outbox is full", self.name, view.label)
                self.remove_view(view)
                self.cut_off(view, view.cut_off)
        self.after_fan_out()

    def new_pace(self) -> trio.Event:
        """An event set once some view has written everything it had (set
        already when one has)."""
        self._caught_up = trio.Event()
        if any(view.caught_up for view in self.views):
            self._caught_up.set()
        for view in self.views:
            view.on_caught_up = self._caught_up.set
        return self._caught_up

    # --- the pump ----------------------------------------------------------------------

    async def pump(self, *, grace: float, busy: Callable[[], bool]) -> None:
        """Be the only taker of events: log each once, hand it to every
        view. Returns once no view has been attached, nothing was emitted
        and ``busy()`` was false for ``grace`` seconds (the session may be
        unloaded then)."""
        try:
            await self._pump(grace, busy)
        finally:
            self._delivered()

    async def _pump(self, grace: float, busy: Callable[[], bool]) -> None:
        while True:
            if self._unsent:
                events = await self.outbox.take() if self.pending else []
            elif self.views:
                events = await self.outbox.take()
            else:
                events = None
                with trio.move_on_at(self.idle_since + grace):
                    events = await self.outbox.take()
                if events is None:
                    if busy() or self.pending or self.views or self._unsent:
                        self.idle_since = trio.current_time()
                        continue
                    return
                self.idle_since = trio.current_time()
            taken = trio.current_time()
            if events:
                self._log(events)
            if not self._unsent:
                continue
            count = len(self._unsent)
            if self.durable is not None:
                # Shown only once stored: while the store is away, the
                # session's clients wait (and its model, once the outbox
                # is full); nothing they see can be numbered again.
                await self.durable(self._unsent[count - 1][0].seq or 0)
            self._taken += 1
            self._hand_out(count)
            if not self.views:
                self._delivered(self._taken)
            if self.views:
                # The session goes at the pace of its fastest view: while
                # every view is still writing, the model's stream gathers
                # (and merges) in the outbox, and a model that outruns even
                # the fastest view waits once the outbox is full.
                await self.new_pace().wait()
                self._delivered(self._taken)
                # Many views: no more batches than they can share (views.py).
                next_batch = taken + fan_out_interval(len(self.views))
                if next_batch > trio.current_time():
                    await trio.sleep_until(next_batch)
