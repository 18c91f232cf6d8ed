"""What ``pytest -q -n auto`` shows while its workers collect (issue 45.7).

pytest-xdist's controller prints only ``bringing up nodes...`` under ``-q``
until every worker has imported and collected every test file (tens of
seconds on 2 CPUs): a newcomer cannot tell it from a hang. Here each worker
writes how many test files it has collected to a small file of its own, and
the controller shows them: at a terminal one line rewritten every half
second (``collecting test files: gw0 120/279, gw1 118/279, …``), elsewhere
(CI logs) a line per worker when it is done. Then xdist's own progress (the
dots and ``[ 42%]``) takes over.

Registered by tests/conftest.py; does nothing without xdist or in a run
without workers.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from pathlib import Path

import pytest

#: Seconds between two redraws of the line at a terminal.
REDRAW = 0.5
#: The key under which a worker is told where to write its count.
_KEY = "collection_progress_file"


def _count_test_files(config: pytest.Config) -> int:
    """About how many test files the run collects (the arguments' ``test_*.py``)."""
    paths = [Path(arg.split("::")[0]) for arg in config.args] or [config.rootpath]
    count = 0
    for path in paths:
        if path.is_dir():
            count += sum(1 for _ in path.rglob("test_*.py"))
        elif path.suffix == ".py":
            count += 1
    return count


class WorkerCounter:
    """In a worker: the number of test files collected so far, in its file."""

    def __init__(self, path: Path):
        self.path = path
        self.files = 0

    @pytest.hookimpl
    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.nodeid.endswith(".py"):
            self.files += 1
            self.path.write_text(str(self.files))


class ControllerDisplay:
    """In the xdist controller: the workers' counts in xdist's own status
    line (its ``TerminalDistReporter``, which shows ``bringing up nodes...``
    under ``-q``), redrawn by a thread at a terminal."""

    def __init__(self, config: pytest.Config):
        self.directory = Path(tempfile.mkdtemp(prefix="pytest-progress-"))
        self.total = _count_test_files(config)
        self.started = time.monotonic()
        self.workers: list[str] = []
        self.collected: dict[str, int] = {}
        self.counts: dict[str, int] = {}
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None
        self.finished: str | None = None
        self.config = config
        self.status = None  # xdist's TerminalDistReporter, there once its session starts

    @pytest.hookimpl
    def pytest_configure_node(self, node) -> None:
        worker = node.gateway.id
        self.workers.append(worker)
        node.workerinput[_KEY] = str(self.directory / worker)

    @pytest.hookimpl
    def pytest_xdist_setupnodes(self, specs) -> None:
        self.status = self.config.pluginmanager.getplugin("terminaldistreporter")
        if self.status is None:
            return
        self.status.getstatus = self.line  # what xdist draws from now on
        if self.status.tr.isatty():
            self.thread = threading.Thread(target=self._redraw, name="collection-progress", daemon=True)
            self.thread.start()

    @pytest.hookimpl
    def pytest_xdist_node_collection_finished(self, node, ids) -> None:
        self.collected[node.gateway.id] = len(ids)
        if len(self.collected) == len(self.workers):
            self.finished = f"{len(self.workers)} workers collected {len(ids)} tests in {self._elapsed()}"
            self._stop()
        elif self.status is not None and not self.status.tr.isatty():
            self.status.write_line(f"{node.gateway.id} collected {len(ids)} tests in {self._elapsed()}")

    @pytest.hookimpl
    def pytest_unconfigure(self) -> None:
        self._stop()
        shutil.rmtree(self.directory, ignore_errors=True)

    def line(self) -> str:
        """The status: each worker's test files so far, or, once all are
        done, how many tests they collected and how long it took."""
        if self.finished:
            return self.finished
        counts = ", ".join(f"{worker} {self._files(worker)}" for worker in self.workers)
        return f"collecting test files ({self._elapsed()}): {counts or 'starting workers'}"

    def _files(self, worker: str) -> str:
        """``120/279``; ``starting`` before its first file (a worker spends
        seconds importing pytest's plugins first)."""
        try:
            self.counts[worker] = int((self.directory / worker).read_text())
        except FileNotFoundError:
            return "starting"
        except (OSError, ValueError):  # caught mid-write: the last count read
            pass
        return f"{self.counts.get(worker, 0)}/{self.total}"

    def _elapsed(self) -> str:
        return f"{time.monotonic() - self.started:.0f} s"

    def _redraw(self) -> None:
        while not self.stop.wait(REDRAW):
            self.status.rewrite(self.line())

    def _stop(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join()
            self.thread = None


def register(config: pytest.Config) -> None:
    """Register the side of this display that ``config``'s process runs."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        if _KEY in workerinput:
            config.pluginmanager.register(WorkerCounter(Path(workerinput[_KEY])), "collection-progress")
    elif config.getoption("numprocesses", None):
        config.pluginmanager.register(ControllerDisplay(config), "collection-progress")
