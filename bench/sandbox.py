"""Benchmark: what bubblewrap costs a shell command.

``run_shell_command("true")`` through the real tool executor (approval,
process group, output pumps), with and without the bubblewrap sandbox,
interleaved run by run so a machine that is slower today moves both alike.
The figure is the median wall time over ``--runs`` runs (default 41); the
goal is a ratio of sandboxed to unsandboxed of at most 5 (bwrap sets up
namespaces and a dozen mounts per command: milliseconds, not a container
start).

    python bench/sandbox.py [--runs N] [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import trio

from gemini_split.tools.approval import ApprovalMode, ApprovalPolicy
from gemini_split.tools.executor import ToolExecutor
from gemini_split.tools.registry import default_tools
from gemini_split.tools.workspace import Workspace
from gemini_split.sandbox import Sandbox, SandboxUnavailable

GOAL = 5.0


async def _one(executor: ToolExecutor) -> float:
    async def emit(event: object) -> None:
        pass

    start = time.perf_counter()
    result, failure = await executor.execute("c", "run_shell_command", {"command": "true"}, emit)
    elapsed = time.perf_counter() - start
    if failure is not None or result["exit_code"] != 0:
        raise SystemExit(f"run_shell_command('true') failed: {failure or result}")
    return elapsed


async def _measure(runs: int, workspace: Path, sandbox: Sandbox) -> tuple[list[float], list[float]]:
    policy = ApprovalPolicy(ApprovalMode.YOLO)
    plain = ToolExecutor(default_tools(), Workspace(workspace), policy)
    boxed = ToolExecutor(default_tools(sandbox=sandbox), Workspace(workspace), policy)
    await _one(plain), await _one(boxed)  # warm-up
    a: list[float] = []
    b: list[float] = []
    for _ in range(runs):
        a.append(await _one(plain))
        b.append(await _one(boxed))
    return a, b


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=41)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    try:
        sandbox = Sandbox.resolve("bwrap")
    except SandboxUnavailable as exc:
        print(f"skipped: {exc}", file=sys.stderr)
        return 0
    workspace = Path(tempfile.mkdtemp(prefix="bench-sandbox-"))
    try:
        plain, boxed = trio.run(_measure, args.runs, workspace, sandbox)
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
    p, b = statistics.median(plain) * 1000, statistics.median(boxed) * 1000
    ratio = b / p
    row = {"plain_ms": round(p, 2), "bwrap_ms": round(b, 2), "overhead_ms": round(b - p, 2),
           "ratio": round(ratio, 2), "goal": GOAL, "pass": ratio <= GOAL}
    if args.json:
        print(json.dumps(row))
    else:
        print(f"{'measure':<44}{'goal':>10}{'figure':>12}  result")
        print(f"{'run_shell_command(true), no sandbox (ms)':<44}{'':>10}{p:>12.2f}")
        print(f"{'run_shell_command(true), bwrap (ms)':<44}{'':>10}{b:>12.2f}")
        print(f"{'bwrap overhead (ms)':<44}{'':>10}{b - p:>12.2f}")
        print(f"{'ratio bwrap / no sandbox':<44}{f'<= {GOAL:g}':>10}{ratio:>12.2f}  {'pass' if row['pass'] else 'FAIL'}")
    return 0 if row["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
