"""Benchmark: serve replicas sharing sessions through Redis (issue 20).

  (s) sessions: N sessions (default 1,000; at most --concurrency at a time),
      each a raw wire client that opens a session, sends one prompt and reads
      a streamed answer (20 deltas) to ``finished``. Two set-ups, same
      scripted model (``serve -m scripted:FILE``: no HTTP, so the store and
      the server are what is measured), same client:
        floor   one replica, SQLite store (the default), clients direct;
        redis   two replicas on one Redis, clients through nginx
                (deploy/nginx.conf, round robin).
      Figures: p50/p99 time from sending the prompt to the first delta, and
      events/s over the whole run. Goal: redis's events/s >= 0.5 x floor's
      and its p99 time-to-first-delta <= 3 x floor's + 20 ms (two replicas on
      the same two cores, plus a proxy hop, are not expected to be faster
      here; the point is that the shared store does not cost an order of
      magnitude).
  (l) latency added per event by Redis on loopback: one process appends
      events to a RedisStore (the replica's write path: batched Lua XADD)
      while a follower reads the stream with XREAD BLOCK (a relay's read
      path) in another process, as a relay on another replica does; time
      from append to receipt per event, 2,000 events 1 ms apart. Beside it:
      Redis alone (XADD and XREAD BLOCK written by hand on plain sockets),
      and both again with ``appendfsync always`` (the test fixture's: an
      fsync in every write; Redis's default and docs/deployment.md's is
      ``everysec``). Floor: the same pacing over a plain loopback TCP
      connection between two tasks (what waking a reader costs on this
      machine at this moment). Goal: the store adds < 1 ms at the median
      (p50 - floor p50) with everysec.

    python bench/replicas.py [--quick] [--only s,l] [--sessions N] [--concurrency C] [--json]

Needs redis-server and nginx (apt-get install redis-server nginx-light).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import trio  # noqa: E402

from bench.procs import stop  # noqa: E402
from gemini_split.testing import nginx as ngx  # noqa: E402
from gemini_split.testing import redis_server as rs  # noqa: E402

DELTAS = 20


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_"))}
    env.update(extra)
    return env


class Serve:
    def __init__(self, workdir: Path, name: str, script: Path, *store_args: str):
        self.port = rs.free_port()
        self.log = open(workdir / f"{name}.log", "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gemini_split", "serve", "--listen", f"127.0.0.1:{self.port}",
             "-m", f"scripted:{script}", "--max-connections-per-user", "0", *store_args],
            cwd=workdir, env=clean_env(GEMINI_API_KEY="unused"), stdin=subprocess.DEVNULL,
            stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError((workdir / f"{name}.log").read_text())
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"{name} did not start")

    def close(self) -> None:
        stop(self.proc, 15)
        self.log.close()


async def one_session(address: str, ttfd: list[float], counts: list[int]) -> None:
    from gemini_split.protocol import GenerateContentRequest, Hello, encode
    from gemini_split.stamping import stamp
    from gemini_split.transport import open_connection

    stream = await open_connection(address)
    async with stream:
        await stream.send(encode(stamp(Hello(client="bench"))))
        connected = json.loads(await stream.receive())
        assert connected["type"] == "connected", connected
        request = stamp(GenerateContentRequest(prompt="go"))
        sent = time.perf_counter()
        await stream.send(encode(request))
        first = None
        events = 0
        while True:
            event = json.loads(await stream.receive())
            events += 1
            if event["type"] == "text_delta" and first is None:
                first = time.perf_counter() - sent
            if event["type"] in ("finished", "error") and event.get("request_id") == request.id:
                assert event["type"] == "finished", event
                break
        ttfd.append(first if first is not None else float("nan"))
        counts.append(events)


async def run_sessions(address: str, sessions: int, concurrency: int) -> dict[str, float]:
    ttfd: list[float] = []
    counts: list[int] = []
    limiter = trio.CapacityLimiter(concurrency)

    async def guarded() -> None:
        async with limiter:
            await one_session(address, ttfd, counts)

    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(sessions):
            nursery.start_soon(guarded)
    wall = time.perf_counter() - start
    ttfd.sort()
    return {"sessions": len(ttfd), "p50_ttfd_ms": ttfd[len(ttfd) // 2] * 1000,
            "p99_ttfd_ms": ttfd[min(len(ttfd) - 1, int(len(ttfd) * 0.99))] * 1000,
            "events_per_s": sum(counts) / wall, "wall_s": wall}


def bench_sessions(workdir: Path, sessions: int, concurrency: int) -> dict[str, Any]:
    script = workdir / "script.json"
    text = "".join(f"word{i} " for i in range(DELTAS * 4))
    script.write_text(json.dumps([{"text": text, "chunks": DELTAS}] * (sessions + 10)))
    results: dict[str, Any] = {}
    floor = Serve(workdir, "floor", script, "--state-dir", str(workdir / "state"))
    try:
        results["floor"] = trio.run(run_sessions, f"ws://127.0.0.1:{floor.port}", sessions, concurrency)
    finally:
        floor.close()
    with rs.RedisServer(workdir / "redis") as redis:
        replicas = [Serve(workdir, f"replica{i}", script, "--store", redis.url) for i in range(2)]
        try:
            with ngx.Nginx(workdir / "nginx", [r.port for r in replicas]) as proxy:
                results["redis"] = trio.run(run_sessions, proxy.url, sessions, concurrency)
        finally:
            for r in replicas:
                r.close()
    f, r = results["floor"], results["redis"]
    results["events_ratio"] = r["events_per_s"] / f["events_per_s"]
    results["pass_events"] = results["events_ratio"] >= 0.5
    results["pass_ttfd"] = r["p99_ttfd_ms"] <= 3 * f["p99_ttfd_ms"] + 20
    return results


async def _latency(url: str, count: int) -> list[float]:
    """The relay's side: follow a session's stream (XREAD BLOCK) while
    another process — the runner's side — appends events to it through a
    RedisStore. Each event carries its send time (perf_counter is
    CLOCK_MONOTONIC: one clock for every process on the machine)."""
    from gemini_split.server.store import SessionRecord, hash_token
    from gemini_split.server.store.redis import RedisStore
    from gemini_split.server.replicas.replica import Replica

    reader = RedisStore(url)
    await reader.open()
    try:
        now = time.time()
        await reader.create(SessionRecord(id="s-bench", owner="b", token_hash=hash_token("t"), created=now,
                                          updated=now))
        writer = subprocess.Popen([sys.executable, __file__, "--latency-writer", url, str(count)])
        lat: list[float] = []
        try:
            async for batch in Replica(reader).follow("s-bench", 0):
                got = time.perf_counter()
                lat += [got - json.loads(text)["sent"] for text in batch]
                if len(lat) >= count:
                    break
        finally:
            await trio.to_thread.run_sync(writer.wait)
        return lat
    finally:
        await reader.aclose()


async def _latency_writer(url: str, count: int) -> None:
    """The runner's side of (l): append ``count`` events 1 ms apart."""
    from gemini_split.server.store import StoredEvent
    from gemini_split.server.store.redis import RedisStore

    writer = RedisStore(url)
    await writer.open()
    try:
        await trio.sleep(0.3)  # the follower is reading by now
        for seq in range(1, count + 1):
            text = json.dumps({"type": "text_delta", "seq": seq, "sent": time.perf_counter()})
            writer.append_events("s-bench", [StoredEvent(seq, "r", text)])
            await trio.sleep(0.001)
    finally:
        await writer.aclose()


