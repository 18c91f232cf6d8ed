"""Benchmark: the ``gemini-split serve`` daemon, against a fast local model.

Three processes: a fake Gemini REST server (``gemini_split.testing.fake_gemini``,
real wire format, stdlib threads), the daemon (``python -m gemini_split serve
--listen 127.0.0.1:PORT``, no auth, on loopback) and this process, which runs
the clients: the real :class:`ProtocolClient` opened with ``open_client``, in
one Trio run.

  (a) time to first delta (TTFD) over WebSocket minus the same in embedded
      mode (``hold_embedded(ClientSettings(server=None), AgentService(...))``),
      median over many turns; the two modes alternate, a connection at a time;
  (b) deltas per second delivered to one client: one long answer of many
      small model chunks; protocol messages/s and model chunks/s (the server
      merges adjacent deltas while the client lags, so messages <= chunks);
  (c) N concurrent clients (``--clients``, default 100 then 1,000), each
      connected first (after one warm-up turn of another client: a running
      daemon has served requests before), then all running one streamed
      turn at once:
      completions, p50/p99 TTFD, the daemon's peak RSS (VmHWM), the CPU each
      process used (to see which one is the bottleneck); with fake-gemini,
      its floor too: the same N requests (the daemon's request body) sent
      straight to the fake at once from this process by a minimal raw
      HTTP client — what the fake and the machine allow before the daemon —
      and the same requests by the daemon's model layer (GeminiModel:
      google-genai's request over h11 on Trio) in this process, with its
      CPU per request — what the model side costs before sessions, store
      and WebSocket;
  (d) a one-shot thin client process ``python -m gemini_split --server ws://…
      -p …``: median wall time and peak RSS (wait4 rusage), and whether it
      imported google.genai (one extra run with ``-X importtime``).

Every figure names its model backend:

  fake-gemini  the daemon's real GeminiModel (google-genai's request over h11) talking
               to the fake Gemini process; turns have no delay;
  scripted     ``serve -m scripted:FILE.json`` (no HTTP, no google-genai):
               isolates the daemon + WebSocket + client from the model side.

    python bench/serve.py [--quick] [--clients 100,1000] [--backends fake-gemini,scripted]
                          [--only a,b,c,d] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import trio  # noqa: E402

from bench.procs import stop  # noqa: E402
from gemini_split.app import hold_embedded  # noqa: E402
from gemini_split.client.connect import ClientSettings, Endpoint, ToolSettings, open_client  # noqa: E402
from gemini_split.protocol import TextDelta  # noqa: E402

PY = sys.executable
API_KEY = "bench-key"
MODEL = "gemini-2.5-flash"
FAKE = "fake-gemini"
SCRIPTED = "scripted"
BACKEND_LABEL = {
    FAKE: "fake-gemini (HTTP, google-genai)",
    SCRIPTED: "scripted (no HTTP)",
    "raw": "fake-gemini, raw HTTP read",
    "model": "scripted model alone (no server)",
}
TARGETS = {
    "a": "WS TTFD - embedded TTFD <= 2 ms",
    "b": ">= 20k deltas/s to one client through google-genai, >= 40k with the scripted model",
    "c": "1,000 clients x 200 deltas all complete, p99 TTFD <= 1 s, RSS <= 600 MB",
    "d": "one-shot thin client <= 0.25 s and <= 45 MB, no google.genai",
}
#: The answer each turn of (a) streams: short, three chunks.
TTFD_TURN = {"text": "The answer is forty-two.", "chunks": 3}
#: The answer each client of (c) streams: 200 deltas of 8 characters (the
#: scripted model pauses between them, as a model read from the network does).
CONCURRENT_CHUNKS = 200
CONCURRENT_TEXT = "".join(f"word{i:03d} " for i in range(CONCURRENT_CHUNKS))
CONCURRENT_TURN = {"text": CONCURRENT_TEXT, "chunks": CONCURRENT_CHUNKS}
ONESHOT_TURN = {"text": "Hello from the fake model.", "chunks": 2}
#: ``--profile DIR``: every daemon is sampled with py-spy into DIR, and the
#: summaries (by daemon name) are reported at the end.
PROFILE_DIR: Path | None = None
PROFILES: dict[str, dict] = {}


# --- small utilities -----------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    """The q-th percentile (0..100), nearest-rank: p99 of 1,000 values is the
    990th smallest."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), -(-len(ordered) * q // 100)))
    return ordered[int(rank) - 1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_status_kb(pid: int, field_name: str) -> int | None:
    """A ``kB`` field of /proc/PID/status (VmHWM, VmRSS)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process so far (all its threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def self_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def die_with_parent() -> None:
    """preexec_fn: SIGTERM this child if the benchmark dies (no stray daemons)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_"))}
    env.update(extra)
    return env


def http_json(method: str, url: str, payload: Any = None, timeout: float = 30.0) -> Any:
    data = json.dumps(payload).encode() if payload is not None else None
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read() or b"null")


def raise_fd_limit(wanted: int) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


# --- the processes -------------------------------------------------------------


class FakeGeminiProcess:
    """``python -m gemini_split.testing.fake_gemini`` in its own process (so
    its threads do not share a GIL with the clients)."""

    def __init__(self, workdir: Path):
        self.log_path = workdir / "fake-gemini.log"
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [PY, "-m", "gemini_split.testing.fake_gemini", "--api-key", API_KEY],
            stdout=subprocess.PIPE, stderr=self._log, stdin=subprocess.DEVNULL,
            text=True, cwd=ROOT, env=clean_env(), preexec_fn=die_with_parent,
        )
        line = self.proc.stdout.readline().strip()
        if not line.startswith("http://"):
            self.close()
            raise SystemExit(f"the fake Gemini server did not start: {line!r}\n{self.log_path.read_text()}")
        self.url = line
        self.pid = self.proc.pid

    def add_turns(self, turns: list[dict]) -> None:
        # Big scripts go in slices: each POST is validated and deep-copied.
        for start in range(0, len(turns), 500):
            http_json("POST", f"{self.url}/_script", turns[start:start + 500])

    def remaining(self) -> int:
        return len(http_json("GET", f"{self.url}/_script"))

    def forget_requests(self) -> None:
        # It records every request (bodies included); keep its memory flat.
        http_json("DELETE", f"{self.url}/_requests")

    def close(self) -> None:
        stop(self.proc)
        self._log.close()


