"""Benchmark: what a checkpoint costs an edit (issue 30, item 1).

A workspace of 5,000 files (50 directories of 100 files, 1-4 KiB each) is
snapshotted once (the cold first snapshot: every file hashed into the
shadow repository, reported but not a goal). Then, run by run, one file is
changed and ``write_file`` is run through the real executor, taking turns:

* with checkpointing off (``executor.checkpoints`` None: no git at all);
* with checkpointing on: the snapshot (``git status``, ``git add -A`` on a
  warm index, ``git commit``), the record, then the same write.

Goal: with checkpointing on, the median call takes <= 50 ms more than
with it off. The git processes' CPU time per checkpoint (user + system,
from ``getrusage``) is reported too: on a machine shared with other work
the wall time measures the queue for a CPU as much as the checkpoint.
(Off costs nothing by construction: no module is imported and no process
started; tests/client/test_checkpoints.py checks that no git runs.)

    python bench/checkpoint.py [--runs N] [--files N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import trio  # noqa: E402

from gemini_split.tools.checkpoints import Checkpoints  # noqa: E402
from gemini_split.tools.executor import ToolExecutor  # noqa: E402
from gemini_split.tools.approval import ApprovalMode, ApprovalPolicy  # noqa: E402
from gemini_split.tools.registry import default_tools  # noqa: E402
from gemini_split.tools.workspace import Workspace  # noqa: E402

GOAL_MS = 50.0


def make_tree(root: Path, files: int) -> None:
    per_dir = 100
    for i in range(files):
        d = root / f"pkg{i // per_dir:03d}"
        d.mkdir(exist_ok=True)
        (d / f"mod{i % per_dir:03d}.py").write_text(f"# file {i}\n" + "x = 1\n" * (150 + (i * 37) % 450))


async def measure(runs: int, files: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        root.mkdir()
        make_tree(root, files)
        workspace = Workspace(root)
        checkpoints = Checkpoints.for_user(workspace.roots, Path(tmp) / "home")
        start = time.perf_counter()
        await checkpoints.before("cold", "write_file", {}, None, None)
        cold = (time.perf_counter() - start) * 1000
        registry = default_tools()
        executor = ToolExecutor(registry, workspace, ApprovalPolicy(ApprovalMode.YOLO))

        async def emit(event) -> None:
            pass

        timings: dict[str, list[float]] = {"off": [], "on": []}
        git_cpu: list[float] = []
        for run in range(runs):
            for case in ("off", "on") if run % 2 == 0 else ("on", "off"):
                executor.checkpoints = checkpoints if case == "on" else None
                # A file changed since the last snapshot, as between two edits.
                (root / "pkg001" / "mod001.py").write_text(f"# changed {run} {case}\n")
                args = {"file_path": f"pkg002/mod{run % 100:03d}.py", "content": f"edited {run} {case}\n"}
                children = resource.getrusage(resource.RUSAGE_CHILDREN)
                start = time.perf_counter()
                _, failure = await executor.execute(f"{case}-{run}", "write_file", args, emit)
                timings[case].append((time.perf_counter() - start) * 1000)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                if case == "on":
                    git_cpu.append((after.ru_utime - children.ru_utime + after.ru_stime - children.ru_stime) * 1000)
                assert failure is None, failure
        registry.close()
    off, on = statistics.median(timings["off"]), statistics.median(timings["on"])
    return {"files": files, "runs": runs, "cold_snapshot_ms": cold, "load": os.getloadavg()[0], "cpus": os.cpu_count(),
            "git_cpu_median_ms": statistics.median(git_cpu), "off_median_ms": off, "on_median_ms": on,
            "on_p90_ms": statistics.quantiles(timings["on"], n=10)[-1] if runs >= 10 else max(timings["on"]),
            "added_median_ms": on - off, "goal_ms": GOAL_MS, "pass": on - off <= GOAL_MS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = trio.run(measure, args.runs, args.files)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{result['files']} files, {result['runs']} runs each, cases taking turns")
    print(f"load average {result['load']:.1f} on {result['cpus']} CPUs")
    print(f"first (cold) snapshot: {result['cold_snapshot_ms']:.0f} ms (not a goal)")
    print(f"write_file, checkpointing off: median {result['off_median_ms']:.1f} ms")
    print(f"write_file, checkpointing on:  median {result['on_median_ms']:.1f} ms (p90 {result['on_p90_ms']:.1f} ms)")
    print("| goal | figure | result |")
    print("|---|---|---|")
    print(f"| checkpoint adds <= {GOAL_MS:.0f} ms to an edit (median) | {result['added_median_ms']:.1f} ms | "
          f"{'pass' if result['pass'] else 'FAIL'} |")
    print(f"| (the git processes' CPU time per checkpoint, median: what an idle machine waits) | "
          f"{result['git_cpu_median_ms']:.1f} ms | {'pass' if result['git_cpu_median_ms'] <= GOAL_MS else 'FAIL'} |")


if __name__ == "__main__":
    main()
