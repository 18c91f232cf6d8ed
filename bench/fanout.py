"""Benchmark: the cost of watchers on one session (issue 11, fan-out).

A ``gemini-split serve`` daemon streams one answer of ``--deltas`` model
chunks (10,000 by default, one every ``--chunk-delay`` seconds) to one
session while 1, 10 and 100 watchers are attached to it
(``hello.role = "observer"`` over WebSocket); a driver on the same session
sends the prompt. This process runs the driver and the watchers (raw
protocol clients, one Trio run). ``--model gemini`` (the default) is the
daemon's real path: google-genai reading the SSE stream of the fake Gemini
server (``gemini_split.testing.fake_gemini``, its own process and clock);
``--model scripted`` plays the answer inside the daemon (no HTTP: one chunk
per timer wake-up, so a daemon starved of CPU also slows its model, and
nearly every chunk is a frame to every watcher — the worst case for
fan-out).

For each watcher count: the daemon's CPU seconds for the turn
(``/proc/PID/task/*/schedstat``), the wall time, model deltas per second
per watcher (every watcher gets the whole answer: the deltas the model
produced over the time the watcher took to receive them), the frames each
watcher received (the session merges deltas while its views write), and
whether every watcher got the whole text.

Goal: 100 watchers cost the daemon at most 3x the CPU of one watcher — each
event is numbered, logged and encoded once and the same text handed to
every view, so a watcher costs the daemon one write per frame, not an
encode per event. Runs are repeated (``--runs``) and the median taken: the
machines here differ about 2x from one day to the next, so the goal is a
ratio measured in the same run. ``--profile DIR`` samples the daemon with
py-spy and prints where its time went.

    python bench/fanout.py [--model gemini|scripted] [--deltas 10000] [--watchers 1,10,100] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import trio  # noqa: E402

from bench.procs import stop  # noqa: E402
from gemini_split.protocol import (  # noqa: E402
    ClientsChanged,
    Finished,
    GenerateContentRequest,
    Hello,
    RequestStarted,
    TextDelta,
    decode,
    encode,
)
from gemini_split.stamping import stamp  # noqa: E402
from gemini_split.transport import ConnectOptions, get_transport  # noqa: E402

PY = sys.executable
GOAL_RATIO = 3.0
API_KEY = "bench-key"


def cpu_seconds(pid: int) -> float:
    """CPU time of a process so far, all its threads: the scheduler's
    nanosecond count (``/proc/PID/task/*/schedstat``) where the kernel keeps
    it, else utime + stime (in clock ticks: 10 ms steps, too coarse for a
    fast turn)."""
    try:
        total = 0
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        return total / 1e9
    except (OSError, ValueError, IndexError):
        pass
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class FakeGemini:
    """``python -m gemini_split.testing.fake_gemini --script FILE`` in its
    own process: the real REST wire format, each chunk its own SSE event,
    paced by the fake's own clock (a busy daemon finds several chunks
    waiting, as it would from the real API)."""

    def __init__(self, workdir: Path, script: list[dict]):
        path = workdir / "fake-script.json"
        path.write_text(json.dumps(script))
        self.proc = subprocess.Popen(
            [PY, "-m", "gemini_split.testing.fake_gemini", "--script", str(path), "--api-key", API_KEY],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True, cwd=ROOT,
            env={k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_"))},
        )
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http://"):
            self.close()
            raise SystemExit(f"the fake Gemini server did not start: {self.url!r}")

    def close(self) -> None:
        stop(self.proc)


class Daemon:
    """``gemini-split serve`` on a free loopback port: ``-m scripted:FILE``
    (the script played in the daemon) or, given ``fake_url``, the Gemini
    model through google-genai against the fake server."""

    def __init__(self, workdir: Path, script: list[dict], *, fake_url: str | None = None):
        path = workdir / "script.json"
        path.write_text(json.dumps(script))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_"))}
        model = ["-m", f"scripted:{path}"]
        if fake_url is not None:
            env.update(GEMINI_API_KEY=API_KEY, GOOGLE_GEMINI_BASE_URL=fake_url)
            model = []
        self.proc = subprocess.Popen(
            [PY, "-m", "gemini_split", "serve", "--listen", "127.0.0.1:0", "--state-dir", ":memory:",
             *model, "--max-connections-per-user", "0"],
            cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True,
        )
        deadline = time.monotonic() + 30
        self.address = ""
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            match = re.search(r"serving on (ws://\S+)", line)
            if match:
                self.address = match.group(1)
                break
        if not self.address:
            self.close()
            raise SystemExit("the daemon did not start")
        # Drain its log so it never blocks on a full pipe.
        import threading

        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()

    def close(self) -> None:
        stop(self.proc)


async def _open(address: str, **hello: object):
    stream = await get_transport(address).open_connection(address, ConnectOptions(max_message_size=64 << 20))
    await stream.send(encode(stamp(Hello(client="bench", **hello))))
    connected = decode(await stream.receive())
    return stream, connected


async def one_turn(address: str, watchers: int, expected: str, pid: int) -> dict:
    driver, connected = await _open(address)
    streams = []
    counts = [connected.clients]
    for i in range(watchers):
        stream, joined = await _open(address, session_id=connected.session_id, role="observer",
                                     label=f"watcher {i}", replay={"limit": 0})
        streams.append(stream)
        counts.append(joined.clients)
    total = watchers + 1

    async def settle(stream, clients: int) -> None:
        # Everyone hears of everyone who joined later: not part of the turn.
        while clients < total:
            message = decode(await stream.receive())
            if isinstance(message, ClientsChanged):
                clients = message.clients

    async with trio.open_nursery() as nursery:
        for stream, clients in zip([driver, *streams], counts):
            nursery.start_soon(settle, stream, clients)
    results: list[tuple[float, int, str]] = []
    started = trio.Event()
    t0 = 0.0

    async def watch(stream) -> None:
        parts: list[str] = []
        frames = 0
        while True:
            message = decode(await stream.receive())
            if isinstance(message, TextDelta):
                parts.append(message.content)
                frames += 1
            elif isinstance(message, Finished):
                break
            elif isinstance(message, RequestStarted):
                started.set()
        results.append((time.perf_counter() - t0, frames, "".join(parts)))

    cpu_before = cpu_seconds(pid)
    t0 = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for stream in streams:
            nursery.start_soon(watch, stream)
        nursery.start_soon(watch, driver)
        await driver.send(encode(stamp(GenerateContentRequest(prompt="stream"))))
    wall = time.perf_counter() - t0
    cpu = cpu_seconds(pid) - cpu_before
    for stream in [driver, *streams]:
        await stream.aclose()
    watcher_results = results
    complete = all(text == expected for _, _, text in watcher_results)
    times = [t for t, _, _ in watcher_results]
    frames = [f for _, f, _ in watcher_results]
    return {"wall": wall, "cpu": cpu, "slowest": max(times), "frames": statistics.median(frames),
            "complete": complete}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--deltas", type=int, default=10_000)
    parser.add_argument("--watchers", default="1,10,100")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--chunk-delay", type=float, default=0.0005,
                        help="seconds between model chunks (default 0.0005: a model streaming 2,000 "
                             "deltas/s; 0: the whole answer at once, merged into a few frames)")
    parser.add_argument("--model", choices=("scripted", "gemini"), default="gemini",
                        help="gemini (default): the daemon's real path, google-genai reading the fake Gemini "
                             "server's SSE stream; scripted: the answer played inside the daemon (no HTTP; "
                             "one chunk per timer wake-up, so a starved daemon also slows the model)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="sample the daemon with py-spy during each watcher count's runs (files in DIR) "
                             "and print where its time went; sampling disturbs the CPU figures")
    args = parser.parse_args()
    if args.profile is not None:
        from bench import pyspy

        if not pyspy.available():
            parser.error("--profile needs py-spy on PATH (pip install py-spy)")
        args.profile.mkdir(parents=True, exist_ok=True)
    profiles = {}
    counts = [int(n) for n in args.watchers.split(",")]
    text = "".join(f"w{i} " for i in range(args.deltas))
    turn = {"text": text, "chunks": args.deltas, "chunk_delay": args.chunk_delay}
    script = [turn] * (len(counts) * args.runs + 1)
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        fake = FakeGemini(Path(tmp), script) if args.model == "gemini" else None
        try:
            daemon = Daemon(Path(tmp), script, fake_url=fake.url if fake else None)
        except BaseException:
            if fake is not None:
                fake.close()
            raise
        try:
            trio.run(one_turn, daemon.address, 1, text, daemon.proc.pid)  # warm-up
            for count in counts:
                sampler = None
                if args.profile is not None:
                    from bench import pyspy

                    sampler = pyspy.Sampler(daemon.proc.pid, args.profile / f"fanout-{count}.pyspy.txt")
                    time.sleep(0.5)  # py-spy attaches
                runs = [trio.run(one_turn, daemon.address, count, text, daemon.proc.pid) for _ in range(args.runs)]
                if sampler is not None:
                    complaint = sampler.stop()
                    profiles[count] = complaint or pyspy.summarize(sampler.out)
                rows[count] = {
                    "cpu": statistics.median(r["cpu"] for r in runs),
                    "wall": statistics.median(r["wall"] for r in runs),
                    "deltas_per_s": args.deltas / statistics.median(r["slowest"] for r in runs),
                    "frames": statistics.median(r["frames"] for r in runs),
                    "complete": all(r["complete"] for r in runs),
                }
        finally:
            daemon.close()
            if fake is not None:
                fake.close()
    base = rows[counts[0]]["cpu"]
    if args.json:
        print(json.dumps(rows, indent=2))
    print(f"{'watchers':>8} {'daemon CPU s':>12} {'x 1 watcher':>11} {'wall s':>7} {'deltas/s/watcher':>17} "
          f"{'frames/watcher':>15} {'complete':>8}")
    for count, row in rows.items():
        print(f"{count:>8} {row['cpu']:>12.3f} {row['cpu'] / base if base else float('nan'):>11.2f} "
              f"{row['wall']:>7.2f} {row['deltas_per_s']:>17,.0f} {row['frames']:>15,.0f} "
              f"{'yes' if row['complete'] else 'NO':>8}")
    for count, summary in profiles.items():
        print()
        print(summary if isinstance(summary, str) else pyspy.format_summary(summary, f"daemon, {count} watchers"))
    largest = counts[-1]
    ratio = rows[largest]["cpu"] / base if base else float("inf")
    ok = ratio <= GOAL_RATIO and all(r["complete"] for r in rows.values())
    print()
    print(f"{'goal':<52} {'figure':>10}  result")
    print(f"{f'{largest} watchers cost <= {GOAL_RATIO:g}x the CPU of {counts[0]}':<52} {ratio:>9.2f}x  "
          f"{'pass' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
