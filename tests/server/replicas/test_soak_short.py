"""Issue 44.1, in the suite: a short run of the chaos soak (bench/soak.py).

Three real replicas behind a real nginx on one real redis-server; a few
clients prompting, resuming and watching for ~40 s while replicas are
killed (SIGKILL) and restarted, Redis is restarted, its connections are cut
and nginx is reloaded; the model's shell calls run on the servers, approved
(or denied) by the clients. The invariants the soak checks must all hold:
every prompt answered once or ended visibly, every stream gap-free and
duplicate-free by seq, no session left running, RSS bounded, every approved
call applied at most once and no denied one. No latency
bound here (those live in bench/): the machine may be loaded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gemini_split.testing import nginx as ngx
from gemini_split.testing import redis_server as rs

pytestmark = [
    pytest.mark.skipif(not rs.available(), reason=rs.MISSING),
    pytest.mark.skipif(not ngx.available(), reason=ngx.MISSING),
    pytest.mark.slow,
]

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.timeout(420)
def test_a_short_chaos_soak_loses_nothing_and_repeats_nothing(tmp_path):
    out = tmp_path / "soak"
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "soak.py"), "--minutes", "0.7", "--sessions", "6",
         "--interval", "6", "--seed", "44", "--rss-limit-mb", "400", "--out", str(out)],
        capture_output=True, text=True, timeout=400)
    report = json.loads(out.with_suffix(".json").read_text())
    assert report["problems"] == [], run.stdout + run.stderr
    assert run.returncode == 0, run.stdout + run.stderr
    assert report["prompts"] >= 6 and report["outcomes"].get("answered", 0) >= 6
    assert report["failures"], "no failure was injected"
    assert report["approvals"]["approved"] > 0 and report["approvals"]["applied"] > 0, report["approvals"]
    assert out.with_suffix(".png").stat().st_size > 1000
