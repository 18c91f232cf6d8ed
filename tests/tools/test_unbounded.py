"""Tool work the model can make unbounded — catastrophic regexes and globs,
huge lines — stays bounded in time and memory, and never freezes the Trio
thread (issue 13 §3)."""

from __future__ import annotations

import os
import tracemalloc

import pytest
import trio

from .conftest import Env

EVIL_GLOB = "*a*a*a*a*a*a*a*a*a*a*a*a*b"
LONG_NAME = "a" * 200  # no 'b': a backtracking engine tries every split


async def _responsive(env: Env, tool: str, args: dict, limit: float = 10.0):
    """Run one call while a Trio task ticks; return the outcome and the
    longest time the Trio thread was unavailable."""
    gaps = [0.0]
    done = trio.Event()

    async def tick() -> None:
        last = trio.current_time()
        while not done.is_set():
            await trio.sleep(0.01)
            now = trio.current_time()
            gaps.append(now - last)
            last = now

    with trio.fail_after(limit):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(tick)
            try:
                out = await env.run(tool, args)
            finally:
                done.set()
    return out, max(gaps)


async def test_grep_with_a_catastrophic_regex_is_fast(env: Env):
    (env.root / "a.txt").write_text("a" * 35 + "!\n" + "aaaa\n")
    out, gap = await _responsive(env, "grep_search", {"pattern": "(a+)+$"})
    assert out.failure is None, out.failure
    assert "L2: aaaa" in out.result and "L1:" not in out.result
    assert gap < 1.0
    out, gap = await _responsive(env, "grep_search", {"pattern": "a", "exclude_pattern": "(a+)+$"})
    assert out.failure is None and "L1: " + "a" * 35 + "!" in out.result and "L2:" not in out.result


async def test_glob_with_a_catastrophic_pattern_is_fast(env: Env):
    (env.root / LONG_NAME).write_text("x")
    (env.root / "aab").write_text("x")
    out, gap = await _responsive(env, "glob", {"pattern": EVIL_GLOB})
    assert out.failure is None, out.failure
    assert out.result.startswith('No files found')
    out, gap = await _responsive(env, "glob", {"pattern": "*a*a*b"})
    assert out.failure is None and out.result.endswith("\naab"), out.result
    assert gap < 1.0


async def test_catastrophic_patterns_in_gitignore_and_ignore_lists_are_fast(env: Env):
    (env.root / LONG_NAME).write_text("needle\n")
    (env.root / ".gitignore").write_text(EVIL_GLOB + "\n")
    for tool, args in [("list_directory", {"dir_path": ".", "ignore": [EVIL_GLOB]}),
                       ("glob", {"pattern": "*"}),
                       ("grep_search", {"pattern": "needle"})]:
        out, gap = await _responsive(env, tool, args)
        assert out.failure is None, (tool, out.failure)
        assert LONG_NAME in out.result, tool
        assert gap < 1.0, tool


async def test_invalid_patterns_are_clear_errors(env: Env):
    for tool, args in [("grep_search", {"pattern": "("}), ("grep_search", {"pattern": "(a)\\1"}),
                       ("grep_search", {"pattern": "x", "exclude_pattern": "("}),
                       ("glob", {"pattern": "[z-a]"})]:
        out = await env.run(tool, args)
        assert out.failure is not None and out.failure.code == "invalid_pattern", (tool, args, out.failure)
        assert "Traceback" not in out.failure.message


async def test_grep_stops_at_its_time_budget(env: Env):
    from gemini_split.tools.registry import ToolRegistry
    from gemini_split.tools.builtin.search import GrepSearchTool

    for i in range(300):
        (env.root / f"f{i:03}.txt").write_text("needle\n" * 10)
    registry = ToolRegistry([GrepSearchTool(time_budget=0.0)])
    out = await env.run("grep_search", {"pattern": "needle"}, registry=registry)
    assert out.failure is None and "time limit" in out.result


async def test_cancelling_a_grep_leaves_no_process(env: Env):
    from gemini_split.tools.builtin import processes

    for i in range(300):
        (env.root / f"f{i:03}.txt").write_text("needle\n" * 1000)
    with trio.move_on_after(0.3):
        while True:
            await env.run("grep_search", {"pattern": "needle", "total_max_matches": 10**6})
    assert not processes.live_groups()


@pytest.mark.timeout(60)  # reads 1 GiB: seconds alone, more on a loaded machine
@pytest.mark.skipif(not hasattr(os, "truncate"), reason="needs sparse files")
async def test_read_file_of_a_gigabyte_line_stays_within_its_cap(env: Env):
    """A 1 GiB file without a newline (sparse: it costs no disk) is read in
    bounded chunks: the peak of Python allocations stays at a few MiB."""
    path = env.root / "huge.txt"
    with open(path, "wb") as f:
        f.write(b"x" * 8192)  # a text head, then a hole of NUL bytes
        f.truncate(1 << 30)
    tracemalloc.start()
    try:
        out = await env.run("read_file", {"file_path": "huge.txt"})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out.failure is None, out.failure
    assert out.result.startswith("x" * 100) and "cut at 2000 characters" in out.result
    assert peak < 8 * 1024 * 1024, peak


async def test_diffs_of_large_rewrites_are_bounded(env: Env):
    """Rewriting every other line of a 20,000-line file: difflib would need
    minutes (quadratic); the approval diff and the result's line count stay
    linear, and the diff still says exactly what changes."""
    from gemini_split.tools.approval import Answer, ApprovalMode

    old = "".join(f"line {i}\n" for i in range(20_000))
    new = "".join(f"changed {i}\n" if i % 2 else f"line {i}\n" for i in range(20_000))
    (env.root / "big.txt").write_text(old)
    questions = []

    class Yes:
        async def ask(self, request):
            questions.append(request.description)
            return Answer.YES

    with trio.fail_after(20):
        out = await env.run("write_file", {"file_path": "big.txt", "content": new},
                            executor=env.executor(ApprovalMode.DEFAULT, asker=Yes()))
    assert out.failure is None, out.failure
    assert out.result == "Overwrote big.txt (+10000 -10000 lines)."
    diff = questions[0]
    assert "-line 19999\n" in diff and "+changed 19999" in diff and "+changed 1\n" in diff
    assert (env.root / "big.txt").read_text() == new
