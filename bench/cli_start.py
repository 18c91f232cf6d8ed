"""Benchmark: how fast the CLI shell answers, as a ratio to bare Python.

``gemini-split --version``, ``--help`` and ``server list --names`` (which the
shell completions run on every Tab) must not pay for trio, the protocol or a
transport. Each is timed as a fresh process, interleaved run by run with the
floor, ``python -c "import argparse"``, from the same interpreter and
environment, so a machine that is 2x slower today moves both alike. The
figure is the median wall time over ``--runs`` runs (default 21); the goal is
a ratio of at most 1.5.

Byte-code caches are on, as in any installed copy (pip compiles them at
install time): ``PYTHONDONTWRITEBYTECODE`` is dropped from the children's
environment, and the warm-up run writes them.

    python bench/cli_start.py [--runs N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

GOAL = 1.5
FLOOR = [sys.executable, "-c", "import argparse"]
COMMANDS = {
    "--version": ["--version"],
    "--help": ["--help"],
    "server list --names": ["server", "list", "--names"],
}


def _wall(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def measure(runs: int) -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory() as home:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["GEMINI_SPLIT_HOME"] = home
        floor: list[float] = []
        times: dict[str, list[float]] = {name: [] for name in COMMANDS}
        for name, args in COMMANDS.items():  # warm the file cache once
            _wall([sys.executable, "-m", "gemini_split", *args], env)
        for _ in range(runs):
            floor.append(_wall(FLOOR, env))
            for name, args in COMMANDS.items():
                times[name].append(_wall([sys.executable, "-m", "gemini_split", *args], env))
    floor_median = statistics.median(floor)
    results = {"python -c 'import argparse'": {"median_s": floor_median, "ratio": 1.0}}
    for name, samples in times.items():
        median = statistics.median(samples)
        results[f"gemini-split {name}"] = {"median_s": median, "ratio": median / floor_median}
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    results = measure(args.runs)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(f"{'command':<36} {'median':>9} {'ratio':>7} {'goal':>7}  result")
        for name, row in results.items():
            is_floor = row["ratio"] == 1.0 and name.startswith("python")
            goal = "floor" if is_floor else f"<={GOAL:g}"
            verdict = "" if is_floor else ("pass" if row["ratio"] <= GOAL else "FAIL")
            print(f"{name:<36} {row['median_s'] * 1000:>7.1f}ms {row['ratio']:>6.2f}x {goal:>7}  {verdict}")
    failed = [name for name, row in results.items() if row["ratio"] > GOAL]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
