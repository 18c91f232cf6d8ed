"""Benchmark: what MCP servers cost gemini-split.

  (a) start-up with 3 stdio MCP servers (mcp-server-time twice and
      mcp-server-git), against the floor of 1 such server: started in
      parallel, 3 servers should take about as long as 1 (goal: ≤ 1.5×);
  (b) time from start to the REPL's first prompt (``open_client`` connected,
      embedded, scripted model) with those 3 servers configured, against none
      (goal: ≤ 0.5 s added — the servers connect in the background; the first
      turn waits for them);
  (c) round trip of one MCP tool call (a trivial tool on a local SDK server)
      against one built-in tool call (``read_file`` of a small file), both
      through the same executor (report).

Every figure is the median of ``--runs`` (default 5).

    python bench/mcp_tools.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import trio  # noqa: E402

from gemini_split.tools.approval import ApprovalMode, ApprovalPolicy  # noqa: E402
from gemini_split.tools.executor import ToolExecutor  # noqa: E402
from gemini_split.tools.mcp.sources import open_mcp_servers  # noqa: E402
from gemini_split.tools.registry import default_tools  # noqa: E402
from gemini_split.tools.workspace import Workspace  # noqa: E402
from gemini_split.userfiles.settings import MCPServerSettings  # noqa: E402

ODDBALL = Path(__file__).resolve().parents[1] / "tests" / "client" / "mcp" / "oddball_server.py"


def _time_server(tz: str) -> MCPServerSettings:
    return MCPServerSettings(command=sys.executable, args=["-m", "mcp_server_time", "--local-timezone", tz])


def three_servers(repo: Path) -> dict[str, MCPServerSettings]:
    return {
        "time": _time_server("UTC"),
        "time2": _time_server("Europe/Paris"),
        "git": MCPServerSettings(command=sys.executable, args=["-m", "mcp_server_git", "--repository", str(repo)]),
    }


async def _start(configs, cwd: Path) -> float:
    t0 = time.perf_counter()
    async with open_mcp_servers(configs, cwd=cwd) as servers:
        await servers.wait_started()
        elapsed = time.perf_counter() - t0
        assert all(s.state == "ready" for s in servers.statuses()), servers.statuses()
    return elapsed


async def _connected(home: Path, cwd: Path, script: Path) -> float:
    """Seconds from nothing to a connected client (embedded, scripted model):
    when the REPL shows its first prompt."""
    from gemini_split.app import embedded_service_for, hold_embedded, resolve_client_settings
    from gemini_split.cli import build_parser
    from gemini_split.commands.options_from_args import client_options
    from gemini_split.client.connect import open_client
    from gemini_split.environment import Environment

    env = Environment(environ={"PATH": os.environ["PATH"], "HOME": str(home), "GEMINI_SPLIT_HOME": str(home)}, cwd=cwd)
    t0 = time.perf_counter()
    options = client_options(build_parser().parse_args(["-m", f"scripted:{script}"]))
    settings = resolve_client_settings(options, env)
    async with hold_embedded(settings, embedded_service_for(options, env, settings)) as settings, \
            open_client(settings) as client:
        elapsed = time.perf_counter() - t0
        assert client.connected is not None
    return elapsed


async def _tool_round_trips(cwd: Path, runs: int) -> tuple[float, float]:
    (cwd / "small.txt").write_text("hello\n")
    registry = default_tools()
    async with open_mcp_servers({"odd": MCPServerSettings(command=sys.executable, args=[str(ODDBALL)])},
                                cwd=cwd) as servers:
        await servers.wait_started()
        for tool in servers.tools():
            registry.register(tool)
        executor = ToolExecutor(registry, Workspace(cwd), ApprovalPolicy(ApprovalMode.YOLO))

        async def emit(event):
            return None

        async def timed(name: str, args: dict) -> float:
            samples = []
            for i in range(runs * 20):
                t0 = time.perf_counter()
                result, failure = await executor.execute(f"c{i}", name, args, emit)
                samples.append(time.perf_counter() - t0)
                assert failure is None, failure
            return statistics.median(samples)

        builtin = await timed("read_file", {"file_path": "small.txt"})
        mcp = await timed("mcp_odd_add", {"a": 1, "b": 2})
    return builtin, mcp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        import subprocess

        subprocess.run(["git", "init", "-q", str(cwd)], check=True)
        script = cwd / "script.json"
        script.write_text(json.dumps([{"text": "hi"}]))
        bare, with_mcp = cwd / "bare", cwd / "with-mcp"
        bare.mkdir()
        with_mcp.mkdir()
        (with_mcp / "settings.json").write_text(json.dumps({"mcpServers": {
            name: {"command": c.command, "args": c.args} for name, c in three_servers(cwd).items()}}))
        first_bare = statistics.median(trio.run(_connected, bare, cwd, script) for _ in range(args.runs))
        first_mcp = statistics.median(trio.run(_connected, with_mcp, cwd, script) for _ in range(args.runs))
        one = statistics.median(trio.run(_start, {"time": _time_server("UTC")}, cwd) for _ in range(args.runs))
        three = statistics.median(trio.run(_start, three_servers(cwd), cwd) for _ in range(args.runs))
        builtin, mcp = trio.run(_tool_round_trips, cwd, args.runs)
    rows = [
        ("(a) 3 servers start vs 1 (≤ 1.5×)", f"{three:.2f} s vs {one:.2f} s = {three / one:.2f}×",
         "pass" if three <= 1.5 * one else "FAIL"),
        ("(b) first prompt: 3 MCP servers vs none (≤ +0.5 s)",
         f"{first_mcp:.3f} s vs {first_bare:.3f} s = +{first_mcp - first_bare:.3f} s",
         "pass" if first_mcp - first_bare <= 0.5 else "FAIL"),
        ("(c) tool round trip: MCP vs built-in (report)", f"{mcp * 1000:.2f} ms vs {builtin * 1000:.2f} ms",
         f"+{(mcp - builtin) * 1000:.2f} ms"),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"{'goal':<{width}}  figure  result")
    for goal, figure, verdict in rows:
        print(f"{goal:<{width}}  {figure}  {verdict}")


if __name__ == "__main__":
    main()
