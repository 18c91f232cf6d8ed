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
    # back, the give-back at least 80 MB.
    assert seen["collected"] - seen["after"] > 80 * 2**20, seen


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="malloc_trim is glibc's")
def test_under_pymalloc_the_same_memory_stays_which_is_why_serve_runs_on_malloc():
    seen = _run("pymalloc")
    assert seen["collected"] - seen["after"] < 20 * 2**20, seen
