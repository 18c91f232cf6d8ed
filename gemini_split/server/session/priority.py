"""Requests that have not answered yet go before requests already streaming.

A server's one event loop runs every ready task once per round (Trio's
scheduler). When a burst of prompts arrives — 1,000 sessions at once — a
round holds every session's next step: a request still on its way to its
first delta (sending its model request, reading the first response) waits
behind the steps of requests already answering (parsing the rest of their
streams, saving turns, writing ``finished``). Every first delta then waits
for nearly all the burst's work, and they come in one wave at its end (in
bench/serve.py (c): median 4 s, p99 5.5 s, all turns done by 5.7 s).
Servers of language models put time to first token first for this reason.

:class:`AnswerFirst` (one per server) counts the requests that have not
produced any output yet. A request that has calls :meth:`Pace.pace`
after each output it hands on (a delta: already queued for the clients,
whose writers do not wait): while some request has not answered *and the
loop is busy* (at least :attr:`AnswerFirst.busy_tasks` tasks ready to run,
so CPU, not the model's network, is what the others wait for), it waits
until none is left unanswered — at most :attr:`AnswerFirst.max_wait`
seconds per output. A stream is never starved: whatever keeps arriving,
it takes a step at least every ``max_wait`` seconds (each step takes
everything its model sent meanwhile). On a server that is not busy
nothing waits at all.
"""

from __future__ import annotations

import trio

#: Seconds a streaming request waits at most, per output, for others to answer.
DEFAULT_MAX_WAIT = 0.5
#: Tasks ready to run at once from which the loop counts as busy.
DEFAULT_BUSY_TASKS = 100
#: Seconds a reading of the run queue's length is used for (Trio's
#: statistics also count every file descriptor's waiters: O(connections)).
BUSY_CHECK_INTERVAL = 0.05


class AnswerFirst:
    """The requests of one server: see the module docstring."""

    def __init__(self, *, max_wait: float = DEFAULT_MAX_WAIT, busy_tasks: int = DEFAULT_BUSY_TASKS):
        self.max_wait = max_wait
        self.busy_tasks = busy_tasks
        #: Requests started that have not produced output yet.
        self.unanswered = 0
        self._all_answered = trio.Event()
        self._all_answered.set()
        self._busy_at = -1.0
        self._was_busy = False
        #: Set when the streams holding now may go (see :meth:`_hold`).
        self._release: trio.Event | None = None

    def request(self) -> Pace:
        """A request starts: unanswered until its first output (or its end:
        :meth:`Pace.done`)."""
        self.unanswered += 1
        if self._all_answered.is_set():
            self._all_answered = trio.Event()
        return Pace(self)

    def _answered(self) -> None:
        self.unanswered -= 1
        if not self.unanswered:
            self._all_answered.set()

    async def _hold(self) -> None:
        """Wait until every request has answered, at most ``max_wait``
        seconds. The streams that hold together share one timer: the first
        waits (a cancel scope with a deadline) and releases the others when
        it wakes — a thousand streams' own timeouts firing every
        ``max_wait`` were ~8% of a burst's CPU (trio's cancellation is not
        cheap). Whoever joins later is released with them: never later than
        ``max_wait`` after it began to wait."""
        release = self._release
        if release is not None:
            await release.wait()
            return
        release = self._release = trio.Event()
        try:
            with trio.move_on_after(self.max_wait):
                await self._all_answered.wait()
        finally:
            self._release = None
            release.set()

    def _busy(self) -> bool:
        now = trio.current_time()
        if now - self._busy_at >= BUSY_CHECK_INTERVAL:
            self._busy_at = now
            self._was_busy = trio.lowlevel.current_statistics().tasks_runnable >= self.busy_tasks
        return self._was_busy


class Pace:
    """One request's place in :class:`AnswerFirst`."""

    __slots__ = ("_owner", "answered")

    def __init__(self, owner: AnswerFirst):
        self._owner = owner
        self.answered = False

    def output(self) -> None:
        """The request produced output (no longer unanswered)."""
        if not self.answered:
            self.answered = True
            self._owner._answered()

    async def pace(self) -> None:
        """After an output: while other requests have not answered and the
        loop is busy, let them go first (at most ``max_wait`` seconds)."""
        self.output()
        owner = self._owner
        if owner.unanswered and owner._busy():
            await owner._hold()

    def done(self) -> None:
        """The request ended (idempotent)."""
        self.output()