async def _raw_resp(port: int, count: int) -> list[float]:
    """Redis alone: XADD on one plain socket, XREAD BLOCK on another (the
    RESP written by hand), same pacing — what Redis itself takes."""
    def command(*args: str) -> bytes:
        return f"*{len(args)}\r\n".encode() + b"".join(f"${len(a)}\r\n{a}\r\n".encode() for a in args)

    writer = await trio.open_tcp_stream("127.0.0.1", port)
    reader = await trio.open_tcp_stream("127.0.0.1", port)
    sent: list[float] = []
    lat: list[float] = []
    async with writer, reader, trio.open_nursery() as nursery:
        async def read() -> None:
            for seq in range(1, count + 1):
                await reader.send_all(command("XREAD", "BLOCK", "5000", "STREAMS", "raw", f"{seq - 1}-0"))
                reply = b""
                while not reply.endswith(b"\r\n") or reply.count(b"\r\n") < 11:
                    reply += await reader.receive_some(65536)
                lat.append(time.perf_counter() - sent[seq - 1])
            nursery.cancel_scope.cancel()

        nursery.start_soon(read)
        await trio.sleep(0.2)
        for seq in range(1, count + 1):
            sent.append(time.perf_counter())
            await writer.send_all(command("XADD", "raw", f"{seq}-0", "d", "x"))
            await writer.receive_some(65536)
            await trio.sleep(0.001)
        await trio.sleep_forever()
    return lat


