"""Issue 45.7: ``pytest -q -n auto`` at a terminal shows its workers'
collection progress from the start, not ``bringing up nodes...`` alone
(tests/collection_progress.py). A small suite of its own, run by real
pytest-xdist workers under a pseudo-terminal."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from tests.ui.repl.pty_driver import PtyProcess, Timeout

pytestmark = pytest.mark.timeout(150)

REPO = Path(__file__).resolve().parents[1]


def test_the_terminal_shows_each_workers_collected_files_then_how_many_tests_they_collected(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text(
        "import faulthandler\nimport os\nimport signal\nfrom pathlib import Path\n\n"
        "from tests import collection_progress\n\n"
        "STACKS = open(Path(__file__).parent / f'stacks-{os.getpid()}.txt', 'w')\n"
        "faulthandler.register(signal.SIGUSR1, file=STACKS, all_threads=True)\n\n\n"
        "def pytest_configure(config):\n"
        "    collection_progress.register(config)\n")
    for name in ("one", "two", "three"):
        (tmp_path / f"test_{name}.py").write_text("import time\n\ntime.sleep(0.4)\n\n\ndef test_it():\n    pass\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PYTEST_XDIST_AUTO_NUM_WORKERS", None)
    # Its own --basetemp: without one, the run's end would clean up the
    # oldest numbered directories under the shared /tmp/pytest-of-<user>,
    # the outer suite's trees of thousands of files (it took over 40 s in CI).
    run = PtyProcess([sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider", "-p", "no:randomly",
                      "-p", "no:trio", "-p", "no:hypothesispytest", "-p", "no:anyio",
                      "--basetemp", str(tmp_path / "basetemp")],
                     env=env, cwd=str(tmp_path))
    try:
        run.expect(r"collecting test files \(\d+ s\): gw0 (starting|\d/3), gw1 (starting|\d/3)", timeout=60)
        run.expect(r"2 workers collected 3 tests in \d+ s", timeout=60)
        run.expect(r"\.\.\. +\[100%\]", timeout=60)  # xdist's own progress took over
        try:
            run.expect(r"3 passed", timeout=40)
        except Timeout:
            _end_hung(run, tmp_path)
        assert run.wait(timeout=30) == 0
    finally:
        run.close()


def _end_hung(run: PtyProcess, directory: Path) -> None:
    """The run printed its last test's progress but not its summary: every
    process's threads' stacks (faulthandler, on SIGUSR1) say where it hangs.
    It hung here twice in CI; the stacks of the second time showed pytest's
    session end deleting the oldest numbered temp directories shared with
    the outer suite, which the run's own --basetemp now avoids."""
    os.killpg(run.pid, signal.SIGUSR1)
    run.drain(3)
    stacks = "\n".join(f"{path.name}:\n{path.read_text()}" for path in sorted(directory.glob("stacks-*.txt")))
    pytest.fail(f"the run hung after its last test; its processes' stacks:\n{stacks}")
