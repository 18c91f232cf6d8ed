"""Suite-wide rules: no test can hang.

Two guards, one inside the other:

* Every Trio test (one not given a ``MockClock``) runs under
  ``trio.fail_after(TRIO_DEADLINE)``: a test that waits forever fails with
  ``TooSlowError`` and a traceback through the task that was stuck, and
  every nursery is cancelled and cleaned up on the way out.
* pytest-timeout (``timeout`` in pyproject.toml) stops *any* test, including
  a synchronous one blocked in a subprocess or a socket, a few seconds after
  that. A ``@pytest.mark.timeout(N)`` on a test raises both limits: the Trio
  deadline is then ``N - TRIO_MARGIN``.

Tests with a ``MockClock`` (``autojump_clock``) are left to pytest-timeout:
their clock jumps ahead of any Trio deadline on purpose.

And one economy: compiled bytecode is kept even where
``PYTHONDONTWRITEBYTECODE`` is set (see ``_keep_bytecode``); and one
courtesy: under ``-n`` the workers' collection progress is shown
(tests/collection_progress.py).
"""

from __future__ import annotations

import os
import sys
from functools import partial

import pytest
import trio

from tests import collection_progress

# Tests import grpc themselves (third-party stubs) before the plugin does:
# the same fork-safety setting as plugins/gemini_split_grpc/__init__.py.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

#: Seconds a Trio test may run (on the Trio clock) before it fails.
TRIO_DEADLINE = 20.0
#: The Trio deadline fires this long before pytest-timeout's, so a hung Trio
#: test is cancelled cleanly instead of being interrupted by a signal.
TRIO_MARGIN = 5.0


def _deadline_for(item: pytest.Item) -> float:
    marker = item.get_closest_marker("timeout")
    if marker is not None and marker.args:
        return max(float(marker.args[0]) - TRIO_MARGIN, 1.0)
    return TRIO_DEADLINE


async def _under_deadline(seconds: float, fn, *args):
    try:
        with trio.fail_after(seconds):
            return await fn(*args)
    except trio.TooSlowError:
        # The traceback above this (the Cancelled it caught) shows where it hung.
        pytest.fail(f"still running after {seconds:g} s on the Trio clock: a hang (see the traceback above)")


def _run_with_deadline(seconds: float):
    def run(fn, *args, clock=None, instruments=()):
        if clock is not None:  # virtual time: pytest-timeout guards it
            return trio.run(fn, *args, clock=clock, instruments=instruments)
        return trio.run(partial(_under_deadline, seconds, fn), *args, instruments=instruments)

    return run


def pytest_configure(config: pytest.Config) -> None:
    _keep_bytecode(config)
    collection_progress.register(config)


#: Test processes per CPU for ``-n auto``, and at most this many in all.
WORKERS_PER_CPU = 3
MAX_AUTO_WORKERS = 32


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` starts ``WORKERS_PER_CPU`` test processes per CPU (at
    most ``MAX_AUTO_WORKERS``), not one.

    Much of this suite's time is spent waiting (on the servers, REPLs and
    daemons it starts, on sockets and timeouts), not computing: with one
    worker per CPU the CPUs sat idle about half the run. Measured on 2
    CPUs, quiet, back to back: 2 workers 210 s, 4 183 s, 6 163 s, 8 139 s
    (CPU 212 → 238 s). Three, not four: at four (load 10 to 16 on 2 CPUs)
    about one run in two had a test whose own limits (a pty's 30 s, a
    telemetry close's 1 s) the load alone overran; the suite has grown
    since those figures (docs/performance.md has the run's time). A
    number in ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still
    wins, as with pytest-xdist's own hook (returning None leaves it to that
    hook)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return min(WORKERS_PER_CPU * cpus, MAX_AUTO_WORKERS)


def _keep_bytecode(config: pytest.Config) -> None:
    """Where ``PYTHONDONTWRITEBYTECODE`` is set, nothing is ever compiled
    once: every test process recompiles every test module it collects (about
    4 of its 7 s of CPU) and every ``gemini-split`` process the tests start
    recompiles whatever of the program has no ``.pyc`` yet. So the suite
    keeps bytecode after all, but out of the source tree as the setting
    asks: under pytest's own cache (``.pytest_cache/d/pycache``), through
    ``PYTHONPYCACHEPREFIX``, for this process and every process it starts
    (xdist workers, servers, clients). A ``PYTHONPYCACHEPREFIX`` the user
    chose is kept."""
    if not (sys.flags.dont_write_bytecode or os.environ.get("PYTHONDONTWRITEBYTECODE")):
        return
    prefix = os.environ.get("PYTHONPYCACHEPREFIX")
    if not prefix:
        cache = getattr(config, "cache", None)  # absent under -p no:cacheprovider
        if cache is None:  # nowhere of pytest's to put it
            return
        prefix = str(cache.mkdir("pycache"))
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = prefix
    sys.dont_write_bytecode = False
    sys.pycache_prefix = prefix


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give every Trio test (marked by pytest-trio's trio_mode) a runner that
    puts it under a Trio-clock deadline."""
    for item in items:
        marker = item.get_closest_marker("trio")
        if marker is None:
            continue
        item.add_marker(pytest.mark.trio(run=_run_with_deadline(_deadline_for(item))), append=False)


@pytest.fixture(autouse=True)
def _private_home(tmp_path_factory, monkeypatch):
    """Every test gets its own HOME: the session store (``~/.gemini/sessions``),
    profiles and history of one test never meet another's, nor the user's,
    nor those of a test run going on beside this one (a ``serve`` locks its
    state directory)."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("GEMINI_SPLIT_HOME", raising=False)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    """A real redis-server on a free loopback port, one per test process
    (``gemini_split.testing.redis_server``). Give each test its own keys
    with ``redis_server.url_with_prefix()``. Skips, saying why, only where
    redis-server is not installed (.ci/run installs it)."""
    from gemini_split.testing import redis_server as rs

    if not rs.available():
        pytest.skip(rs.MISSING)
    server = rs.RedisServer(tmp_path_factory.mktemp("redis"))
    with server:
        yield server