async def _floor(count: int) -> list[float]:
    """The same pacing through a loopback TCP connection between two Trio
    tasks of this process: what waking a reader costs on this machine now,
    with no Redis in between."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    lat: list[float] = []
    sent: list[float] = []
    async with trio.open_nursery() as nursery:
        server_side: list[Any] = []
        ready = trio.Event()

        async def accept() -> None:
            server_side.append(await listeners[0].accept())
            ready.set()

        nursery.start_soon(accept)
        client = await trio.open_tcp_stream("127.0.0.1", port)
        await ready.wait()

        async def read() -> None:
            got = 0
            while got < count:
                data = await server_side[0].receive_some(65536)
                now = time.perf_counter()
                for _ in range(len(data)):
                    lat.append(now - sent[got])
                    got += 1
            nursery.cancel_scope.cancel()

        nursery.start_soon(read)
        for _ in range(count):
            sent.append(time.perf_counter())
            await client.send_all(b"x")
            await trio.sleep(0.001)
        await trio.sleep_forever()
    return lat


def _p(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))] * 1000


def bench_latency(workdir: Path, count: int) -> dict[str, Any]:
    out: dict[str, Any] = {"events": count}
    floor = trio.run(_floor, count)
    out["floor_p50_ms"] = _p(floor, 0.5)
    # appendfsync everysec is Redis's default and docs/deployment.md's;
    # always (the test fixture's) puts an fsync into every write.
    for fsync in ("everysec", "always"):
        with rs.RedisServer(workdir / f"redis-lat-{fsync}", fsync=fsync) as redis:
            raw = trio.run(_raw_resp, redis.port, count)
            lat = trio.run(_latency, redis.url, count)
        out[fsync] = {"raw_p50_ms": _p(raw, 0.5), "raw_p99_ms": _p(raw, 0.99),
                      "p50_ms": _p(lat, 0.5), "p99_ms": _p(lat, 0.99), "mean_ms": statistics.mean(lat) * 1000}
    out["added_p50_ms"] = out["everysec"]["p50_ms"] - out["floor_p50_ms"]
    out["pass"] = out["added_p50_ms"] < 1.0
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="200 sessions, 500 events")
    parser.add_argument("--only", default="s,l")
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--latency-writer", nargs=2, metavar=("URL", "COUNT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.latency_writer:
        trio.run(_latency_writer, args.latency_writer[0], int(args.latency_writer[1]))
        return 0
    if not (rs.available() and ngx.available()):
        print("needs redis-server and nginx (apt-get install redis-server nginx-light)", file=sys.stderr)
        return 2
    only = set(args.only.split(","))
    sessions = 200 if args.quick else args.sessions
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        if "l" in only:
            out["latency"] = bench_latency(workdir, 500 if args.quick else 2000)
        if "s" in only:
            out["sessions"] = bench_sessions(workdir, sessions, args.concurrency)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"{'measure':<58} {'goal':<26} {'figure':<28} result")
    if "latency" in out:
        lat = out["latency"]
        ev, al = lat["everysec"], lat["always"]
        print(f"{'(l) loopback TCP wake-up (floor), p50':<58} {'':<26} {lat['floor_p50_ms']:.3f} ms")
        print(f"{'(l) raw RESP XADD -> XREAD BLOCK, p50 (p99), everysec':<58} {'':<26} "
              f"{ev['raw_p50_ms']:.3f} ({ev['raw_p99_ms']:.1f}) ms")
        print(f"{'(l) runner append -> relay XREAD, p50 (p99), everysec':<58} {'added p50 < 1 ms':<26} "
              f"{ev['p50_ms']:.3f} ({ev['p99_ms']:.1f}) ms{'':<8} "
              f"{'pass' if lat['pass'] else 'FAIL'} (adds {lat['added_p50_ms']:.3f} ms)")
        print(f"{'(l) the same with appendfsync always: raw; store, p50':<58} {'(an fsync per write)':<26} "
              f"{al['raw_p50_ms']:.3f}; {al['p50_ms']:.3f} ms")
    if "sessions" in out:
        s = out["sessions"]
        f, r = s["floor"], s["redis"]
        print(f"{f'(s) {sessions} sessions: events/s, 2 replicas+Redis+nginx':<58} {'>= 0.5 x 1 replica+SQLite':<26} "
              f"{r['events_per_s']:.0f} vs {f['events_per_s']:.0f} ({s['events_ratio']:.2f}x){'':<3} "
              f"{'pass' if s['pass_events'] else 'FAIL'}")
        print(f"{'(s) p99 time to first delta (p50)':<58} {'<= 3 x floor + 20 ms':<26} "
              f"{r['p99_ttfd_ms']:.1f} ({r['p50_ttfd_ms']:.1f}) vs {f['p99_ttfd_ms']:.1f} "
              f"({f['p50_ttfd_ms']:.1f}) ms  {'pass' if s['pass_ttfd'] else 'FAIL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
