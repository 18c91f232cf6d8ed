"""Issue 45.7: ``pytest -q -n auto`` at a terminal shows its workers'
collection progress from the start, not ``bringing up nodes...`` alone
(tests/collection_progress.py). A small suite of its own, run by real
pytest-xdist workers under a pseudo-terminal."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.ui.repl.pty_driver import PtyProcess

pytestmark = pytest.mark.timeout(90)

REPO = Path(__file__).resolve().parents[1]


def test_the_terminal_shows_each_workers_collected_files_then_how_many_tests_they_collected(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text(
        "from tests import collection_progress\n\n\n"
        "def pytest_configure(config):\n"
        "    collection_progress.register(config)\n")
    for name in ("one", "two", "three"):
        (tmp_path / f"test_{name}.py").write_text("import time\n\ntime.sleep(0.4)\n\n\ndef test_it():\n    pass\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PYTEST_XDIST_AUTO_NUM_WORKERS", None)
    run = PtyProcess([sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider", "-p", "no:randomly",
                      "-p", "no:trio", "-p", "no:hypothesispytest", "-p", "no:anyio"],
                     env=env, cwd=str(tmp_path))
    try:
        run.expect(r"collecting test files \(\d+ s\): gw0 (starting|\d/3), gw1 (starting|\d/3)", timeout=60)
        run.expect(r"2 workers collected 3 tests in \d+ s", timeout=60)
        run.expect(r"3 passed", timeout=60)
        assert run.wait(timeout=30) == 0
    finally:
        run.close()
