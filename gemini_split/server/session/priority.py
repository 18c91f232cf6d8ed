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
produced any output yet — output a client has *received*: a request's
first delta counts once its session's clients have written it to their
sockets (:meth:`~.broadcast.Broadcast.when_delivered`), not when it is
queued, since the way from the queue to the socket (the session's pump,
then its connection's writer) is two more turns of the loop, each as long
as every ready task's step. A request that has output calls :meth:`Pace.pace`
after each output it hands on (a delta: already queued for the clients,
whose writers do not wait): while some request has not answered *and the
loop is busy* (at least :attr:`AnswerFirst.busy_tasks` tasks ready to run,
so CPU, not the model's network, is what the others wait for), it waits
until none is left unanswered, for as long as they keep answering: it
goes on once :attr:`AnswerFirst.max_wait` seconds pass with no request
answered (those left wait for their model, not for the loop), and after
:attr:`AnswerFirst.max_hold` seconds at the most. A stream is never
starved: whatever keeps arriving, it takes a step at least every
``max_hold`` seconds (each step takes everything its model sent
meanwhile). On a server that is not busy nothing waits at all.

Why answers and not a fixed time: every step a stream takes in a burst
costs the loop what that step costs (its model's whole block read, merged,
logged, stored and written), and every ready task's step lengthens the
turn of the loop that the requests still on their way to a first delta
wait through. With a fixed 0.5 s, a thousand streams took a step every
half second of a 1,000-prompt burst whose first deltas took seconds, and
the last first deltas waited behind those steps (docs/performance.md).
"""

from __future__ import annotations

from collections.abc import Callable

import trio

#: Seconds with no request answered after which a waiting stream goes on.
DEFAULT_MAX_WAIT = 0.5
#: Seconds a streaming request waits at most, per output, for others to answer.
DEFAULT_MAX_HOLD = 5.0
#: Tasks ready to run at once from which the loop counts as busy.
DEFAULT_BUSY_TASKS = 100
#: Seconds a reading of the run queue's length is used for (Trio's
#: statistics also count every file descriptor's waiters: O(connections)).
BUSY_CHECK_INTERVAL = 0.05


class AnswerFirst:
    """The requests of one server: see the module docstring."""

    def __init__(self, *, max_wait: float = DEFAULT_MAX_WAIT, busy_tasks: int = DEFAULT_BUSY_TASKS,
                 max_hold: float = DEFAULT_MAX_HOLD):
        self.max_wait = max_wait
        self.max_hold = max(max_hold, max_wait)
        #: Requests answered so far (progress, for :meth:`_hold`).
        self.answers = 0
        self.busy_tasks = busy_tasks
        #: Requests started that have not produced output yet.
        self.unanswered = 0
        self._all_answered = trio.Event()
        self._all_answered.set()
        self._busy_at = -1.0
        self._was_busy = False
        #: Set when the streams holding now may go (see :meth:`_hold`).
        self._release: trio.Event | None = None

    def request(self, *, when_delivered: Callable[[Callable[[], None]], None] | None = None) -> Pace:
        """A request starts: unanswered until its first output has reached
        its clients (or its end: :meth:`Pace.done`). ``when_delivered(f)``
        calls ``f`` once what the request has emitted so far is written
        (None: output counts at once)."""
        self.unanswered += 1
        if self._all_answered.is_set():
            self._all_answered = trio.Event()
        return Pace(self, when_delivered)

    def _answered(self) -> None:
        self.answers += 1
        self.unanswered -= 1
        if not self.unanswered:
            self._all_answered.set()

    async def _hold(self) -> None:
        """Wait until every request has answered, while some keep
        answering: until ``max_wait`` seconds pass with no answer, or
        ``max_hold`` seconds in all. The streams that hold together share
        one timer: the first waits (a cancel scope with a deadline) and
        releases the others when it wakes — a thousand streams' own
        timeouts firing every ``max_wait`` were ~8% of a burst's CPU
        (trio's cancellation is not cheap). Whoever joins later is released
        with them: never later than ``max_hold`` after it began to wait."""
        release = self._release
        if release is not None:
            await release.wait()
            return
        release = self._release = trio.Event()
        try:
            give_up = trio.current_time() + self.max_hold
            while True:
                answers = self.answers
                with trio.move_on_at(min(trio.current_time() + self.max_wait, give_up)):
                    await self._all_answered.wait()
                    return
                if self.answers == answers or trio.current_time() >= give_up:
                    return
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

    __slots__ = ("_owner", "_when_delivered", "_output", "answered")

    def __init__(self, owner: AnswerFirst,
                 when_delivered: Callable[[Callable[[], None]], None] | None = None):
        self._owner = owner
        self._when_delivered = when_delivered
        self._output = False
        #: Whether it no longer counts as unanswered.
        self.answered = False

    def output(self) -> None:
        """The request produced output: no longer unanswered once that
        output is delivered."""
        if self._output:
            return
        self._output = True
        if self._when_delivered is None:
            self._answer()
        else:
            self._when_delivered(self._answer)

    def _answer(self) -> None:
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
        """The request ended (idempotent): it no longer counts, delivered or not."""
        self._output = True
        self._answer()