class Daemon:
    """``python -m gemini_split serve --listen 127.0.0.1:PORT`` (no auth)."""

    def __init__(self, workdir: Path, fake_url: str, backend: str, script: list[dict] | None = None,
                 name: str = "daemon"):
        self.backend = backend
        port = free_port()
        self.url = f"ws://127.0.0.1:{port}"
        # Its own session store, not the user's (~/.gemini/sessions): the
        # burst leaves a thousand sessions behind each run.
        cmd = [PY, "-m", "gemini_split", "serve", "--listen", f"127.0.0.1:{port}",
               "--state-dir", str(workdir / f"{name}-state")]
        if backend == SCRIPTED:
            script_path = workdir / f"{name}-script.json"
            script_path.write_text(json.dumps(script or []))
            cmd += ["-m", f"scripted:{script_path}"]
        self.log_path = workdir / f"{name}.log"
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT, cwd=workdir,
            env=clean_env(GEMINI_API_KEY=API_KEY, GOOGLE_GEMINI_BASE_URL=fake_url), preexec_fn=die_with_parent,
        )
        self.pid = self.proc.pid
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"the daemon exited ({self.proc.returncode}):\n{self.log_tail()}")
            try:
                health = http_json("GET", f"http://127.0.0.1:{port}/health", timeout=2)
                if health.get("status") == "ok":
                    break
            except (OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                self.close()
                raise SystemExit(f"the daemon did not answer /health within 30 s:\n{self.log_tail()}")
            time.sleep(0.05)
        self.start_rss_mb = (proc_status_kb(self.pid, "VmRSS") or 0) / 1024
        self.name = name
        self.sampler = None
        if PROFILE_DIR is not None:
            from bench import pyspy

            self.sampler = pyspy.Sampler(self.pid, PROFILE_DIR / f"{name}.pyspy.txt")

    def hwm_mb(self) -> float:
        return (proc_status_kb(self.pid, "VmHWM") or 0) / 1024

    def rss_mb(self) -> float:
        return (proc_status_kb(self.pid, "VmRSS") or 0) / 1024

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def problems(self) -> list[str]:
        """Warnings and tracebacks the daemon logged."""
        text = self.log_path.read_text(errors="replace")
        return [line for line in text.splitlines()
                if " WARNING " in line or " ERROR " in line or line.startswith("Traceback")]

    def close(self) -> None:
        if self.sampler is not None:
            from bench import pyspy

            complaint = self.sampler.stop()
            try:
                PROFILES[self.name] = pyspy.summarize(self.sampler.out)
            except OSError:
                PROFILES[self.name] = {"samples": 0, "self": [], "inclusive": [], "error": complaint}
            self.sampler = None
        stop(self.proc, 15)
        self._log.close()


# --- the clients -----------------------------------------------------------------


@dataclass
class Recorder:
    """Collects a client's text deltas for the turn in progress."""

    first: float | None = None
    last: float | None = None
    messages: int = 0
    chars: int = 0
    parts: list[str] = field(default_factory=list)
    #: Called at this turn's first delta.
    on_first: Any = None

    def reset(self) -> None:
        self.first = self.last = None
        self.messages = self.chars = 0
        self.parts = []

    async def on_event(self, event: Any) -> None:
        if isinstance(event, TextDelta):
            now = time.perf_counter()
            if self.first is None:
                self.first = now
                if self.on_first is not None:
                    self.on_first()
            self.last = now
            self.messages += 1
            self.chars += len(event.content)
            self.parts.append(event.content)

    @property
    def text(self) -> str:
        return "".join(self.parts)


def embedded_settings(workspace: Path, backend: str, fake_url: str,
                      script: list[dict] | None = None) -> tuple[ClientSettings, Any]:
    """Client settings for embedded mode and the service
    ``gemini_split.app.embedded_service`` builds, for a fake-gemini or
    scripted model. A fresh service per use; ``hold_embedded`` serves and
    closes it."""
    from gemini_split.server.config import ServerConfig
    from gemini_split.server.model.scripted import ScriptedModel
    from gemini_split.server.service import AgentService, create_model

    if backend == SCRIPTED:
        model = ScriptedModel(list(script or []))
        config = ServerConfig(model=MODEL)
    else:
        model = create_model(MODEL, api_key=API_KEY, base_url=fake_url)
        config = ServerConfig(model=MODEL)
    return ClientSettings(endpoint=Endpoint(server=None), tools=ToolSettings(workspace=workspace)), AgentService(model, config)


async def timed_turn(client: Any, rec: Recorder, prompt: str) -> tuple[float, float, Any]:
    """(send time, finish time, outcome) of one turn."""
    rec.reset()
    t0 = time.perf_counter()
    outcome = await client.run_turn(prompt)
    return t0, time.perf_counter(), outcome


def check_outcome(outcome: Any, what: str) -> None:
    if outcome.finished is None or outcome.finished.reason != "stop":
        error = outcome.error
        raise SystemExit(f"{what}: the turn failed: {error.code if error else '?'}: "
                         f"{error.message if error else outcome}")


# (a) ----------------------------------------------------------------------------

#: Measured turns per connection in (a). Kept small on purpose: every turn
#: lengthens the history the next model request carries, and google-genai's
#: conversion cost per request grows with it (~0.1 ms per history part).
TTFD_PER_CONNECTION = 5


def ttfd_rounds(turns: int, per_connection: int = TTFD_PER_CONNECTION) -> int:
    return max(1, -(-turns // per_connection))


def ttfd_model_turns(turns: int, per_connection: int = TTFD_PER_CONNECTION) -> int:
    """Model requests one mode of (a) makes (a warm-up turn per connection)."""
    return ttfd_rounds(turns, per_connection) * (per_connection + 1)


async def measure_ttfd(workspace: Path, daemon_url: str, backend: str, fake_url: str,
                       turns: int, per_connection: int) -> dict:
    """TTFD samples per mode. An embedded and a WebSocket connection are open
    side by side and take turns (the order flips every turn), so a burst of
    noise on this shared machine hits both modes alike; the first turn of
    each connection (cold HTTP pool, first request) is not counted. New
    connections every ``per_connection`` turns keep the history short."""
    samples: dict[str, list[float]] = {"embedded": [], "ws": []}
    paired: list[float] = []
    for _ in range(ttfd_rounds(turns, per_connection)):
        recs = {"embedded": Recorder(), "ws": Recorder()}
        embedded, service = embedded_settings(workspace, backend, fake_url, [TTFD_TURN] * (per_connection + 1))
        async with hold_embedded(embedded, service) as embedded, open_client(embedded, on_event=recs["embedded"].on_event) as emb_client, \
                open_client(ClientSettings(endpoint=Endpoint(server=daemon_url), tools=ToolSettings(workspace=workspace)),
                            on_event=recs["ws"].on_event) as ws_client:
            clients = {"embedded": emb_client, "ws": ws_client}
            for i in range(per_connection + 1):
                got = {}
                for mode in (("embedded", "ws") if i % 2 else ("ws", "embedded")):
                    rec = recs[mode]
                    t0, _, outcome = await timed_turn(clients[mode], rec, f"ping {i:04d}")
                    check_outcome(outcome, f"(a) {mode}")
                    if rec.first is None:
                        raise SystemExit(f"(a) {mode}: no text delta in the turn")
                    got[mode] = rec.first - t0
                if i:
                    for mode, value in got.items():
                        samples[mode].append(value)
                    paired.append(got["ws"] - got["embedded"])
    emb, ws = statistics.median(samples["embedded"]), statistics.median(samples["ws"])
    return {
        "test": "a", "backend": backend, "turns_per_mode": len(samples["ws"]),
        "embedded_ttfd_ms": emb * 1e3, "ws_ttfd_ms": ws * 1e3, "diff_ms": (ws - emb) * 1e3,
        "paired_diff_ms": statistics.median(paired) * 1e3,
        "embedded_p90_ms": pct(samples["embedded"], 90) * 1e3, "ws_p90_ms": pct(samples["ws"], 90) * 1e3,
    }


# (b) ----------------------------------------------------------------------------


async def measure_stream(workspace: Path, embedded: tuple[ClientSettings, Any | None], chunks: int, expected: str,
                         backend: str, mode: str) -> dict:
    rec = Recorder()
    async with hold_embedded(*embedded) as settings, open_client(settings, on_event=rec.on_event) as client:
        t0, t_end, outcome = await timed_turn(client, rec, "warm up")  # first request: cold pool
        check_outcome(outcome, f"(b) {mode} warm-up")
        t0, t_end, outcome = await timed_turn(client, rec, "stream a long answer")
        check_outcome(outcome, f"(b) {mode}")
        if rec.text != expected:
            raise SystemExit(f"(b) {mode}: the streamed text differs from the model's "
                             f"({len(rec.text)} vs {len(expected)} characters)")
        first, last, messages, chars = rec.first, rec.last, rec.messages, rec.chars
        # One short turn more: its request carries the long answer in the history.
        t_next, _, outcome = await timed_turn(client, rec, "and a short one")
        check_outcome(outcome, f"(b) {mode}, next turn")
        next_ttfd = rec.first - t_next
    window = max(last - first, 1e-9)
    return {
        "test": "b", "backend": backend, "mode": mode, "model_chunks": chunks,
        "messages": messages, "chars": chars,
        "ttfd_ms": (first - t0) * 1e3, "stream_s": window, "turn_s": t_end - t0,
        "chunks_per_s": chunks / window, "messages_per_s": messages / window,
        "chunks_per_s_turn": chunks / (t_end - t0), "mb_per_s": chars / window / 1e6,
        "next_turn_ttfd_ms": next_ttfd * 1e3,
    }


def daemon_stream(daemon: Daemon, workspace: Path, chunks: int, expected: str, backend: str) -> dict:
    """(b) over WebSocket, with the CPU the daemon spent per model chunk
    (three turns: warm-up, the long answer, a short one): a figure a busy
    machine disturbs far less than a rate."""
    before = cpu_seconds(daemon.pid)
    row = trio.run(measure_stream, workspace, (ClientSettings(endpoint=Endpoint(server=daemon.url), tools=ToolSettings(workspace=workspace)), None),
                   chunks, expected, backend, "ws")
    row["daemon_cpu_us_per_chunk"] = (cpu_seconds(daemon.pid) - before) / chunks * 1e6
    return row


async def scripted_model_alone(chunks: int) -> dict:
    """The scripted model's own ceiling in this run: the same long turn (one
    ``trio.sleep`` pause per chunk) streamed in-process with nothing reading
    it but a counter. The daemon cannot deliver chunks faster than this."""
    from gemini_split.server.model.base import ModelRequest, TextChunk
    from gemini_split.server.model.scripted import ScriptedModel

    text = "tok " * chunks
    model = ScriptedModel([{"text": text, "chunks": chunks, "chunk_delay": 1e-9}])
    request = ModelRequest(model=MODEL, contents=[{"role": "user", "parts": [{"text": "go"}]}], tools=[],
                           system_instruction=None)
    seen = 0
    t0 = time.perf_counter()
    async for chunk in model.stream(request):
        if isinstance(chunk, TextChunk):
            seen += 1
    elapsed = time.perf_counter() - t0
    return {"test": "b", "backend": "model", "mode": "in-process", "model_chunks": chunks, "messages": seen,
            "chars": len(text), "ttfd_ms": float("nan"), "stream_s": elapsed, "turn_s": elapsed,
            "chunks_per_s": chunks / elapsed, "messages_per_s": seen / elapsed,
            "chunks_per_s_turn": chunks / elapsed, "mb_per_s": len(text) / elapsed / 1e6,
            "next_turn_ttfd_ms": float("nan")}


def raw_fake_stream(fake: FakeGeminiProcess, chunks: int) -> dict:
    """The fake's own ceiling: read a ``chunks``-chunk SSE stream with no
    client library at all (http.client, count ``data:`` events)."""
    import http.client
    from urllib.parse import urlsplit

    text = "tok " * chunks
    fake.add_turns([{"text": text, "chunks": chunks}])
    where = urlsplit(fake.url)
    conn = http.client.HTTPConnection(where.hostname, where.port, timeout=60)
    body = json.dumps({"contents": [{"role": "user", "parts": [{"text": "go"}]}]})
    t0 = time.perf_counter()
    conn.request("POST", f"/v1beta/models/{MODEL}:streamGenerateContent?alt=sse", body=body,
                 headers={"x-goog-api-key": API_KEY, "Content-Type": "application/json"})
    response = conn.getresponse()
    # Read in big blocks and count event starts (a readline per line would
    # make this reader, not the fake, the ceiling). An event starts the
    # body or a line; the text ("tok ") has no "data: ".
    seen = 0
    carry = b"\n"
    while True:
        block = response.read(1 << 16)
        if not block:
            break
        seen += (carry + block).count(b"\ndata: ")
        carry = (carry + block)[-6:]  # shorter than the pattern: never counted twice
    elapsed = time.perf_counter() - t0
    conn.close()
    if seen != chunks:
        raise SystemExit(f"(b) raw read: {seen} chunks, expected {chunks}")
    return {"test": "b", "backend": "raw", "mode": "raw HTTP", "model_chunks": chunks, "messages": seen,
            "chars": len(text), "ttfd_ms": float("nan"), "stream_s": elapsed, "turn_s": elapsed,
            "chunks_per_s": chunks / elapsed, "messages_per_s": seen / elapsed,
            "chunks_per_s_turn": chunks / elapsed, "mb_per_s": len(text) / elapsed / 1e6,
            "next_turn_ttfd_ms": float("nan")}


# (c) ----------------------------------------------------------------------------


async def run_concurrent(workspace: Path, url: str, n: int, expected: str, *, connect_parallel: int,
                         timeout: float, at_peak: Any, hold: bool = True, at_go: Any = None,
                         at_all_first: Any = None) -> dict:
    """N clients connect (at most ``connect_parallel`` handshakes at a time),
    then all send one prompt at once; every connection stays open until all
    turns are over (so the daemon holds N live sessions at its peak).
    ``at_go()`` is called as the prompts go out, ``at_all_first()`` when
    the last client has its first delta."""
    connect_s: list[float] = []
    ttfd: list[float] = []
    turn_s: list[float] = []
    failures: dict[str, int] = {}
    complete = 0
    arrived = 0
    all_arrived = trio.Event()
    go = trio.Event()
    release = trio.Event()
    finished_count = 0
    all_finished = trio.Event()
    limiter = trio.CapacityLimiter(connect_parallel)
    firsts = 0

    def first_seen() -> None:
        nonlocal firsts
        if go.is_set():
            firsts += 1
            if firsts == n and at_all_first is not None:
                at_all_first()

    def fail(kind: str) -> None:
        failures[kind] = failures.get(kind, 0) + 1

    def mark_arrived() -> None:
        nonlocal arrived
        arrived += 1
        if arrived == n:
            all_arrived.set()

    def mark_finished() -> None:
        nonlocal finished_count
        finished_count += 1
        if finished_count == n:
            all_finished.set()

    async def one(i: int) -> None:
        nonlocal complete
        rec = Recorder(on_first=first_seen)
        settings = ClientSettings(endpoint=Endpoint(server=url), tools=ToolSettings(workspace=workspace))
        async with contextlib.AsyncExitStack() as stack:
            try:
                async with limiter:
                    t = time.perf_counter()
                    client = await stack.enter_async_context(open_client(settings, on_event=rec.on_event))
                    connect_s.append(time.perf_counter() - t)
            except Exception as exc:  # noqa: BLE001 - counted and reported
                fail(f"connect: {type(exc).__name__}: {str(exc)[:80]}")
                mark_arrived()
                mark_finished()
                return
            mark_arrived()
            await go.wait()
            try:
                t0, t_end, outcome = await timed_turn(client, rec, f"client {i} asks")
            except Exception as exc:  # noqa: BLE001
                fail(f"turn: {type(exc).__name__}: {str(exc)[:80]}")
                mark_finished()
                return
            if outcome.finished is not None and outcome.finished.reason == "stop" and rec.text == expected:
                complete += 1
                ttfd.append(rec.first - t0)
                turn_s.append(t_end - t0)
            elif outcome.error is not None:
                fail(f"turn error: {outcome.error.code}: {outcome.error.message[:80]}")
            else:
                fail("turn: wrong or missing text")
            mark_finished()
            if hold:
                await release.wait()

    phases = {"connect_all_s": float("nan"), "turns_all_s": float("nan")}
    t_start = time.perf_counter()
    with trio.move_on_after(timeout) as scope:
        async with trio.open_nursery() as nursery:
            for i in range(n):
                nursery.start_soon(one, i)
            await all_arrived.wait()
            phases["connect_all_s"] = time.perf_counter() - t_start
            go_time = time.perf_counter()
            if at_go is not None:
                at_go()
            go.set()
            await all_finished.wait()
            phases["turns_all_s"] = time.perf_counter() - go_time
            at_peak()  # every session is still open: read the daemon's memory now
            release.set()
    if scope.cancelled_caught:
        at_peak()
        fail(f"timeout after {timeout:g}s ({n - complete} not complete)")
    return {
        "clients": n, "complete": complete, "failures": failures,
        "connect_p50_ms": pct(connect_s, 50) * 1e3, "connect_p99_ms": pct(connect_s, 99) * 1e3,
        "ttfd_p50_ms": pct(ttfd, 50) * 1e3, "ttfd_p99_ms": pct(ttfd, 99) * 1e3,
        "ttfd_max_ms": (max(ttfd) if ttfd else float("nan")) * 1e3,
        "turn_p50_ms": pct(turn_s, 50) * 1e3, "turn_p99_ms": pct(turn_s, 99) * 1e3,
        **phases,
    }


async def warm_up(workspace: Path, url: str) -> None:
    rec = Recorder()
    async with open_client(ClientSettings(endpoint=Endpoint(server=url), tools=ToolSettings(workspace=workspace)), on_event=rec.on_event) as client:
        _, _, outcome = await timed_turn(client, rec, "warm up")
        check_outcome(outcome, "(c) warm-up turn")


def measure_concurrency(workdir: Path, workspace: Path, fake: FakeGeminiProcess, backend: str, n: int,
                        *, connect_parallel: int, timeout: float) -> dict:
    if backend == FAKE:
        left = fake.remaining()
        if left:
            print(f"  note: {left} turns were left in the fake's script", file=sys.stderr)
        fake.forget_requests()
        fake.add_turns([TTFD_TURN] + [CONCURRENT_TURN] * n)
        daemon = Daemon(workdir, fake.url, FAKE, name=f"daemon-c{n}-fake")
    else:
        daemon = Daemon(workdir, fake.url, SCRIPTED, [TTFD_TURN] + [{**CONCURRENT_TURN, "chunk_delay": 1e-9}] * n,
                        name=f"daemon-c{n}-scripted")
    try:
        # A running server is warm: one turn first (google-genai builds its
        # pydantic schemas on a process's first request, ~0.3 s of CPU that
        # every session of the burst would otherwise wait behind).
        trio.run(warm_up, workspace, daemon.url)
        # The warm-up's model request, as the daemon sent it: the floor
        # below sends the fake the same bytes.
        sample = http_json("GET", f"{fake.url}/_requests")[-1] if backend == FAKE else None
        idle_mb = daemon.rss_mb()
        cpu = {"daemon": cpu_seconds(daemon.pid), "fake": cpu_seconds(fake.pid), "bench": self_cpu_seconds()}
        at_peak: dict[str, float] = {}

        def take() -> None:
            at_peak["rss_mb"] = daemon.rss_mb()
            at_peak["hwm_mb"] = daemon.hwm_mb()

        # The daemon's CPU from the prompts going out to the last first
        # delta: what the burst's TTFD waits for, beside the floor's own.
        first_cpu: dict[str, float] = {}

        # The fake's and the bench's too: the three share the machine's
        # cores, so their sum over the cores bounds the burst's p99 below.
        def cpu_now() -> dict[str, float]:
            return {"daemon": cpu_seconds(daemon.pid), "fake": cpu_seconds(fake.pid), "bench": self_cpu_seconds()}

        def at_go() -> None:
            first_cpu.update({f"go_{k}": v for k, v in cpu_now().items()})

        def at_all_first() -> None:
            first_cpu.update({f"first_{k}": v for k, v in cpu_now().items()})

        t0 = time.perf_counter()
        result = trio.run(lambda: run_concurrent(workspace, daemon.url, n, CONCURRENT_TEXT,
                                                 connect_parallel=connect_parallel, timeout=timeout, at_peak=take,
                                                 at_go=at_go, at_all_first=at_all_first))
        wall = time.perf_counter() - t0
        used = {"daemon": cpu_seconds(daemon.pid) - cpu["daemon"], "fake": cpu_seconds(fake.pid) - cpu["fake"],
                "bench": self_cpu_seconds() - cpu["bench"]}
        hwm = daemon.hwm_mb()
        result.update(
            test="c", backend=backend, idle_rss_mb=idle_mb, rss_all_open_mb=at_peak.get("rss_mb", float("nan")),
            hwm_mb=hwm, wall_s=wall, cpu_s=used,
            cpu_pct={k: 100 * v / wall for k, v in used.items()},
            daemon_cpu_ms_per_client=1e3 * used["daemon"] / n,
            daemon_cpu_ms_to_first=(1e3 * (first_cpu["first_daemon"] - first_cpu["go_daemon"]) / n
                                    if "first_daemon" in first_cpu else float("nan")),
            cpu_ms_to_first={k: (1e3 * (first_cpu[f"first_{k}"] - first_cpu[f"go_{k}"]) / n
                                 if f"first_{k}" in first_cpu else float("nan"))
                             for k in ("daemon", "fake", "bench")},
            daemon_problems=daemon.problems()[:5],
        )
    finally:
        daemon.close()
    # The floors once the daemon is gone: what it does after the burst
    # (deferred writes, collections, memory given back) is not theirs.
    if sample is not None:
        fake.forget_requests()
        fake.add_turns([CONCURRENT_TURN] * n)
        result["floor"] = trio.run(raw_concurrent, fake, sample, n, timeout)
        fake.forget_requests()
        fake.add_turns([CONCURRENT_TURN] * (n + 1))
        result["model_floor"] = trio.run(model_concurrent, fake, sample, n, timeout)
        fake.forget_requests()
    return result


async def raw_concurrent(fake: FakeGeminiProcess, sample: dict, n: int, timeout: float) -> dict:
    """(c)'s floor: the same ``n`` model requests (the daemon's own request
    body, the prompt changed) sent straight to the fake at once from this
    process, by the least client there is — a TCP connection each, the
    request written by hand, the first ``data:`` event awaited — with no
    daemon, google-genai, httpx or WebSocket: what the fake and this
    machine give before the daemon adds anything."""
    from urllib.parse import urlsplit

    where = urlsplit(fake.url)
    body = dict(sample["body"])
    first: list[float] = []
    failures: dict[str, int] = {}
    go = trio.Event()

    async def one(i: int) -> None:
        contents = [*body["contents"][:-1], {"role": "user", "parts": [{"text": f"client {i} asks"}]}]
        payload = json.dumps({**body, "contents": contents}).encode()
        head = (f"POST {sample['path']}?alt=sse HTTP/1.1\r\nHost: {where.netloc}\r\n"
                f"x-goog-api-key: {API_KEY}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(payload)}\r\n\r\n").encode()
        await go.wait()
        t0 = time.perf_counter()
        try:
            stream = await trio.open_tcp_stream(where.hostname, where.port)
            async with stream:
                await stream.send_all(head + payload)
                got = b""
                while b"\ndata: " not in got:
                    block = await stream.receive_some(1 << 16)
                    if not block:
                        raise ConnectionError("closed before the first event")
                    got += block
                first.append(time.perf_counter() - t0)
                while not got.endswith(b"\r\n0\r\n\r\n"):
                    block = await stream.receive_some(1 << 16)
                    if not block:
                        break
                    got = got[-16:] + block
        except OSError as exc:
            failures[type(exc).__name__] = failures.get(type(exc).__name__, 0) + 1

    with trio.move_on_after(timeout):
        async with trio.open_nursery() as nursery:
            for i in range(n):
                nursery.start_soon(one, i)
            await trio.sleep(0.2)
            go.set()
    return {"complete": len(first), "failures": failures,
            "ttfd_p50_ms": pct(first, 50) * 1e3, "ttfd_p99_ms": pct(first, 99) * 1e3}


async def model_concurrent(fake: FakeGeminiProcess, sample: dict, n: int, timeout: float) -> dict:
    """(c)'s second floor: the same ``n`` model requests (the daemon's tools
    and system instruction, read back from its request) sent at once by the
    daemon's own model layer, :class:`GeminiModel` (google-genai's request,
    h11 on Trio), in this process, after one warm-up request: what the
    model side costs before the daemon's sessions, store and WebSocket.
    Reports its CPU per request up to the last first chunk too."""
    from gemini_split.protocol import ToolSpec
    from gemini_split.server.model.gemini import GeminiModel
    from gemini_split.server.model.base import ModelRequest, TextChunk

    body = sample["body"]
    tools = [ToolSpec(name=d["name"], description=d.get("description", ""),
                      parameters=d.get("parameters_json_schema") or d.get("parameters") or {})
             for t in body.get("tools", ()) for d in t.get("functionDeclarations", ())]
    instruction = "".join(p.get("text", "") for p in body.get("systemInstruction", {}).get("parts", ())) or None
    model = GeminiModel(API_KEY, base_url=fake.url)

    def request(prompt: str) -> ModelRequest:
        return ModelRequest(model=MODEL, contents=[{"role": "user", "parts": [{"text": prompt}]}],
                            tools=tools, system_instruction=instruction)

    async for _ in model.stream(request("warm up")):
        pass
    first: list[float] = []
    failures: dict[str, int] = {}
    go = trio.Event()
    all_first = trio.Event()  # every request has its first text (or failed)
    cpu: dict[str, float] = {}

    def settled() -> None:
        if len(first) + sum(failures.values()) == n:
            cpu["first"] = time.process_time() - cpu["start"]
            all_first.set()

    async def one(i: int) -> None:
        await go.wait()
        t0 = time.perf_counter()
        seen = False
        try:
            async for chunk in model.stream(request(f"client {i} asks")):
                if not seen and type(chunk) is TextChunk:
                    seen = True
                    first.append(time.perf_counter() - t0)
                    settled()
                    # The rest of the answer waits until every request has
                    # its first text, as the daemon's streams wait (server/
                    # priority.py): only the way to a first chunk is timed.
                    await all_first.wait()
        except Exception as exc:  # noqa: BLE001 - counted and reported
            failures[type(exc).__name__] = failures.get(type(exc).__name__, 0) + 1
            if not seen:
                settled()
            return
        if not seen:  # an answer without text: counted, so the others go on
            failures["no text"] = failures.get("no text", 0) + 1
            settled()

    with trio.move_on_after(timeout):
        async with trio.open_nursery() as nursery:
            for i in range(n):
                nursery.start_soon(one, i)
            await trio.sleep(0.2)
            cpu["start"] = time.process_time()
            go.set()
    return {"complete": len(first), "failures": failures,
            "ttfd_p50_ms": pct(first, 50) * 1e3, "ttfd_p99_ms": pct(first, 99) * 1e3,
            "cpu_ms_per_request": 1e3 * cpu.get("first", float("nan")) / max(n, 1)}


# (d) ----------------------------------------------------------------------------


#: Runs one command and prints its wall time and peak RSS. Peak RSS has to be
#: taken this way: Linux carries the RSS high-water mark of the memory image a
#: process had before exec() into ru_maxrss, so a child forked straight from
#: this (large) process would report at least this process's size. Forked
#: from this small launcher instead, it reports its own.
LAUNCHER = """
import os, sys, time
t = time.perf_counter()
pid = os.fork()
if pid == 0:
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    try:
        os.execv(sys.argv[1], sys.argv[1:])
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
print(time.perf_counter() - t, usage.ru_maxrss, os.waitstatus_to_exitcode(status))
"""


def run_process(cmd: list[str], env: dict[str, str], cwd: Path, *,
                stderr_to: Any = subprocess.DEVNULL) -> tuple[float, float, int]:
    """Wall seconds (fork to exit), peak RSS (MB) and exit status of one run."""
    out = subprocess.run([PY, "-S", "-c", LAUNCHER, *cmd], env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=stderr_to, text=True, check=True).stdout.split()
    return float(out[0]), int(out[1]) / 1024, int(out[2])


def measure_oneshot(workspace: Path, workdir: Path, fake: FakeGeminiProcess, daemon: Daemon, runs: int) -> list[dict]:
    # The thin client gets no API key: it must not need one.
    env = clean_env()
    cmd = [PY, "-m", "gemini_split", "--server", daemon.url, "-p", "Say hello"]
    rows = []

    def series(name: str, command: list[str], model_turns: bool) -> dict:
        walls, rss = [], []
        for i in range(runs + 1):  # the first run warms the OS caches; not counted
            if model_turns:
                fake.add_turns([ONESHOT_TURN])
            wall, mb, code = run_process(command, env, workspace)
            if code != 0:
                raise SystemExit(f"(d) {' '.join(command)} exited {code}")
            if i:
                walls.append(wall)
                rss.append(mb)
        return {"test": "d", "case": name, "runs": runs, "wall_s": statistics.median(walls),
                "wall_min_s": min(walls), "wall_max_s": max(walls), "rss_mb": statistics.median(rss)}

    rows.append(series("gemini-split --server ws://… -p", cmd, True))
    # Floors, for scale: the interpreter alone, and the interpreter + trio.
    rows.append(series("floor: python -c pass", [PY, "-c", "pass"], False))
    rows.append(series("floor: python -c 'import trio'", [PY, "-c", "import trio"], False))

    # One more run with -X importtime: what did the thin client import?
    fake.add_turns([ONESHOT_TURN])
    log_path = workdir / "oneshot-importtime.txt"
    with open(log_path, "w") as log:
        _, _, code = run_process([PY, "-X", "importtime", *cmd[1:]], env, workspace, stderr_to=log)
    imports = []
    for line in log_path.read_text().splitlines():
        if line.startswith("import time:") and "|" in line:
            parts = [p.strip() for p in line[len("import time:"):].split("|")]
            if parts[0].isdigit():
                imports.append((parts[2], int(parts[1])))
    names = [name.strip() for name, _ in imports]
    top = sorted(((name.strip(), us) for name, us in imports if not name.startswith(" ")),
                 key=lambda x: -x[1])[:8]
    rows[0].update(
        imported_google_genai=any(n == "google.genai" or n.startswith("google.genai.") for n in names),
        imported={pkg: any(n == pkg or n.startswith(pkg + ".") for n in names)
                  for pkg in ("httpx", "pydantic", "trio_websocket", "wsproto", "rich", "prompt_toolkit")},
        modules_imported=len(names), top_imports_ms=[(n, us / 1000) for n, us in top],
    )
    return rows


# --- orchestration and report -----------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="fewer turns, chunks and runs; --clients defaults to 100")
    parser.add_argument("--clients", help="comma-separated client counts for (c) (default 100,1000)")
    parser.add_argument("--backends", default=f"{FAKE},{SCRIPTED}",
                        help=f"model backends for (a)-(c): {FAKE}, {SCRIPTED} (default both)")
    parser.add_argument("--only", default="a,b,c,d", help="which tests to run (default a,b,c,d)")
    parser.add_argument("--turns", type=int, help="(a) measured turns per mode (default 300, quick 60)")
    parser.add_argument("--chunks", type=int, help="(b) model chunks in the long answer (default 20000, quick 5000)")
    parser.add_argument("--runs", type=int, help="(d) runs per command (default 7, quick 5)")
    parser.add_argument("--connect-parallel", type=int, default=100,
                        help="(c) handshakes in flight at once (default 100)")
    parser.add_argument("--timeout", type=float, default=90.0, help="(c) seconds allowed per run (default 90)")
    parser.add_argument("--fake-host", default="127.0.0.1", metavar="NAME",
                        help="the name the daemons and the floors reach the fake Gemini by: its address "
                             "(default 127.0.0.1), or a host name such as localhost, looked up as a real "
                             "deployment's endpoint is")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs) and print its path")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="sample every daemon with py-spy into DIR and print where its time went")
    args = parser.parse_args()
    if args.profile is not None:
        from bench import pyspy

        if not pyspy.available():
            parser.error("--profile needs py-spy on PATH (pip install py-spy)")
        global PROFILE_DIR
        args.profile.mkdir(parents=True, exist_ok=True)
        PROFILE_DIR = args.profile
    only = set(args.only.split(","))
    backends = [b for b in args.backends.split(",") if b]
    for b in backends:
        if b not in (FAKE, SCRIPTED):
            parser.error(f"--backends: unknown backend {b!r}")
    clients = [int(c) for c in (args.clients or ("100" if args.quick else "100,1000")).split(",")]
    turns = args.turns or (60 if args.quick else 300)
    chunks = args.chunks or (5000 if args.quick else 20000)
    runs = args.runs or (5 if args.quick else 7)
    raise_fd_limit(max(clients) * 2 + 256)
    # (c)'s clients all live in this process (each would have a process of
    # its own): with the collector's defaults its full passes over a
    # thousand clients' objects paused every client's clock (1.4 s per
    # 1,000-client run). The daemon does the same (gemini_split/collector.py).
    from gemini_split.collector import settle_for_serving

    settle_for_serving()

    workdir = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    workspace = workdir / "workspace"
    workspace.mkdir()
    results: dict[str, Any] = {"a": [], "b": [], "c": [], "d": [], "config": {
        "python": sys.version.split()[0], "cpus": os.cpu_count(), "clients": clients, "turns": turns,
        "chunks": chunks, "runs": runs, "backends": backends, "fake_host": args.fake_host}}
    started = time.perf_counter()
    fake = FakeGeminiProcess(workdir)
    fake.url = fake.url.replace("//127.0.0.1:", f"//{args.fake_host}:", 1)

    def progress(text: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f}s] {text}", file=sys.stderr, flush=True)

    try:
        long_text = "tok " * chunks
        long_turn = {"text": long_text, "chunks": chunks}
        for backend in backends:
            if not only & {"a", "b", "d"}:
                break
            if backend == FAKE:
                daemon = Daemon(workdir, fake.url, FAKE, name="daemon-fake")
            else:
                # (b) needs the long answer with a pause point per chunk (a
                # model that never awaits would hand the writer one merged
                # delta); the warm-up turn before it and all of (a) echo.
                script = [TTFD_TURN] * ttfd_model_turns(turns) if "a" in only else []
                if "b" in only:
                    script += [{"text": "warm", "chunks": 1}, {**long_turn, "chunk_delay": 1e-9}, TTFD_TURN]
                daemon = Daemon(workdir, fake.url, SCRIPTED, script, name="daemon-scripted")
            try:
                if "a" in only:
                    progress(f"(a) TTFD, {turns} turns per mode, {BACKEND_LABEL[backend]}")
                    if backend == FAKE:
                        fake.add_turns([TTFD_TURN] * 2 * ttfd_model_turns(turns))
                    results["a"].append(trio.run(measure_ttfd, workspace, daemon.url, backend, fake.url, turns,
                                                 TTFD_PER_CONNECTION))
                    if backend == FAKE:
                        fake.forget_requests()
                if "b" in only:
                    progress(f"(b) one client, {chunks}-chunk answer, {BACKEND_LABEL[backend]}")
                    if backend == FAKE:
                        fake.add_turns([{"text": "warm", "chunks": 1}, long_turn, TTFD_TURN])
                        results["b"].append(daemon_stream(daemon, workspace, chunks, long_text, backend))
                        fake.add_turns([{"text": "warm", "chunks": 1}, long_turn, TTFD_TURN])
                        results["b"].append(trio.run(
                            measure_stream, workspace, embedded_settings(workspace, FAKE, fake.url),
                            chunks, long_text, backend, "embedded"))
                        results["b"].append(raw_fake_stream(fake, chunks))
                    else:
                        results["b"].append(trio.run(scripted_model_alone, chunks))
                        results["b"].append(daemon_stream(daemon, workspace, chunks, long_text, backend))
                        results["b"].append(trio.run(scripted_model_alone, chunks))
                    fake.forget_requests()
                if "d" in only and backend == FAKE:
                    progress(f"(d) one-shot thin client, {runs} runs")
                    results["d"] = measure_oneshot(workspace, workdir, fake, daemon, runs)
                results.setdefault("daemon_problems", {})[backend] = daemon.problems()[:5]
            finally:
                daemon.close()
        if "c" in only:
            for n in clients:
                for backend in backends:
                    progress(f"(c) {n} concurrent clients, {BACKEND_LABEL[backend]}")
                    results["c"].append(measure_concurrency(
                        workdir, workspace, fake, backend, n,
                        connect_parallel=args.connect_parallel, timeout=args.timeout))
    finally:
        fake.close()
        results["total_s"] = time.perf_counter() - started
        if args.keep:
            print(f"logs kept in {workdir}", file=sys.stderr)
        else:
            import shutil

            shutil.rmtree(workdir, ignore_errors=True)
    results["profiles"] = PROFILES
    report(results, args.json)


#: (c)'s floors beside the daemon: result key, label, what the row measures.
FLOOR_ROWS = (
    ("floor", "the fake alone, raw HTTP",
     "the same requests straight from this process: no daemon, google-genai or WebSocket"),
    ("model_floor", "GeminiModel alone",
     "the same requests by the daemon's model layer in this process: no daemon or WebSocket"),
)


def verdicts(r: dict) -> list[tuple[str, str, str]]:
    """(goal, figure, MET / MISSED) per target and backend. (b) is judged on
    model chunks/s delivered: merging deltas for a lagging client is by
    design, so fewer, larger messages carrying every chunk still count."""
    out = []
    for row in r["a"]:
        out.append((f"(a) {row['backend']}: {TARGETS['a']}", f"{row['diff_ms']:+.2f} ms",
                    "MET" if row["diff_ms"] <= 2.0 else "MISSED"))
    raw = [row["chunks_per_s"] for row in r["b"] if row["backend"] == "raw"]
    model = [row["chunks_per_s"] for row in r["b"] if row["backend"] == "model"]
    for row in r["b"]:
        if row["mode"] != "ws":
            continue
        if row["backend"] == FAKE:
            ceiling = f", {row['chunks_per_s'] / max(raw):.0%} of the fake's own {max(raw):,.0f}/s" if raw else ""
            out.append((f"(b) {FAKE}: >= 20k deltas/s to one client through google-genai",
                        f"{row['chunks_per_s']:,.0f}/s{ceiling}; daemon {row['daemon_cpu_us_per_chunk']:.0f} µs CPU/chunk",
                        "MET" if row["chunks_per_s"] >= 20_000 else "MISSED"))
        else:
            ceiling = f", {row['chunks_per_s'] / max(model):.0%} of the model's own {max(model):,.0f}/s" if model else ""
            out.append((f"(b) {SCRIPTED}: >= 40k deltas/s to one client (issue 9)",
                        f"{row['chunks_per_s']:,.0f}/s{ceiling}",
                        "MET" if row["chunks_per_s"] >= 40_000 else "MISSED"))
    for row in r["c"]:
        if row["clients"] == 1000:
            ok = row["complete"] == 1000 and row["ttfd_p99_ms"] <= 1000 and row["hwm_mb"] <= 600
            floors = "; ".join(f"{label}: {row[key]['ttfd_p99_ms']:,.0f}" for key, label, _ in FLOOR_ROWS
                               if row.get(key))
            floor = f" ({floors})" if floors else ""
            out.append((f"(c) {row['backend']}: {TARGETS['c']}",
                        f"{row['complete']} done, p99 {row['ttfd_p99_ms']:,.0f} ms{floor}, {row['hwm_mb']:.0f} MB",
                        "MET" if ok else "MISSED"))
    for row in r["d"]:
        if row["case"].startswith("gemini-split"):
            ok = row["wall_s"] <= 0.25 and row["rss_mb"] <= 45 and not row["imported_google_genai"]
            out.append((f"(d) {TARGETS['d']}", f"{row['wall_s']:.3f} s, {row['rss_mb']:.0f} MB",
                        "MET" if ok else "MISSED"))
    return out


def report(r: dict, as_json: bool) -> None:
    r["verdicts"] = verdicts(r)
    if as_json:
        print(json.dumps(r, indent=2, default=str))
        return
    cfg = r["config"]
    print(f"bench/serve.py — Python {cfg['python']}, {cfg['cpus']} CPUs, total {r['total_s']:.0f} s")
    if r["a"]:
        print("\n(a) time to first delta: WebSocket daemon vs embedded (median; p90 in brackets)")
        print(f"  {'backend':34} {'turns':>6} {'embedded':>16} {'ws://':>16} {'ws - embedded':>14} "
              f"{'median of paired differences':>29}")
        for row in r["a"]:
            print(f"  {BACKEND_LABEL[row['backend']]:34} {row['turns_per_mode']:>6} "
                  f"{row['embedded_ttfd_ms']:>7.2f} ms ({row['embedded_p90_ms']:.2f}) "
                  f"{row['ws_ttfd_ms']:>7.2f} ms ({row['ws_p90_ms']:.2f}) {row['diff_ms']:>+10.2f} ms "
                  f"{row['paired_diff_ms']:>+26.2f} ms")
    if r["b"]:
        print("\n(b) one client, one long answer of small model chunks (rates over first→last delta)")
        print(f"  {'backend':34} {'mode':9} {'chunks':>7} {'messages':>8} {'chunks/s':>10} {'msgs/s':>10} "
              f"{'MB/s':>6} {'TTFD':>9} {'turn':>8} {'chunks/s, whole turn':>21} {'next turn TTFD':>15} "
              f"{'daemon CPU/chunk':>15}")
        for row in r["b"]:
            ttfd = "" if row["ttfd_ms"] != row["ttfd_ms"] else f"{row['ttfd_ms']:.1f} ms"
            nxt = "" if row["next_turn_ttfd_ms"] != row["next_turn_ttfd_ms"] else f"{row['next_turn_ttfd_ms']:.1f} ms"
            cpu = f"{row['daemon_cpu_us_per_chunk']:.0f} µs" if "daemon_cpu_us_per_chunk" in row else ""
            print(f"  {BACKEND_LABEL[row['backend']]:34} {row['mode']:9} {row['model_chunks']:>7} "
                  f"{row['messages']:>8} {row['chunks_per_s']:>10,.0f} {row['messages_per_s']:>10,.0f} "
                  f"{row['mb_per_s']:>6.2f} {ttfd:>9} {row['turn_s']:>6.2f} s "
                  f"{row['chunks_per_s_turn']:>21,.0f} {nxt:>15} {cpu:>15}")
        ceiling = [row["chunks_per_s"] for row in r["b"] if row["backend"] == "model"]
        for row in r["b"]:
            if row["backend"] == SCRIPTED and ceiling:
                print(f"  scripted ws delivered {row['chunks_per_s'] / max(ceiling):.0%} of the scripted model's own "
                      f"rate in this run (best of {len(ceiling)}: {max(ceiling):,.0f} chunks/s)")
    if r["c"]:
        print(f"\n(c) N clients connected, then one streamed turn each, all at once "
              f"({CONCURRENT_CHUNKS} deltas, {len(CONCURRENT_TEXT)} chars)")
        print(f"  {'backend':34} {'N':>5} {'done':>5} {'TTFD p50':>9} {'p99':>9} {'max':>9} "
              f"{'turn p99':>9} {'all turns':>9} {'connect all':>11} {'RSS idle':>9} {'peak':>8}  "
              f"CPU% daemon/fake/bench  daemon CPU/client")
        for row in r["c"]:
            cpu = row["cpu_pct"]
            print(f"  {BACKEND_LABEL[row['backend']]:34} {row['clients']:>5} {row['complete']:>5} "
                  f"{row['ttfd_p50_ms']:>6.0f} ms {row['ttfd_p99_ms']:>6.0f} ms {row['ttfd_max_ms']:>6.0f} ms "
                  f"{row['turn_p99_ms']:>6.0f} ms {row['turns_all_s']:>7.2f} s {row['connect_all_s']:>9.2f} s "
                  f"{row['idle_rss_mb']:>6.0f} MB {row['hwm_mb']:>5.0f} MB  "
                  f"{cpu['daemon']:>3.0f}/{cpu['fake']:.0f}/{cpu['bench']:.0f}{'':14}"
                  f"{row['daemon_cpu_ms_per_client']:.1f} ms "
                  f"({row.get('daemon_cpu_ms_to_first', float('nan')):.2f} ms to the last first delta)")
            to_first = row.get("cpu_ms_to_first")
            if to_first:
                # The three processes' CPU until the last first delta, spread
                # perfectly over every core: no p99 can come in under it.
                bound_ms = sum(to_first.values()) * row["clients"] / (os.cpu_count() or 1)
                print(f"      CPU per client to the last first delta: daemon {to_first['daemon']:.2f} ms, "
                      f"fake {to_first['fake']:.2f} ms, bench {to_first['bench']:.2f} ms; spread over "
                      f"{os.cpu_count()} cores at best, {bound_ms:,.0f} ms")
            if row["failures"]:
                print(f"      failures: {row['failures']}")
            for key, label, what in FLOOR_ROWS:
                floor = row.get(key)
                if not floor:
                    continue
                cpu_note = (f"; {floor['cpu_ms_per_request']:.2f} ms CPU per request to the last first chunk"
                            if "cpu_ms_per_request" in floor else "")
                print(f"  {'  floor: ' + label:34} {row['clients']:>5} {floor['complete']:>5} "
                      f"{floor['ttfd_p50_ms']:>6.0f} ms {floor['ttfd_p99_ms']:>6.0f} ms   ({what}{cpu_note})")
                if floor["failures"]:
                    print(f"      failures: {floor['failures']}")
            if row["daemon_problems"]:
                print(f"      daemon log: {row['daemon_problems']}")
    if r["d"]:
        print("\n(d) one-shot thin client process against the running daemon (backend fake-gemini)")
        print(f"  {'command':36} {'median wall':>12} {'(min–max)':>15} {'peak RSS':>9}")
        for row in r["d"]:
            print(f"  {row['case']:36} {row['wall_s']:>10.3f} s ({row['wall_min_s']:.3f}–{row['wall_max_s']:.3f}) "
                  f"{row['rss_mb']:>6.1f} MB")
        first = r["d"][0]
        print(f"  imported google.genai: {'YES' if first['imported_google_genai'] else 'no'}; "
              + ", ".join(f"{k}: {'yes' if v else 'no'}" for k, v in first["imported"].items())
              + f"; {first['modules_imported']} modules")
        print("  slowest top-level imports (cumulative): "
              + ", ".join(f"{n} {ms:.0f} ms" for n, ms in first["top_imports_ms"]))
    if r.get("profiles"):
        from bench import pyspy

        print("\ndaemon profiles (py-spy; share of samples):")
        for name, summary in r["profiles"].items():
            print(pyspy.format_summary(summary, name))
    problems = {k: v for k, v in r.get("daemon_problems", {}).items() if v}
    if problems:
        print(f"\ndaemon warnings: {problems}")
    print("\ntargets:")
    print(f"  {'goal':78} {'figure':66} verdict")
    for goal, figure, verdict in r["verdicts"]:
        print(f"  {goal:78} {figure:66} {verdict}")


if __name__ == "__main__":
    main()
