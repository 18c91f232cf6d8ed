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

Busy means the others would wait for the loop: at least ``busy_tasks``
tasks ready at once, or at least ``busy_tasks`` requests unanswered while
the loop spent at least :data:`BUSY_SHARE` of the last reading's interval
running — not waiting for I/O with nothing to run (a Trio instrument
times those waits; the thread's CPU time would read low on a machine
whose other processes keep it off the CPU, though it never idles). The
second catches a burst between its waves: a thousand requests sent, their
answers arriving a few at a time, few tasks ready at any moment and yet
no idle time. By the first rule alone a quarter of a 1,000-prompt
burst's streams were let go while the other three quarters had not
answered (bench/serve.py (c)), and each parsed its whole answer on the
loop the others waited for. A few requests unanswered on a hot loop do
not count: a lone stream running flat out while one other prompt waits
for its model keeps going.

**A rush** begins when ``busy_tasks`` requests are unanswered at once, or
some are while the loop is busy, and ends when every request has answered
or a reading finds the loop mostly idle (less than :data:`BUSY_SHARE` of
its time running); **a burst** lasts from a rush's beginning until every
request has answered, or ``max_burst`` seconds: a server whose requests
never all answer at once has steady load, not a burst, and no other burst
begins until they have. Work that no first delta needs waits through them:
:attr:`AnswerFirst.on_rush` and :attr:`AnswerFirst.on_burst` hooks hear
each begin (True) and end (False). ``serve`` defers the session store's
background writes through a rush (``SessionStore.defer_writes``): a
burst's answers come in waves, and the writes are best done in the
moments the loop idles between them. It defers the cyclic collector's
young collections through the burst (``gemini_split.collector.bursting``):
in a 1,000-prompt burst they took ~15% of the loop until the last first
delta and freed nothing, and the one collection of everything the burst
has in flight takes a quarter of a second — ended with a rush, between
two waves, it held back the second one by as much.

Why answers and not a fixed time: every step a stream takes in a burst
costs the loop what that step costs (its model's whole block read, merged,
logged, stored and written), and every ready task's step lengthens the
turn of the loop that the requests still on their way to a first delta
wait through. With a fixed 0.5 s, a thousand streams took a step every
half second of a 1,000-prompt burst whose first deltas took seconds, and
the last first deltas waited behind those steps (docs/performance.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import trio

#: Seconds with no request answered after which a waiting stream goes on.
DEFAULT_MAX_WAIT = 0.5
#: Seconds a streaming request waits at most, per output, for others to answer.
DEFAULT_MAX_HOLD = 5.0
#: Seconds a burst lasts at most (module docstring).
DEFAULT_MAX_BURST = 10.0
#: Tasks ready to run at once from which the loop counts as busy; as many
#: requests unanswered make it busy too while it runs :data:`BUSY_SHARE`.
DEFAULT_BUSY_TASKS = 100
#: Seconds a reading of the loop's state is used for (Trio's statistics
#: also count every file descriptor's waiters: O(connections)).
BUSY_CHECK_INTERVAL = 0.05
#: The share of a reading's interval the loop spent running (not waiting
#: with nothing to run) from which it counts as busy with many requests
#: unanswered, and below which a rush ends.
BUSY_SHARE = 0.5


class _IdleClock(trio.abc.Instrument):
    """The seconds a Trio run's loop has spent waiting for I/O with no task
    ready (one per run: :func:`_idle_clock`)."""

    def __init__(self) -> None:
        self.idle = 0.0
        self._since = 0.0

    def before_io_wait(self, timeout: float) -> None:
        # A wait of 0 is a look at the sockets between ready tasks' steps.
        self._since = time.perf_counter() if timeout > 0 else 0.0

    def after_io_wait(self, timeout: float) -> None:
        if self._since:
            self.idle += time.perf_counter() - self._since
            self._since = 0.0


_IDLE_CLOCK: trio.lowlevel.RunVar[_IdleClock] = trio.lowlevel.RunVar("answer_first_idle_clock")


def _idle_clock() -> _IdleClock:
    """This Trio run's :class:`_IdleClock`, added at the first call."""
    try:
        return _IDLE_CLOCK.get()
    except LookupError:
        clock = _IdleClock()
        trio.lowlevel.add_instrument(clock)
        _IDLE_CLOCK.set(clock)
        return clock


class AnswerFirst:
    """The requests of one server: see the module docstring."""

    def __init__(self, *, max_wait: float = DEFAULT_MAX_WAIT, busy_tasks: int = DEFAULT_BUSY_TASKS,
                 max_hold: float = DEFAULT_MAX_HOLD, max_burst: float = DEFAULT_MAX_BURST):
        self.max_wait = max_wait
        self.max_hold = max(max_hold, max_wait)
        self.max_burst = max_burst
        #: Requests answered so far (progress, for :meth:`_hold`).
        self.answers = 0
        self.busy_tasks = busy_tasks
        #: Requests started that have not produced output yet.
        self.unanswered = 0
        self._all_answered = trio.Event()
        self._all_answered.set()
        #: When the loop's state was last read (trio's clock), and the
        #: seconds it had spent idle then (None: not read yet).
        self._busy_at = -1.0
        self._idle_at: float | None = None
        self._was_busy = False
        #: Whether a rush, a burst is on (module docstring), and who hears
        #: each begin and end: each hook is called with True, then False,
        #: from the loop; it must not block.
        self.rushing = False
        self.on_rush: list[Callable[[bool], None]] = []
        self.bursting = False
        self.on_burst: list[Callable[[bool], None]] = []
        #: When the burst began (trio's clock); whether one lasted
        #: ``max_burst`` since every request last answered.
        self._burst_began = 0.0
        self._burst_spent = False
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
        self._busy()  # a rush may begin or end
        if self.unanswered >= self.busy_tasks:
            self._rush(True)
        return Pace(self, when_delivered)

    def _answered(self) -> None:
        self.answers += 1
        self.unanswered -= 1
        if not self.unanswered:
            self._all_answered.set()
            self._rush(False)
            self._burst(False)
            self._burst_spent = False

    def _rush(self, on: bool) -> None:
        if on != self.rushing:
            self.rushing = on
            for hook in self.on_rush:
                hook(on)
            if on and not self._burst_spent:
                self._burst(True)

    def _burst(self, on: bool) -> None:
        if on != self.bursting:
            self.bursting = on
            if on:
                self._burst_began = trio.current_time()
            for hook in self.on_burst:
                hook(on)

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
        """Whether the loop is busy (module docstring), read at most every
        :data:`BUSY_CHECK_INTERVAL` seconds; a reading begins or ends a
        rush, and ends a burst that has lasted ``max_burst``."""
        now = trio.current_time()
        if now - self._busy_at >= BUSY_CHECK_INTERVAL:
            idle = _idle_clock().idle
            share = None if self._idle_at is None else 1 - (idle - self._idle_at) / (now - self._busy_at)
            self._busy_at, self._idle_at = now, idle
            self._was_busy = ((share is not None and share >= BUSY_SHARE and self.unanswered >= self.busy_tasks)
                              or trio.lowlevel.current_statistics().tasks_runnable >= self.busy_tasks)
            if self.unanswered and self._was_busy:
                self._rush(True)
            elif self.rushing and share is not None and share < BUSY_SHARE:
                self._rush(False)
            if self.bursting and now - self._burst_began >= self.max_burst:
                self._burst_spent = True
                self._burst(False)
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
