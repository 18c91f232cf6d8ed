"""How a long-running server uses Python's cyclic garbage collector.

CPython's collector runs when allocations outnumber deallocations by 700
(the young generation), and now and then walks every object the process
holds (a *full* collection). A server holding 1,000 sessions holds a few
hundred thousand objects; with the defaults, a burst of 1,000 turns made
about 1,300 young and 11 full collections in the daemon, 6 s of its
~7 s of CPU (measured with ``gc.callbacks``, bench/serve.py (c)), while
finding 377 objects of cyclic garbage in all. Every session waited behind
each of them: the collector holds the whole event loop.

:func:`settle_for_serving`, called once a server has started and warmed up:

* ``gc.freeze()``: what exists by then (modules, classes, google-genai's
  built schemas, the model client) lives until exit; full collections
  stop walking it;
* the young generation is collected after :data:`YOUNG_THRESHOLD` net
  allocations instead of 700: most of a turn's objects (events, chunks,
  buffers) die before that, so far fewer are walked and promoted, and full
  collections (still on, with CPython's own rule: at most when the objects
  promoted since the last one reach a quarter of the rest) come seldom.

Cyclic garbage is still collected, later: at most about
:data:`YOUNG_THRESHOLD` objects wait in the young generation.
Reference-counted objects (nearly all) are freed at once as before.
"""

from __future__ import annotations

import gc

#: Net allocations between two collections of the young generation
#: (CPython's default: 700).
YOUNG_THRESHOLD = 10_000
#: Young collections per middle one, middle ones per full one (the defaults).
MIDDLE_THRESHOLD = 10
OLD_THRESHOLD = 10


def settle_for_serving() -> None:
    """Collect what start-up left, freeze what remains and collect the
    young generation less often (see the module docstring). Call once,
    from a server process (``serve``), after its start-up."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, MIDDLE_THRESHOLD, OLD_THRESHOLD)
