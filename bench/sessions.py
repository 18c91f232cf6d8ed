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
  (r) the store alone: a session with 10,000 logged events; time from
      asking for everything after seq 0 (page by page, as a resume does) to
      having the first page, and all of them.
  (R) resume over the wire: a daemon session with 10,000 logged events; a
      raw client sends a resuming hello (last_seq 0); time to the first
      replayed event and to the last, while the session is live (events in
      memory) and after the daemon restarted (events read from SQLite).
      Goal: <= 50 ms to the first replayed event.
  (c) cut -> resumed: a real client streams through the tests' fault proxy;
      the proxy resets the connection mid-answer; time until the client has
      the next delta (reconnect backoff + connect + handshake + replay).
      Goal: <= 0.5 s on loopback.
  (m) memory after a burst: a ``serve`` daemon (SQLite store, behind the
      fake Gemini server) is warmed up and its resident memory read (idle);
      1,000 clients connect, each runs one turn in its own session and
      stays connected until all have (connected); then every client
      leaves, and the daemon's memory is read again after the detached
      grace, the unloads and the give-back have had their time (after,
      45 s later), while /health is polled every 0.5 s, as a load balancer
      would (its longest answer shows how long the loop stalled meanwhile;
      the daemon's log line says how long the give-back's collection held
      it). A poll every 20 ms leaves the server with a few thousand
      short-lived connections' leftovers scattered through the freed heap
      (Trio keeps each exited deadline until it expires), and those pages
      cannot be given back: 1.25-1.45x instead of ~1.08x. ``--against PATH`` runs
      the same against another checkout side by side (its daemon imports
      that tree through PYTHONPATH), the trees taking turns each round.
      Goal: after / idle <= 1.10.

    python bench/sessions.py [--quick] [--only a,R,c,w,r,m] [--json]
                             [--sessions N] [--against PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
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

from bench.procs import stop  # noqa: E402
from gemini_split.client.connect import ClientSettings, Endpoint, ToolSettings, open_client  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from serve import API_KEY, FakeGeminiProcess, die_with_parent  # noqa: E402  (bench/serve.py)
from gemini_split.protocol import TextDelta  # noqa: E402

PY = sys.executable
#: Events a resume reads from the store at a time (as the server does).
REPLAY_PAGE = 500
GOALS = {
    "a": "store / memory deltas/s >= 0.90",
    "w": "(informative: which writer the store uses)",
    "r": "store: first of 10,000 events read <= 50 ms",
    "R": "resume, 10,000 logged: first replayed <= 50 ms",
    "c": "cut -> resumed stream <= 0.5 s (loopback)",
    "m": "serve memory after a burst / idle <= 1.10",
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

    def __init__(self, workdir: Path, name: str, fake_url: str, state_dir: str, *extra: str,
                 env_extra: dict[str, str] | None = None):
        port = free_port()
        self.url = f"ws://127.0.0.1:{port}"
        self.health_url = f"http://127.0.0.1:{port}/health"
        self.log_path = workdir / f"{name}.log"
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [PY, "-m", "gemini_split", "serve", "--listen", f"127.0.0.1:{port}", "--state-dir", state_dir, *extra],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT, cwd=workdir,
            env=clean_env(GEMINI_API_KEY=API_KEY, GOOGLE_GEMINI_BASE_URL=fake_url, HOME=str(workdir),
                          **(env_extra or {})),
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

    def rss_mb(self) -> float:
        """Resident memory now (the pid stays the same across serve's re-exec)."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return float("nan")

    def close(self) -> None:
        stop(self.proc, 15)
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
    async with open_client(ClientSettings(endpoint=Endpoint(server=url), tools=ToolSettings(workspace=workspace)), on_event=on_event) as client:
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
            conn.executemany("INSERT INTO events (session_id, seq, request_id, data, timestamp, type) "
                             "VALUES ('s', ?, ?, ?, ?, ?)",
                             [(e.seq, e.request_id, e.data, e.timestamp, e.type) for e in batch])
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


# --- (R) resume over the wire, (c) cut -> resumed ----------------------------------------


async def _raw_hello(url: str, **fields: Any) -> tuple[Any, Any, float]:
    """(stream, the answer to hello, when hello was sent: after the
    connection was open)."""
    from gemini_split.protocol import Hello, decode, encode
    from gemini_split.stamping import stamp
    from gemini_split.transport import ConnectOptions, get_transport

    stream = await get_transport(url).open_connection(url, ConnectOptions())
    sent = time.perf_counter()
    await stream.send(encode(stamp(Hello(client="bench", **fields))))
    return stream, decode(await stream.receive()), sent


def bench_resume_wire(workdir: Path, events: int, runs: int) -> dict:
    """A session with ``events`` logged events on a daemon; time from sending
    a resuming hello (last_seq 0) to the first replayed event, and to the
    last, live (events in memory) and after a restart (events in the store)."""
    from gemini_split.protocol import Finished, GenerateContentRequest, decode, encode
    from gemini_split.stamping import stamp

    fake = FakeGeminiProcess(workdir)
    state = workdir / "r-wire-state"
    daemon = Daemon(workdir, "r-wire", fake.url, str(state), "--replay-capacity", str(events + 100))
    # Small pieces, paced: one protocol event per model chunk.
    fake.add_turns([{"text": "tok " * events, "chunks": events, "chunk_delay": 0.0002}])
    out: dict[str, Any] = {"events": events}

    async def make_session() -> tuple[str, str, int]:
        stream, connected, _ = await _raw_hello(daemon.url)
        await stream.send(encode(stamp(GenerateContentRequest(prompt="many events"))))
        last = 0
        while True:
            message = decode(await stream.receive())
            last = message.seq or last
            if isinstance(message, Finished):
                break
        await stream.aclose()
        return connected.session_id, connected.resume_token, last

    async def time_resume(session_id: str, token: str, logged: int) -> tuple[float, float]:
        stream, connected, t0 = await _raw_hello(daemon.url, session_id=session_id, resume_token=token, last_seq=0)
        assert connected.TYPE == "connected" and connected.resumed, connected
        first = decode(await stream.receive())
        t1 = time.perf_counter()
        assert first.seq == 1, first
        seen = 1
        while seen < logged:
            seen = decode(await stream.receive()).seq
        t2 = time.perf_counter()
        await stream.aclose()
        return t1 - t0, t2 - t0

    try:
        session_id, token, logged = trio.run(make_session)
        out["logged"] = logged
        live = [trio.run(time_resume, session_id, token, logged) for _ in range(runs)]
        daemon.close()
        daemon = Daemon(workdir, "r-wire2", fake.url, str(state), "--replay-capacity", str(events + 100))
        stored = [trio.run(time_resume, session_id, token, logged) for _ in range(runs)]
    finally:
        daemon.close()
        fake.close()
    for name, runs_ in (("live", live), ("restarted", stored)):
        out[f"{name}_first_ms"] = statistics.median(r[0] for r in runs_) * 1e3
        out[f"{name}_all_ms"] = statistics.median(r[1] for r in runs_) * 1e3
    out["pass"] = max(out["live_first_ms"], out["restarted_first_ms"]) <= 50
    return out


def bench_cut(workdir: Path, runs: int) -> dict:
    """A client streaming through the fault proxy; the proxy resets the
    connection; time until the client has the next event of the resumed
    stream (reconnect backoff, TCP+WebSocket setup, handshake, replay)."""
    sys.path.insert(0, str(ROOT))
    from tests.faultproxy import FaultProxy  # the proxy the tests use

    fake = FakeGeminiProcess(workdir)
    daemon = Daemon(workdir, "cut", fake.url, str(workdir / "cut-state"))
    port = int(daemon.url.rsplit(":", 1)[1])
    workspace = workdir / "ws-cut"
    workspace.mkdir(exist_ok=True)
    text = "".join(f"w{i} " for i in range(2000))
    fake.add_turns([{"text": text, "chunks": 2000, "chunk_delay": 0.002}] * runs)
    gaps: list[float] = []

    async def run() -> None:
        async with trio.open_nursery() as nursery:
            proxy = FaultProxy("127.0.0.1", port)
            proxy_port = await nursery.start(proxy.serve)
            for _ in range(runs):
                parts: list[str] = []
                cut_at: list[float] = []
                got: list[float] = []

                async def on_event(event: Any) -> None:
                    if isinstance(event, TextDelta):
                        parts.append(event.content)
                        if cut_at and not got:
                            got.append(time.perf_counter())
                        if len(parts) == 200 and not cut_at:
                            cut_at.append(time.perf_counter())
                            proxy.cut()

                settings = ClientSettings(endpoint=Endpoint(server=f"ws://127.0.0.1:{proxy_port}"), tools=ToolSettings(workspace=workspace))
                async with open_client(settings, on_event=on_event) as client:
                    outcome = await client.run_turn("stream")
                if outcome.error is not None or "".join(parts) != text:
                    raise SystemExit(f"(c) the resumed stream went wrong: {outcome.error or 'text differs'}")
                gaps.append(got[0] - cut_at[0])
            nursery.cancel_scope.cancel()

    try:
        trio.run(run)
    finally:
        daemon.close()
        fake.close()
    median = statistics.median(gaps)
    return {"runs": runs, "median_ms": median * 1e3, "max_ms": max(gaps) * 1e3, "pass": median <= 0.5}


# --- (m) memory after a burst -------------------------------------------------------------


async def _burst(url: str, workspace: Path, sessions: int, at_peak: Any) -> int:
    """``sessions`` clients connect (50 at a time), each runs one turn in a
    new session; once all have, ``at_peak()``, then all leave. Returns the
    turns that ended well."""
    done = 0
    all_done = trio.Event()
    leave = trio.Event()
    limiter = trio.CapacityLimiter(50)
    settings = ClientSettings(endpoint=Endpoint(server=url), tools=ToolSettings(workspace=workspace))

    async def one(i: int) -> None:
        nonlocal done
        async with contextlib.AsyncExitStack() as stack:
            try:
                async with limiter:
                    client = await stack.enter_async_context(open_client(settings))
                outcome = await client.run_turn(f"session {i} says hello")
                done += outcome.error is None
            except Exception as exc:  # noqa: BLE001 - counted as not done
                print(f"  (m) client {i}: {type(exc).__name__}: {str(exc)[:100]}", file=sys.stderr)
            finally:
                finished()
            await leave.wait()

    left = sessions

    def finished() -> None:
        nonlocal left
        left -= 1
        if left == 0:
            all_done.set()

    async with trio.open_nursery() as nursery:
        for i in range(sessions):
            nursery.start_soon(one, i)
        await all_done.wait()
        at_peak()
        leave.set()
    return done


def _health_poller(url: str, stop_at: float, worst: list[float]) -> None:
    """GET /health every 0.5 s until ``stop_at`` (monotonic); keep the
    longest answer time in ``worst[0]``."""
    while time.monotonic() < stop_at:
        t = time.perf_counter()
        try:
            urllib.request.urlopen(url, timeout=10).read()
        except OSError:
            pass
        worst[0] = max(worst[0], time.perf_counter() - t)
        time.sleep(0.5)


def bench_memory(workdir: Path, sessions: int, rounds: int, settle: float, against: Path | None) -> dict:
    import threading

    fake = FakeGeminiProcess(workdir)
    workspace = workdir / "m-ws"
    workspace.mkdir(exist_ok=True)
    trees = {"this": None} if against is None else {"against": against, "this": None}
    daemons: dict[str, Daemon] = {}
    rows: dict[str, dict] = {}
    try:
        for name, tree in trees.items():
            env = None if tree is None else {"PYTHONPATH": f"{tree}{os.pathsep}{tree / 'plugins'}"}
            daemons[name] = Daemon(workdir, f"m-{name}", fake.url, str(workdir / f"m-{name}-state"), env_extra=env)

        async def warm(url: str) -> None:
            async with open_client(ClientSettings(endpoint=Endpoint(server=url),
                                                  tools=ToolSettings(workspace=workspace))) as client:
                await client.run_turn("warm up")

        for name, daemon in daemons.items():
            trio.run(warm, daemon.url)
        time.sleep(2)
        for name, daemon in daemons.items():
            rows[name] = {"idle_mb": daemon.rss_mb(), "rounds": []}
        fake.forget_requests()
        for r in range(rounds):
            order = list(daemons.items())
            if r % 2:
                order.reverse()
            for name, daemon in order:
                peak: dict[str, float] = {}
                t0 = time.perf_counter()
                ok = trio.run(_burst, daemon.url, workspace, sessions,
                              lambda d=daemon: peak.setdefault("mb", d.rss_mb()))
                burst_s = time.perf_counter() - t0
                fake.forget_requests()
                worst = [0.0]
                poller = threading.Thread(target=_health_poller,
                                          args=(daemon.health_url, time.monotonic() + settle, worst))
                poller.start()
                poller.join()
                after = daemon.rss_mb()
                rows[name]["rounds"].append({"connected_mb": peak.get("mb", float("nan")), "after_mb": after,
                                             "turns_ok": ok, "burst_s": burst_s,
                                             "health_worst_ms": worst[0] * 1e3})
        for name, daemon in daemons.items():
            text = daemon.log_path.read_text(errors="replace")
            rows[name]["give_backs"] = [line.split(": ", 1)[-1] for line in text.splitlines()
                                        if "gave memory back" in line]
    finally:
        for daemon in daemons.values():
            daemon.close()
        fake.close()
    for row in rows.values():
        row["after_over_idle"] = statistics.median(x["after_mb"] for x in row["rounds"]) / row["idle_mb"]
        row["connected_over_idle"] = statistics.median(x["connected_mb"] for x in row["rounds"]) / row["idle_mb"]
    return {"sessions": sessions, "rounds": rounds, "settle_s": settle, "trees": rows,
            "against": str(against) if against else None, "pass": rows["this"]["after_over_idle"] <= 1.10}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default="a,R,c,w,r")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--sessions", type=int, default=1000, help="(m): clients in the burst (default 1,000)")
    parser.add_argument("--settle", type=float, default=45.0,
                        help="(m): seconds after the burst before memory is read again (default 45)")
    parser.add_argument("--against", type=Path, help="(m): another checkout to measure side by side")
    args = parser.parse_args()
    only = set(args.only.split(","))
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-sessions-") as tmp:
        workdir = Path(tmp)
        if "w" in only:
            results["w"] = bench_writer(workdir, 20_000 if args.quick else 200_000)
        if "r" in only:
            results["r"] = bench_resume(workdir, 10_000, 3 if args.quick else 7)
        if "R" in only:
            results["R"] = bench_resume_wire(workdir, 10_000, 3 if args.quick else 5)
        if "c" in only:
            results["c"] = bench_cut(workdir, 3 if args.quick else 7)
        if "m" in only:
            results["m"] = bench_memory(workdir, args.sessions, 1 if args.quick else 2, args.settle, args.against)
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
    if "m" in results:
        m = results["m"]
        for name, row in m["trees"].items():
            label = "this tree" if name == "this" else str(m["against"])
            rounds = ", ".join(f"{x['connected_mb']:.0f}->{x['after_mb']:.0f}" for x in row["rounds"])
            figure = (f"idle {row['idle_mb']:.0f} MB, {m['sessions']:,} connected->after: {rounds} MB; "
                      f"after/idle {row['after_over_idle']:.2f}x")
            result = ("PASS" if m["pass"] else "FAIL") if name == "this" else ""
            print(f"{'(m)':3} {label[:45]:45} {figure} {result}")
            worst = max(x["health_worst_ms"] for x in row["rounds"])
            print(f"{'':3} {'':45} longest /health answer while settling: {worst:.0f} ms")
            for line in row["give_backs"]:
                print(f"{'':3} {'':45} {line}")
    if "R" in results:
        r = results["R"]
        figure = (f"live {r['live_first_ms']:.1f} ms, restarted {r['restarted_first_ms']:.1f} ms "
                  f"(all: {r['live_all_ms']:.0f}/{r['restarted_all_ms']:.0f} ms)")
        print(f"{'(R)':3} {GOALS['R']:45} {figure:45} {'PASS' if r['pass'] else 'FAIL'}")
    if "c" in results:
        c = results["c"]
        figure = f"median {c['median_ms']:.0f} ms, max {c['max_ms']:.0f} ms ({c['runs']} cuts)"
        print(f"{'(c)':3} {GOALS['c']:45} {figure:45} {'PASS' if c['pass'] else 'FAIL'}")
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
