"""Benchmark: what configured but unused MCP servers cost a ``gemini-split -p``
through the local daemon (issue 34, item 5).

Three stdio servers from PyPI are configured (mcp-server-time twice, under
two names, and mcp-server-git); the prompt uses none of them. Measured side
by side in one run, the cases taking turns run by run (see bench/oneshot.py
for why only ratios are goals here):

* ``-p`` through the local daemon, no MCP server configured;
* the same with the three servers configured (their tool declarations come
  from the cache the first, uncounted run filled: no server is started);
* for comparison, the three servers with a cache that cannot be written
  (``mcp-cache`` is a file), so every run starts all three, as every run
  did before the cache.

Each configuration has a home (``GEMINI_SPLIT_HOME``) and so a local daemon
of its own, started before the timed runs.

Goal: with three unused servers, median wall <= 1.2x the run with none.

    python bench/mcp_oneshot.py [--runs N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from oneshot import API_KEY, TEXT_TURN, run_cases  # noqa: E402

from gemini_split.testing.fake_gemini import FakeGemini  # noqa: E402


def servers(repo: str) -> dict:
    py = sys.executable
    return {"mcpServers": {
        "time": {"command": py, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]},
        "tokyo": {"command": py, "args": ["-m", "mcp_server_time", "--local-timezone", "Asia/Tokyo"]},
        "git": {"command": py, "args": ["-m", "mcp_server_git", "--repository", repo]},
    }}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    gs = [sys.executable, "-m", "gemini_split"]
    with tempfile.TemporaryDirectory() as workdir, FakeGemini(api_key=API_KEY) as fake:
        subprocess.run(["git", "init", "-q", workdir], check=True)
        homes = {name: tempfile.mkdtemp(prefix=f"gsb-{name}-") for name in ("none", "cached", "uncached")}
        for name in ("cached", "uncached"):
            Path(homes[name], "settings.json").write_text(json.dumps(servers(workdir)))
        Path(homes["uncached"], "mcp-cache").write_text("not a directory: nothing can be cached\n")
        base = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_"))}
        base.update(GEMINI_API_KEY=API_KEY, GOOGLE_GEMINI_BASE_URL=fake.url, GEMINI_SERVER_MODE="local")
        base.pop("XDG_RUNTIME_DIR", None)
        base.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed (see bench/oneshot.py)
        envs = {name: dict(base, GEMINI_SPLIT_HOME=home) for name, home in homes.items()}
        for env in envs.values():
            subprocess.run([*gs, "daemon", "start"], env=env, check=True, capture_output=True)
        load_before = os.getloadavg()[0]
        try:
            results = run_cases([
                ("-p via local daemon, no MCP server", [TEXT_TURN], [*gs, "-p", "count"], envs["none"]),
                ("-p via local daemon, 3 unused MCP servers", [TEXT_TURN], [*gs, "-p", "count"], envs["cached"]),
                ("  (the same, cache unusable: all started)", [TEXT_TURN], [*gs, "-p", "count"], envs["uncached"]),
            ], args.runs, workdir, fake)
        finally:
            for env in envs.values():
                subprocess.run([*gs, "daemon", "stop"], env=env, capture_output=True)
            for home in homes.values():
                subprocess.run(["rm", "-rf", home], check=False)
    load = (round(load_before, 2), round(os.getloadavg()[0], 2))
    none, cached, uncached = (r["wall_s"] for r in results)
    goals = [("3 unused MCP servers: wall <= 1.2x none", cached / none, 1.2)]
    if args.json:
        print(json.dumps({"load_average": load, "results": results, "uncached_ratio": round(uncached / none, 3),
                          "goals": [{"goal": g, "figure": round(v, 3), "limit": lim, "pass": v <= lim}
                                    for g, v, lim in goals]}, indent=2))
        return
    print(f"{'case':48} {'median wall':>12} {'CPU':>9} {'peak RSS':>10}   (min–max wall, {args.runs} runs)")
    for r in results:
        print(f"{r['case']:48} {r['wall_s']:>10.3f} s {r['cpu_s']:>7.3f} s {r['rss_mb']:>7.1f} MB   "
              f"({r['wall_min_s']:.3f}–{r['wall_max_s']:.3f} s)")
    print()
    print(f"load average (1 min) {load[0]:.2f} at the start, {load[1]:.2f} at the end; {os.cpu_count()} CPUs")
    print(f"cache unusable (every server started): {uncached / none:.2f}x none")
    print()
    print(f"{'goal':52} {'figure':>10}  result")
    for goal, value, limit in goals:
        print(f"{goal:52} {value:>8.2f}x   {'pass' if value <= limit else 'FAIL'}")


if __name__ == "__main__":
    main()
