"""The cyclic garbage collector: paused while start-up's modules load, and
settled for a long-running server.

A module's functions, classes and constants are made to be kept, yet their
allocations set off a collection every few hundred: ~25 while trio,
msgspec, the protocol and the client load (~7 ms of a one-shot call's CPU),
~200 more, one of them full, while google-genai loads for embedded mode
(~50 ms), and they find almost nothing to free. :class:`paused_collection`
turns the collector off for such a block and, at its end, freezes what
exists (``gc.freeze``: never scanned again, so the first collection after
it does not walk everything the imports made at once), then turns it back
on. The price: the few thousand objects the imports left as cyclic garbage
are frozen too and never freed (a few hundred KB).

That is a decision for the process's owner only: the console script
(``cli.main`` without an ``env``, which sets
:attr:`Environment.owns_process <gemini_split.environment.Environment>`), not
``main`` inside another program or a test, whose objects must stay
collectable.

A long-running server has a second reason (:func:`settle_for_serving`).
It holds a few hundred thousand objects (1,000 sessions), and with the
defaults — the young generation collected after 700 net allocations, every
object walked now and then by a full collection — a burst of 1,000 turns
made about 1,300 young and 11 full collections in the daemon, 6 s of its
~7 s of CPU (``gc.callbacks``, bench/serve.py (c)), finding 377 objects of
cyclic garbage in all, while the whole event loop waited. Once a server has
started and warmed up, what exists is frozen (modules, classes,
google-genai's built schemas, the model client) and the young generation is
collected after :data:`YOUNG_THRESHOLD` net allocations: most of a turn's
objects (events, chunks, buffers) die before that, so far fewer are walked
and promoted, and full collections (still on, with CPython's own rule) come
seldom. Cyclic garbage is still collected, later; reference-counted objects
(nearly all) are freed at once as before.

While a server answers a burst (``server/session/priority.py``: from the
moment the loop is busy with requests on their way to a first delta until
every one has it), even that is too much: the requests in flight are the
young objects, so every young collection walks them all and frees
nothing, and every tenth walks all that survived the last ten (57–88 ms
each). In a 1,000-prompt burst the collector took ~15% of the daemon's
CPU until the last first delta (docs/performance.md). :func:`bursting`
lets the young generation grow to :data:`BURST_YOUNG_THRESHOLD` net
allocations meanwhile — a bound, not a pause — and sets it back when the
burst is over (10 s at the most: steady load is not a burst), whereupon
the next allocation collects what gathered.

A leaf module: ``cli``, ``app`` and ``commands.serve`` use it.
"""

from __future__ import annotations

import gc


class paused_collection:
    """``with paused_collection(owns_process): import …`` — see the module
    doc; nothing changes when ``owns_process`` is false."""

    def __init__(self, owns_process: bool):
        self._active = owns_process
        self._was_enabled = False

    def __enter__(self) -> None:
        if self._active:
            self._was_enabled = gc.isenabled()
            gc.disable()

    def __exit__(self, *exc_info: object) -> None:
        if self._active:
            gc.freeze()
            if self._was_enabled:
                gc.enable()


#: Net allocations between two collections of the young generation in a
#: server (CPython's default: 700).
YOUNG_THRESHOLD = 10_000
#: Young collections per middle one, middle ones per full one (the defaults).
MIDDLE_THRESHOLD = 10
OLD_THRESHOLD = 10


#: Net allocations between two young collections while a server answers
#: a burst (:func:`bursting`): more than a 1,000-prompt burst makes before
#: its last first delta (~320,000).
BURST_YOUNG_THRESHOLD = 500_000

_serving = False


def settle_for_serving() -> None:
    """Collect what start-up left, freeze what remains and collect the
    young generation less often (see the module docstring). Call once,
    from a server process (``serve``), after its start-up."""
    global _serving
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, MIDDLE_THRESHOLD, OLD_THRESHOLD)
    _serving = True


def bursting(on: bool) -> None:
    """A server's burst begins (True) or ends (False): see the module
    docstring. Does nothing before :func:`settle_for_serving` (a process
    that is not a server keeps its collector as it is)."""
    if _serving:
        gc.set_threshold(BURST_YOUNG_THRESHOLD if on else YOUNG_THRESHOLD, MIDDLE_THRESHOLD, OLD_THRESHOLD)
