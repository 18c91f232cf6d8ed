"""Giving memory back to the system (gemini_split/memory.py): freed small
objects scattered through the heap go back to the system, which neither the
collector nor glibc does by itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

#: A burst's leftovers: 600,000 small objects freed, one in 64 kept, so the
#: freed ones leave holes all through the heap instead of one free top.
FRAGMENT = """
import gc, json, sys
from gemini_split.memory import give_back, resident_bytes
objs = [{"n": i, "s": "x" * 40} for i in range(600_000)]
keep = objs[::64]
del objs
gc.collect()
collected = resident_bytes()
done = give_back()
print(json.dumps({"collected": collected, "after": done.resident_after, "before": done.resident_before,
                  "trimmed": done.trimmed}))
"""


def _run(allocator: str) -> dict:
    env = {**os.environ, "PYTHONMALLOC": allocator}
    out = subprocess.run([sys.executable, "-c", FRAGMENT], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="malloc_trim is glibc's")
def test_give_back_returns_freed_memory_that_a_collection_alone_keeps():
    seen = _run("malloc")
    assert seen["trimmed"]
    # ~145 MB of objects were freed: the collection alone gave none of it
    # back, the give-back at least 60 MiB. What it returns here is one of
    # two figures, run to run: ~110 MiB, or ~76 MiB in about 1 run in 12
    # (with or without load; glibc's heap laid out differently) — which
    # failed a CI run when this asked for 80 MB.
    assert seen["collected"] - seen["after"] > 60 * 2**20, seen


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="malloc_trim is glibc's")
def test_under_pymalloc_the_same_memory_stays_which_is_why_serve_runs_on_malloc():
    seen = _run("pymalloc")
    assert seen["collected"] - seen["after"] < 20 * 2**20, seen


async def test_the_scheduler_releases_what_only_a_busy_server_needs_then_gives_back_even_when_release_fails(
        autojump_clock, caplog):
    import logging

    import trio

    from gemini_split.memory import GaveBack, GiveBackScheduler

    done: list[str] = []

    def give_back() -> GaveBack:
        done.append("give back")
        return GaveBack(None, None, False, 0.0, 0.0)

    async def release() -> None:
        done.append("release")
        if len(done) > 2:
            raise OSError("a socket would not close")

    scheduler = GiveBackScheduler(after_unloads=2, quiet=5, give_back=give_back, release=release)
    async with trio.open_nursery() as nursery:
        await nursery.start(scheduler.run)
        scheduler.unloaded(2)
        await trio.sleep(4)
        before_quiet = list(done)
        while scheduler.runs < 1:
            await trio.sleep(1)
        scheduler.unloaded(2)
        while scheduler.runs < 2:
            await trio.sleep(1)
        nursery.cancel_scope.cancel()
    assert before_quiet == []
    assert done == ["release", "give back", "release", "give back"]
    assert any("releasing idle resources" in r.getMessage() and r.exc_info for r in caplog.records)
