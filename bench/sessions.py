"""Benchmark: what keeping sessions durable costs, and how fast they resume.

  (a) throughput: deltas per second streamed to one client by a ``serve``
      daemon keeping its sessions in SQLite (``--state-dir DIR``) versus in
      memory (``--state-dir :memory:``). The two daemons run side by side
      behind the same fake Gemini server (real google-genai over HTTP, as in
      bench/serve.py (b)); the store is the only difference; the runs
      alternate, median of several rounds.
      Goal: the store costs at most 10 % (ratio >= 0.90).
  (w) writer: the cost on the Trio loop of handing events to SQLite, for
      the dedicated writer thread the store uses versus a Trio task that
      gathers events and hands each batch to ``trio.to_thread.run_sync``:
      a producer on the loop emits events (yielding every 64, as a stream
      does) while the writer works; microseconds of producer wall time per
      event (the loop's cost, GIL contention included), and the time until
      everything is durable. (Why the store has a dedicated thread.)
  (r) resume: a session with 10,000 logged events; time from asking the
      store for everything after seq 0 to having the first event
      (``events_after``), and to having all of them.
      Goal: <= 50 ms to the first replayed event.

    python bench/sessions.py [--quick] [--only a,w,r] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import trio  # noqa: E402

from gemini_split.client.connect import ClientSettings, open_client  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from serve import API_KEY, FakeGeminiProcess, die_with_parent  # noqa: E402  (bench/serve.py)
from gemini_split.protocol import TextDelta  # noqa: E402

PY = sys.executable
#: Events a resume reads from the store at a time (as the server does).
REPLAY_PAGE = 500
GOALS = {
    "a": "store / memory deltas/s >= 0.90",
    "w": "(informative: which writer the store uses)",
    "r": "first replayed event of 10,000 <= 50 ms",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_"))}
    env.update(extra)
    return env


class Daemon:
    """``gemini-split serve`` in front of the fake Gemini server, with the
    given state dir."""

    def __init__(self, workdir: Path, name: str, fake_url: str, state_dir: str):
        port = free_port()
        self.url = f"ws://127.0.0.1:{port}"
        self.log_path = workdir / f"{name}.log"
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [PY, "-m", "gemini_split", "serve", "--listen", f"127.0.0.1:{port}", "--state-dir", state_dir],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT, cwd=workdir,
            env=clean_env(GEMINI_API_KEY=API_KEY, GOOGLE_GEMINI_BASE_URL=fake_url, HOME=str(workdir)),
            preexec_fn=die_with_parent,
        )
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"{name} exited: {self.log_path.read_text()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if json.loads(r.read()).get("status") == "ok":
                        break
            except (OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                self.close()
                raise SystemExit(f"{name} did not start: {self.log_path.read_text()}")
            time.sleep(0.05)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self._log.close()


# --- (a) throughput ---------------------------------------------------------------


async def stream_once(url: str, workspace: Path, fake: Any, chunks: int, expected: str) -> tuple[float, int]:
    """Deltas (model chunks) per second of one long answer on a fresh
    connection, from the first delta to the last, and the protocol
    messages that carried them."""
    first = last = 0.0
    parts: list[str] = []

    async def on_event(event: Any) -> None:
        nonlocal first, last
        if isinstance(event, TextDelta):
            now = time.perf_counter()
            first = first or now
            last = now
            parts.append(event.content)

    fake.add_turns([{"text": expected, "chunks": chunks}])
    async with open_client(ClientSettings(workspace=workspace, server=url), on_event=on_event) as client:
        outcome = await client.run_turn("stream")
    fake.forget_requests()
    if outcome.error is not None or "".join(parts) != expected:
        raise SystemExit(f"(a) the stream went wrong: {outcome.error or 'text differs'}")
    return chunks / max(last - first, 1e-9), len(parts)


def bench_throughput(workdir: Path, rounds: int, chunks: int) -> dict:
    text = "tok " * chunks
    fake = FakeGeminiProcess(workdir)
    store_dir = workdir / "state"
    memory = Daemon(workdir, "memory", fake.url, ":memory:")
    stored = Daemon(workdir, "sqlite", fake.url, str(store_dir))
    workspace = workdir / "ws"
    workspace.mkdir(exist_ok=True)
    rates: dict[str, list[float]] = {"memory": [], "sqlite": []}
    messages: dict[str, list[int]] = {"memory": [], "sqlite": []}
    try:
        async def run() -> None:
            for daemon in (memory, stored):  # warm up each once
                await stream_once(daemon.url, workspace, fake, chunks, text)
            for i in range(rounds):
                order = [("memory", memory), ("sqlite", stored)]
                if i % 2:
                    order.reverse()
                for name, daemon in order:
                    rate, sent = await stream_once(daemon.url, workspace, fake, chunks, text)
                    rates[name].append(rate)
                    messages[name].append(sent)

        trio.run(run)
    finally:
        memory.close()
        stored.close()
        fake.close()
    import sqlite3

    conn = sqlite3.connect(store_dir / "sessions.db")
    logged = conn.execute("SELECT count(*) FROM events").fetchone()[0]
    conn.close()
    mem, sql = statistics.median(rates["memory"]), statistics.median(rates["sqlite"])
    return {"memory_deltas_per_s": mem, "sqlite_deltas_per_s": sql, "ratio": sql / mem,
            "rounds": rounds, "chunks": chunks, "events_logged": logged,
            "messages_per_turn": {k: statistics.median(v) for k, v in messages.items()},
            "pass": sql / mem >= 0.90}


# --- (w) the writer ---------------------------------------------------------------


def bench_writer(workdir: Path, events: int) -> dict:
    from gemini_split.server.store import SessionRecord, StoredEvent, hash_token
    from gemini_split.server.store.sqlite import SQLiteStore

    data = json.dumps({"type": "text_delta", "id": "x-1", "timestamp": 0, "seq": 0, "request_id": "r",
                       "content": "tok "})
    results: dict[str, dict] = {}

    async def thread_writer() -> dict:
        store = SQLiteStore(workdir / "w-thread")
        await store.open()
        await store.create(SessionRecord(id="s", owner="o", token_hash=hash_token("t"), created=0, updated=0))
        t0 = time.perf_counter()
        for seq in range(1, events + 1):
            store.append_events("s", [StoredEvent(seq, "r", data)])
            if seq % 64 == 0:
                await trio.lowlevel.checkpoint()  # the loop does other work between events
        loop_time = time.perf_counter() - t0
        await store.flush()
        total = time.perf_counter() - t0
        await store.aclose()
        return {"loop_us_per_event": loop_time / events * 1e6, "durable_after_s": total}

    async def to_thread_writer() -> dict:
        # Same database work, driven by a Trio task + trio.to_thread per batch.
        store = SQLiteStore(workdir / "w-tothread")
        await trio.to_thread.run_sync(store.directory.mkdir)
        conn = await trio.to_thread.run_sync(store._connect)
        conn.execute("INSERT INTO sessions (id, owner, token_hash, created, updated) VALUES ('s','o','h',0,0)")
        send, receive = trio.open_memory_channel[StoredEvent](float("inf"))
        t0 = time.perf_counter()

        def write(batch: list[StoredEvent]) -> None:
            conn.execute("BEGIN")
            conn.executemany("INSERT INTO events VALUES ('s', ?, ?, ?)", [(e.seq, e.request_id, e.data) for e in batch])
            conn.execute("UPDATE sessions SET last_seq = ? WHERE id = 's'", (batch[-1].seq,))
            conn.execute("COMMIT")

        async def gatherer() -> None:
            async for first in receive:
                batch = [first]
                while True:
                    try:
                        batch.append(receive.receive_nowait())
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                await trio.to_thread.run_sync(write, batch)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(gatherer)
            for seq in range(1, events + 1):
                send.send_nowait(StoredEvent(seq, "r", data))
                if seq % 64 == 0:
                    await trio.lowlevel.checkpoint()
            loop_time = time.perf_counter() - t0
            await send.aclose()
        total = time.perf_counter() - t0
        conn.close()
        return {"loop_us_per_event": loop_time / events * 1e6, "durable_after_s": total}

    results["dedicated thread"] = trio.run(thread_writer)
    results["trio.to_thread per batch"] = trio.run(to_thread_writer)
    return {"events": events, "writers": results}


# --- (r) resume from the store ------------------------------------------------------------


def bench_resume(workdir: Path, events: int, runs: int) -> dict:
    from gemini_split.server.store import SessionRecord, StoredEvent, hash_token
    from gemini_split.server.store.sqlite import SQLiteStore

    data = json.dumps({"type": "text_delta", "id": "x-1", "timestamp": 0, "seq": 0, "request_id": "r",
                       "content": "some streamed text " * 3})

    async def run() -> dict:
        store = SQLiteStore(workdir / "r-state", replay_capacity=events)
        await store.open()
        await store.create(SessionRecord(id="s", owner="o", token_hash=hash_token("t"), created=0, updated=0))
        for start in range(1, events + 1, 100):
            store.append_events("s", [StoredEvent(seq, "r", data) for seq in range(start, start + 100)])
        await store.flush()
        await store.aclose()
        firsts, alls = [], []
        for _ in range(runs):
            store = SQLiteStore(workdir / "r-state", replay_capacity=events)  # a restarted server
            await store.open()
            t0 = time.perf_counter()
            page = await store.events_after("s", 0, limit=REPLAY_PAGE)
            t1 = time.perf_counter()
            got = list(page)
            while len(got) < events:
                got += await store.events_after("s", got[-1].seq, limit=REPLAY_PAGE)
            t2 = time.perf_counter()
            assert [e.seq for e in got] == list(range(1, events + 1))
            firsts.append(t1 - t0)
            alls.append(t2 - t0)
            await store.aclose()
        first = statistics.median(firsts)
        return {"events": events, "first_event_ms": first * 1e3, "all_events_ms": statistics.median(alls) * 1e3,
                "pass": first <= 0.050}

    return trio.run(run)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default="a,w,r")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    only = set(args.only.split(","))
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-sessions-") as tmp:
        workdir = Path(tmp)
        if "w" in only:
            results["w"] = bench_writer(workdir, 20_000 if args.quick else 200_000)
        if "r" in only:
            results["r"] = bench_resume(workdir, 10_000, 3 if args.quick else 7)
        if "a" in only:
            results["a"] = bench_throughput(workdir, 3 if args.quick else 7, 5_000 if args.quick else 20_000)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{'':3} {'goal':45} {'figure':45} result")
    if "a" in results:
        a = results["a"]
        figure = f"{a['sqlite_deltas_per_s']:,.0f} vs {a['memory_deltas_per_s']:,.0f}/s = {a['ratio']:.2f}"
        print(f"{'(a)':3} {GOALS['a']:45} {figure:45} {'PASS' if a['pass'] else 'FAIL'}")
    if "r" in results:
        r = results["r"]
        figure = f"{r['first_event_ms']:.1f} ms (all {r['events']:,}: {r['all_events_ms']:.1f} ms)"
        print(f"{'(r)':3} {GOALS['r']:45} {figure:45} {'PASS' if r['pass'] else 'FAIL'}")
    if "w" in results:
        for name, w in results["w"]["writers"].items():
            figure = f"{w['loop_us_per_event']:.2f} us/event on the loop, all durable {w['durable_after_s']:.2f} s"
            print(f"{'(w)':3} {name:45} {figure:45}")


if __name__ == "__main__":
    main()
