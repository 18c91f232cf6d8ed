"""Giving memory back to the operating system.

A server that held many sessions and unloaded them (their clients gone,
their state in the store) has freed those objects, yet its resident memory
stays where the burst left it: freed blocks stay with the allocator, not
with the system. :func:`give_back` hands back what it can, in three steps:

* ``gc.collect()``: what only the cyclic collector frees (a session's
  tasks, views and events refer to each other) is freed now, not at the
  next full collection, which a settled server rarely runs
  (:mod:`gemini_split.collector`);
* ``sys._clear_type_cache()``: CPython's method cache holds references to
  attribute names and their values;
* glibc's ``malloc_trim(0)``: every free page at the top of each heap and
  inside it goes back to the system (``madvise``). Without it glibc keeps
  what it freed for reuse. Skipped where the C library has no such function
  (musl, macOS): the first two steps still run.

CPython's own small-object allocator (pymalloc) returns an arena only when
all of its objects are gone, which after a burst of interleaved sessions is
rare; ``serve`` therefore runs with ``PYTHONMALLOC=malloc`` (set by
``gemini_split/cli.py``), so that small objects live in glibc's heap where
``malloc_trim`` can return them. docs/performance.md has the figures.

:class:`GiveBackScheduler` decides when: not after each unload (a full
collection of a large heap takes a while, and the loop waits for the part
that holds the GIL), but once many sessions were unloaded and the unloads
stopped.

A shared leaf: the session manager uses it.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import os
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import trio

__all__ = ["GaveBack", "GiveBackScheduler", "give_back", "resident_bytes"]

log = logging.getLogger(__name__)

#: Unloaded sessions that make a give-back worth its pause, and the seconds
#: without a further unload before it runs (a burst of disconnects is over).
GIVE_BACK_AFTER_UNLOADS = 50
GIVE_BACK_QUIET = 15.0

_NOT_LOOKED_UP: Any = object()
_malloc_trim: Any = _NOT_LOOKED_UP


def _trim_function() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none."""
    global _malloc_trim
    if _malloc_trim is _NOT_LOOKED_UP:
        _malloc_trim = None
        if sys.platform.startswith("linux"):
            try:  # the symbols the process has loaded: glibc's, not a search for a library file
                trim = ctypes.CDLL(None).malloc_trim
            except (OSError, AttributeError):
                pass
            else:
                trim.argtypes = [ctypes.c_size_t]
                trim.restype = ctypes.c_int
                _malloc_trim = trim
    return _malloc_trim


def resident_bytes() -> int | None:
    """This process's resident memory now (Linux ``/proc/self/statm``), or
    None where that cannot be read."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


@dataclass(frozen=True)
class GaveBack:
    """What one :func:`give_back` did: resident bytes before and after
    (None where unknown), whether ``malloc_trim`` ran, and the seconds the
    collection took (the part that holds the GIL) and the whole."""

    resident_before: int | None
    resident_after: int | None
    trimmed: bool
    collect_seconds: float
    seconds: float


def give_back() -> GaveBack:
    """Free what only the collector frees and hand every free page back to
    the system (see the module docstring). Blocks for as long as that takes:
    run it in a worker thread from an event loop (the collection holds the
    GIL; the trim does not)."""
    start = time.perf_counter()
    before = resident_bytes()
    gc.collect()
    sys._clear_type_cache()
    collected = time.perf_counter()
    trim = _trim_function()
    if trim is not None:
        trim(0)
    end = time.perf_counter()
    return GaveBack(before, resident_bytes(), trim is not None, collected - start, end - start)


class GiveBackScheduler:
    """Runs :func:`give_back` once ``after_unloads`` sessions (or more)
    were unloaded and ``quiet`` seconds passed without another unload.

    Tell it each unload (:meth:`unloaded`, never waits); run :meth:`run` in
    a nursery (``nursery.start``) for as long as sessions are unloaded.
    ``give_back`` is the function it runs, in a worker thread (a test's
    seam; the default is :func:`give_back`). ``release``, when given, runs
    on the loop just before it: the owners of what outlives the sessions
    let go of what only a busy server needs (the service closes the model
    client's idle HTTP connections and the store's page cache), so the
    give-back finds those pages free too; an exception from it is logged
    and the give-back runs anyway. Each run is logged at INFO with what it returned."""

    def __init__(self, *, after_unloads: int = GIVE_BACK_AFTER_UNLOADS, quiet: float = GIVE_BACK_QUIET,
                 give_back: Callable[[], GaveBack] = give_back,
                 release: Callable[[], Awaitable[None]] | None = None):
        self.after_unloads = after_unloads
        self.quiet = quiet
        self._give_back = give_back
        self._release = release
        self._pending = 0
        self._last_unload = 0.0
        self._wake = trio.Event()
        #: Give-backs run so far.
        self.runs = 0

    def unloaded(self, sessions: int = 1) -> None:
        """``sessions`` sessions were just unloaded from memory."""
        self._pending += sessions
        self._last_unload = trio.current_time()
        self._wake.set()

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Give memory back whenever enough unloads went quiet; never
        returns (cancel it)."""
        task_status.started()
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            if self._pending < self.after_unloads:
                continue
            while trio.current_time() < self._last_unload + self.quiet:
                await trio.sleep_until(self._last_unload + self.quiet)
            sessions, self._pending = self._pending, 0
            if self._release is not None:
                try:
                    await self._release()
                except Exception:  # noqa: BLE001 - the give-back still runs; the server goes on
                    log.exception("releasing idle resources before giving memory back failed")
            done = await trio.to_thread.run_sync(self._give_back)
            self.runs += 1
            log.info("%d sessions unloaded: gave memory back to the system, resident %s -> %s "
                     "(%.0f ms, %.0f ms of it collecting)", sessions, _mb(done.resident_before),
                     _mb(done.resident_after), done.seconds * 1e3, done.collect_seconds * 1e3)


def _mb(size: int | None) -> str:
    return "unknown" if size is None else f"{size / 2**20:.0f} MB"
