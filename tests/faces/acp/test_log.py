"""``--log-file``: rotated to ``.old`` at 2 MB, at start and while running."""

from __future__ import annotations

import logging

import pytest

from gemini_split.commands.run_acp import LOG_MAX_BYTES, open_log

pytestmark = pytest.mark.timeout(20)


def test_an_oversized_log_is_moved_to_old_at_start(tmp_path):
    log = tmp_path / "gemini-acp.log"
    log.write_text("x" * (LOG_MAX_BYTES + 10))
    stop = open_log(log)
    try:
        logging.getLogger("gemini_split.acp.test").warning("fresh line")
    finally:
        stop()
    assert (tmp_path / "gemini-acp.log.old").stat().st_size == LOG_MAX_BYTES + 10
    assert "fresh line" in log.read_text() and log.stat().st_size < 1000


def test_a_log_that_grows_past_2_mb_while_running_is_rotated(tmp_path):
    log = tmp_path / "gemini-acp.log"
    stop = open_log(log)
    try:
        for i in range(3000):
            logging.getLogger("gemini_split.acp.test").warning("line %d %s", i, "y" * 900)
    finally:
        stop()
    assert (tmp_path / "gemini-acp.log.old").exists()
    assert log.stat().st_size <= LOG_MAX_BYTES
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gemini-acp.log", "gemini-acp.log.old"]
