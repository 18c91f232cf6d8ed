"""Chaos soak (issue 44.1): replicas behind nginx on one Redis, while the
parts fail.

Three ``serve`` replicas (``scripted:`` model: no HTTP, the answers stream
over a few hundred ms) share sessions through one ``redis-server``
(append-only, ``appendfsync everysec`` as docs/deployment.md runs it),
behind nginx running deploy/nginx.conf. ``--sessions`` clients each open a
session through nginx and prompt turn after turn; each prompt is read to
its end (``finished`` or a visible ``error``), the client reconnecting and
resuming (``last_seq``) when its connection drops; some prompts also have a
watcher attached (an observer) that follows the same stream. Meanwhile, at
random every few seconds, one failure: a replica is killed (SIGKILL) and
restarted, Redis is restarted (its AOF brings the data back), every
replica's Redis connection is cut (``CLIENT KILL TYPE normal``), or nginx is
reloaded (SIGHUP).

Checked and reported, each failure listed:
  * every prompt answered exactly once (one ``finished``) or ended visibly
    (an ``error`` such as ``interrupted``) — never silently lost, never twice;
  * each client's and watcher's stream gap-free and duplicate-free by seq
    within one connection, and seqs never going back across a resume;
  * no session "running" at the end (a fresh attach reports no active
    request once the soak has settled);
  * each replica's RSS bounded (its peak below ``--rss-limit-mb``);
  * each approved call applied at most once, no denied or unasked one.
Figures: counts; p50/p99 time to first delta during failures (within
``RECOVERY_WINDOW`` s of one) and outside; recovery time after each failure
(until a prompt sent after it gets its first delta). Written
to ``--out`` (default bench/results/soak-TIMESTAMP.{md,json,png}).

Server-side tools with approvals: the replicas run ``--server-tools``
(with ``--auth-config``: no server-side tools without tokens), and about
one model turn in five is a shell call appending a marker unique to that
replica's start and turn (``echo r1.0.17 >> applied.log``) in the session's
own workspace. The client driving the prompt approves it (one in ten it
denies), and answers the same call the same way whenever it is asked again
(a replay, a hand-over). At the end every workspace's ``applied.log`` is
read: each marker at most once (an approval applied at most once), none
denied, none never approved.

    python bench/soak.py [--minutes 10] [--sessions 200] [--seed N] [--out PATH]

Loopback only; bounded in time; stops by itself. Needs redis-server and nginx.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import trio  # noqa: E402

from bench.replicas import clean_env  # noqa: E402
from gemini_split.testing import nginx as ngx  # noqa: E402
from gemini_split.testing import redis_server as rs  # noqa: E402

REPLICAS = 3
DELTAS = 20
#: A time to first delta within this many seconds after a failure counts as "during" it.
RECOVERY_WINDOW = 10.0
#: serve's default (10 s): shorter leases expire under this machine's load
#: (renewals every ttl/3 starved of CPU) and turn into takeovers.
LEASE_TTL = "10s"
#: Seconds the clients, then the final check, may take after the end.
SETTLE = 60.0
FAILURES = ("kill_replica", "restart_redis", "cut_redis", "reload_nginx")
#: One model turn in this many is a server-side shell call needing approval.
CALL_EVERY = 5
#: Of the calls asked about, the share the client denies.
DENY_SHARE = 0.1
#: The clients' token (the auth config the replicas read).
TOKEN = "soak-token-not-a-secret"


# --- the cluster ------------------------------------------------------------------------------

class Replica:
    def __init__(self, workdir: Path, index: int, turns: int, redis_url: str):
        self.workdir, self.index, self.turns, self.redis_url = workdir, index, turns, redis_url
        self.port = rs.free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.rss_peak_kb = 0
        self.starts = 0

    @property
    def log_path(self) -> Path:
        return self.workdir / f"replica{self.index}.log"

    def start(self) -> None:
        log = open(self.log_path, "a")
        log.write(f"--- start {self.starts} at {time.time():.3f}\n")
        log.flush()
        mark = self.log_path.stat().st_size
        script = self.workdir / f"script-r{self.index}.json"
        script.write_text(json.dumps(_script(f"r{self.index}.{self.starts}", self.turns)))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gemini_split", "serve", "--listen", f"127.0.0.1:{self.port}",
             "-m", f"scripted:{script}", "--max-connections-per-user", "0", "--store", self.redis_url,
             "--lease-ttl", LEASE_TTL, "--auth-config", str(self.workdir / "auth.json"),
             "--server-tools", "--workspace-root", str(self.workdir / "workspaces")],
            cwd=self.workdir, env=clean_env(GEMINI_API_KEY="unused"), stdin=subprocess.DEVNULL,
            stdout=log, stderr=log)
        log.close()
        self.starts += 1
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(self.log_path.read_text()[-2000:])
            with open(self.log_path) as f:
                f.seek(mark)
                if "serving on" in f.read():
                    return
            time.sleep(0.05)
        raise RuntimeError(f"replica{self.index} did not start")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()

    def sample_rss(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    self.rss_peak_kb = max(self.rss_peak_kb, int(line.split()[1]))
        except OSError:
            pass


def _script(marker: str, turns: int) -> list[dict[str, Any]]:
    """A replica's model turns (each start its own: ``marker`` names the
    replica and its start): answers streamed in ``DELTAS`` chunks, and every
    ``CALL_EVERY``-th turn a shell call appending ``marker.TURN`` to the
    session's ``applied.log`` — unique in the whole soak, so a line seen
    twice is one call applied twice."""
    text = "".join(f"word{i} " for i in range(DELTAS * 3))
    answer = {"text": text, "chunks": DELTAS, "chunk_delay": 0.01}
    return [{"function_calls": [{"name": "run_shell_command",
                                 "args": {"command": f"echo {marker}.{k} >> applied.log"}}]}
            if k % CALL_EVERY == CALL_EVERY - 1 else answer for k in range(turns)]


class Cluster:
    def __init__(self, workdir: Path, turns: int):
        self.workdir = workdir
        (workdir / "auth.json").write_text(json.dumps({"tokens": {TOKEN: {"userId": "soak", "permissions": ["chat"]}}}))
        (workdir / "workspaces").mkdir(mode=0o700)
        self.redis = rs.RedisServer(workdir / "redis", fsync="everysec")
        self.redis.start()
        # Every replica has its own script: enough turns for the prompts it may run.
        self.replicas = [Replica(workdir, i, turns, self.redis.url) for i in range(REPLICAS)]
        for r in self.replicas:
            r.start()
        self.nginx = ngx.Nginx(workdir / "nginx", [r.port for r in self.replicas])
        self.nginx.start()

    def close(self) -> None:
        for r in self.replicas:
            r.stop()
        self.nginx.stop()
        self.redis.stop()

    # The failures: each blocks (a thread), returns a description.
    def kill_replica(self, rng: random.Random) -> str:
        r = rng.choice(self.replicas)
        r.kill()
        time.sleep(rng.uniform(0.5, 2.0))
        r.start()
        return f"replica{r.index} SIGKILL + restart"

    def restart_redis(self, rng: random.Random) -> str:
        self.redis.stop()  # SIGKILL: only the AOF (fsync everysec) survives
        time.sleep(rng.uniform(0.2, 1.0))
        self.redis.start(timeout=60)  # its append-only file grows with the soak: loading it takes a while
        return "redis-server SIGKILL + restart (AOF)"

    def cut_redis(self, rng: random.Random) -> str:
        reply = _redis_command(self.redis.port, "CLIENT", "KILL", "TYPE", "normal")
        return f"replicas' Redis connections cut ({reply.strip()})"

    def reload_nginx(self, rng: random.Random) -> str:
        assert self.nginx.process is not None
        self.nginx.process.send_signal(signal.SIGHUP)
        return "nginx reload (SIGHUP)"


def _redis_command(port: int, *args: str) -> str:
    import socket
    payload = f"*{len(args)}\r\n".encode() + b"".join(f"${len(a)}\r\n{a}\r\n".encode() for a in args)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(payload)
        return s.recv(4096).decode(errors="replace")


# --- the clients ------------------------------------------------------------------------------

@dataclass
class Prompt:
    session: int
    request_id: str
    sent: float  # time.monotonic()
    ttfd: float | None = None
    finished: int = 0
    errors: list[str] = field(default_factory=list)
    resumes: int = 0
    started: bool = False  # an event of this request was seen
    resent: int = 0
    gave_up: bool = False  # no end after 6 resumes of 20 s silence each
    early: list[dict] = field(default_factory=list)  # its events read while deciding to resend
    sid: str = ""

    @property
    def outcome(self) -> str:
        if self.gave_up and not self.finished:
            return "lost (no end after 6 resumes)"
        if self.finished == 1 and not self.errors:
            return "answered"
        if self.finished == 0 and self.errors:
            return "ended visibly"
        if self.finished > 1:
            return "answered twice"
        if self.finished == 0:
            return "lost" if self.started else "lost before it started"
        return "answered and errored"


@dataclass
class Soak:
    address: str
    end: float
    rng: random.Random
    prompts: list[Prompt] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    sessions: dict[int, tuple[str, str]] = field(default_factory=dict)
    watchers: int = 0
    connects: int = 0
    #: Server-side calls asked about: call id → the verdict sent (the same
    #: one every time it is asked), and its marker → that verdict.
    verdicts: dict[str, str] = field(default_factory=dict)
    markers: dict[str, str] = field(default_factory=dict)
    #: Ids of the decisions sent, and the refusals they got back by code
    #: (``already_decided`` for a question asked again once decided).
    decision_ids: set[str] = field(default_factory=set)
    refusals: dict[str, int] = field(default_factory=dict)


class Dropped(Exception):
    pass


async def _connect(address: str, hello: Any) -> tuple[Any, dict]:
    from gemini_split.protocol import encode
    from gemini_split.stamping import stamp
    from gemini_split.transport import ConnectOptions, open_connection

    with trio.fail_after(30):
        stream = await open_connection(address, ConnectOptions(token=TOKEN))
        try:
            await stream.send(encode(stamp(hello)))
            first = json.loads(await stream.receive())
        except BaseException:
            await stream.aclose()
            raise
    return stream, first


async def _receive(stream: Any, timeout: float) -> dict:
    try:
        with trio.fail_after(timeout):
            return json.loads(await stream.receive())
    except trio.TooSlowError:
        raise
    except Exception as exc:  # closed, reset, bad frame: the connection dropped
        raise Dropped(repr(exc)) from exc


class SeqCheck:
    """One reader's seqs: strictly increasing within a connection and never
    going back across resumes (a resume asks for what follows last_seq)."""

    def __init__(self, soak: Soak, who: str):
        self.soak, self.who, self.last = soak, who, 0

    def see(self, event: dict) -> None:
        seq = event.get("seq")
        if seq is None:
            return
        if seq <= self.last:
            self.soak.problems.append(f"{self.who}: seq {seq} after {self.last} (duplicate or out of order)")
        elif seq != self.last + 1 and self.last:
            self.soak.problems.append(f"{self.who}: gap, seq {seq} after {self.last}")
        self.last = max(self.last, seq)


#: What a driving client says it can do: answer server-side approvals.
DRIVER = ("tool_approvals",)


async def client(soak: Soak, n: int) -> None:
    """Session ``n``: prompts turn after turn until the soak ends."""
    from gemini_split.protocol import GenerateContentRequest, Hello, encode
    from gemini_split.stamping import stamp

    check = SeqCheck(soak, f"session {n}")
    stream, connected = await _open(soak, Hello(client="soak", token=TOKEN, tools="server", capabilities=DRIVER))
    sid, token = connected["session_id"], connected["resume_token"]
    check.who = f"session {n} ({sid})"
    soak.sessions[n] = (sid, token)
    try:
        while time.monotonic() < soak.end:
            request = stamp(GenerateContentRequest(prompt=f"prompt of session {n}"))
            prompt = Prompt(n, request.id, time.monotonic(), sid=sid)
            soak.prompts.append(prompt)
            watcher = None
            try:
                await stream.send(encode(request))
            except Exception:
                pass  # read_answer's resume finds out whether it got there
            async with trio.open_nursery() as nursery:
                if soak.rng.random() < 0.3:
                    soak.watchers += 1
                    watcher = nursery.start_soon(watch, soak, n, sid, token, request.id, check.last)
                stream = await read_answer(soak, stream, check, prompt, sid, token, request)
            await trio.sleep(soak.rng.uniform(0.05, 0.5))
            if soak.rng.random() < 0.1:  # disconnect at random, come back later
                await stream.aclose()
                await trio.sleep(soak.rng.uniform(0.1, 1.0))
                stream = await _resume(soak, sid, token, check.last)
    finally:
        await stream.aclose()


async def _open(soak: Soak, hello: Any) -> tuple[Any, dict]:
    """Connect until a ``connected`` comes back (a replica down, Redis away:
    try again)."""
    delay = 0.1
    while True:
        soak.connects += 1
        try:
            stream, first = await _connect(soak.address, hello)
        except (OSError, trio.TooSlowError, Exception):
            first = None
            stream = None
        if first is not None and first.get("type") == "connected":
            return stream, first
        if stream is not None:
            await stream.aclose()
        if time.monotonic() > soak.end + 120:
            raise RuntimeError(f"could not connect: {first}")
        await trio.sleep(delay)
        delay = min(delay * 2, 2.0)


async def _resume(soak: Soak, sid: str, token: str, last_seq: int, **extra: Any) -> Any:
    return (await _resume_connected(soak, sid, token, last_seq, **extra))[0]


async def _resume_connected(soak: Soak, sid: str, token: str, last_seq: int, **extra: Any) -> tuple[Any, dict]:
    from gemini_split.protocol import Hello
    if extra.get("role") != "observer":
        extra["capabilities"] = DRIVER
    return await _open(soak, Hello(client="soak", token=TOKEN, session_id=sid, resume_token=token,
                                   last_seq=last_seq, **extra))


async def _decide(soak: Soak, stream: Any, question: dict) -> None:
    """Answer a server-side call's question: approve (deny one in ten),
    the same verdict each time the same call is asked."""
    from gemini_split.protocol import ToolDecision, encode
    from gemini_split.stamping import stamp

    call_id = question["call_id"]
    verdict = soak.verdicts.get(call_id)
    if verdict is None:
        verdict = soak.verdicts[call_id] = "deny" if soak.rng.random() < DENY_SHARE else "approve"
        marker = (question.get("parameters") or {}).get("command", "").split()[1:2]
        if marker:
            soak.markers[marker[0]] = verdict
    decision = stamp(ToolDecision(call_id=call_id, decision=verdict,
                                  parameters_hash=question.get("parameters_hash") if verdict == "approve" else None))
    soak.decision_ids.add(decision.id)
    try:
        await stream.send(encode(decision))
    except Exception:
        pass  # dropped: the question is asked again after the resume


async def _resend_unreceived(soak: Soak, stream: Any, check: SeqCheck, prompt: Prompt, request: Any) -> None:
    """As the real client does after a reconnect (client/reconnect.py): a
    prompt the server never got — not running there and absent from the
    replay — is sent again (same request id)."""
    from gemini_split.protocol import encode
    try:
        with trio.move_on_after(2):  # the replay of what followed last_seq
            while True:
                event = await _receive(stream, 5)
                check.see(event)
                prompt.early.append({**event, "_seen": True})
                if event.get("request_id") == prompt.request_id:
                    prompt.started = True
                    return
        prompt.resent += 1
        await stream.send(encode(request))
    except Exception:
        pass  # dropped again: the next receive fails and resumes


async def read_answer(soak: Soak, stream: Any, check: SeqCheck, prompt: Prompt, sid: str, token: str,
                      request: Any) -> Any:
    """Read until this prompt's ``finished`` or ``error``, resuming on a
    dropped connection; returns the stream in use."""
    quiet = 0.0
    while True:
        try:
            event = prompt.early.pop(0) if prompt.early else await _receive(stream, 20)
        except (Dropped, trio.TooSlowError):
            await stream.aclose()
            prompt.resumes += 1
            quiet += 1
            stream, connected = await _resume_connected(soak, sid, token, check.last)
            if not prompt.started and connected.get("active_request_id") != prompt.request_id:
                await _resend_unreceived(soak, stream, check, prompt, request)
            if quiet > 6:
                prompt.gave_up = True
                return stream
            continue
        if not event.get("_seen"):
            check.see(event)
        if event["type"] == "error" and event.get("in_reply_to") in soak.decision_ids:
            code = event.get("code", "?")
            soak.refusals[code] = soak.refusals.get(code, 0) + 1
            continue
        if event.get("request_id") != prompt.request_id:
            continue
        prompt.started = True
        if event["type"] == "tool_awaiting_approval":
            await _decide(soak, stream, event)
        elif event["type"] == "text_delta" and prompt.ttfd is None:
            prompt.ttfd = time.monotonic() - prompt.sent
        elif event["type"] == "finished":
            prompt.finished += 1
            return stream
        elif event["type"] == "error":
            prompt.errors.append(event.get("code", "?"))
            return stream


async def watch(soak: Soak, n: int, sid: str, token: str, request_id: str, from_seq: int) -> None:
    """An observer attached by id follows the prompt to its end, resuming
    on drops; its stream is checked like the driver's."""
    check = SeqCheck(soak, f"watcher of session {n} ({sid})")
    check.last = from_seq
    stream = await _resume(soak, sid, token, from_seq, role="observer", label="soak watcher")
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                event = await _receive(stream, 20)
            except (Dropped, trio.TooSlowError):
                await stream.aclose()
                stream = await _resume(soak, sid, token, check.last, role="observer", label="soak watcher")
                continue
            check.see(event)
            if event.get("request_id") == request_id and event["type"] in ("finished", "error"):
                return
        soak.problems.append(f"watcher of session {n}: no end of {request_id} in 120 s")
    finally:
        await stream.aclose()


async def final_check(soak: Soak) -> list[str]:
    """Once settled: no session still running (a fresh resume reports no
    active request)."""
    stuck: list[str] = []
    for n, (sid, token) in sorted(soak.sessions.items()):
        from gemini_split.protocol import Hello
        for _ in range(30):  # a request cut by a failure ends within the lease TTL + a check
            stream, connected = await _open(soak, Hello(client="soak", token=TOKEN, session_id=sid,
                                                        resume_token=token, role="observer", label="final check"))
            await stream.aclose()
            if not connected.get("active_request_id"):
                break
            await trio.sleep(1)
        else:
            stuck.append(f"session {n} ({sid}): still running {connected['active_request_id']}")
    return stuck


# --- the run ------------------------------------------------------------------------------------

async def chaos(cluster: Cluster, soak: Soak, interval: float, events: list[dict]) -> None:
    rng = soak.rng
    await trio.sleep(interval / 2)
    while time.monotonic() < soak.end - interval / 2:
        kind = rng.choice(FAILURES)
        start = time.monotonic()
        what = await trio.to_thread.run_sync(getattr(cluster, kind), rng)
        events.append({"kind": kind, "at": start, "done": time.monotonic(), "what": what})
        await trio.sleep(rng.uniform(interval * 0.5, interval * 1.5))


async def sample(cluster: Cluster, soak: Soak) -> None:
    while True:
        for r in cluster.replicas:
            r.sample_rss()
        await trio.sleep(1)


async def run(cluster: Cluster, sessions: int, seconds: float, interval: float, seed: int) -> dict[str, Any]:
    start = time.monotonic()
    soak = Soak(cluster.nginx.url, start + seconds, random.Random(seed))
    events: list[dict] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(sample, cluster, soak)
        nursery.start_soon(chaos, cluster, soak, interval, events)
        nursery.start_soon(progress, soak, start)
        with trio.move_on_after(seconds + SETTLE) as settle:
            async with trio.open_nursery() as clients:
                for n in range(sessions):
                    clients.start_soon(client, soak, n)
                    await trio.sleep(0.02)
        if settle.cancelled_caught:
            soak.problems.append(f"clients still waiting {SETTLE:g} s after the end (their prompts: lost)")
        stuck = ["the final check did not end in time"]
        with trio.move_on_after(SETTLE):
            stuck = await final_check(soak)
        nursery.cancel_scope.cancel()
    return analyse(soak, events, stuck, start, cluster)


async def progress(soak: Soak, start: float) -> None:
    while True:
        await trio.sleep(10)
        done = sum(1 for p in soak.prompts if p.finished or p.errors)
        print(f"  {time.monotonic() - start:5.0f} s: {len(soak.prompts)} prompts, {done} ended, "
              f"{len(soak.problems)} problems", file=sys.stderr, flush=True)


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))] * 1000


def analyse(soak: Soak, events: list[dict], stuck: list[str], start: float, cluster: Cluster) -> dict[str, Any]:
    outcomes: dict[str, int] = {}
    problems = list(soak.problems) + stuck
    for p in soak.prompts:
        outcomes[p.outcome] = outcomes.get(p.outcome, 0) + 1
        if p.outcome not in ("answered", "ended visibly"):
            problems.append(f"session {p.session} ({p.sid}) prompt {p.request_id} sent at "
                            f"t={p.sent - start:.1f} s: {p.outcome} "
                            f"(finished {p.finished}, errors {p.errors}, resumes {p.resumes})")

    def during(p: Prompt) -> bool:
        return any(e["at"] <= p.sent + (p.ttfd or 0) and p.sent <= e["done"] + RECOVERY_WINDOW for e in events)

    answered = [p for p in soak.prompts if p.ttfd is not None]
    in_failure = [p.ttfd for p in answered if during(p)]
    calm = [p.ttfd for p in answered if not during(p)]
    for e in events:
        later = [p for p in answered if p.sent >= e["at"]]
        first = min(later, key=lambda p: p.sent + p.ttfd, default=None)
        e["recovery_s"] = None if first is None else first.sent + first.ttfd - e["at"]
    errors: dict[str, int] = {}
    for p in soak.prompts:
        for code in p.errors:
            errors[code] = errors.get(code, 0) + 1
    rss = {f"replica{r.index}": round(r.rss_peak_kb / 1024, 1) for r in cluster.replicas}
    report = {
        "sessions": len(soak.sessions), "prompts": len(soak.prompts), "outcomes": outcomes, "errors": errors,
        "watchers": soak.watchers, "connects": soak.connects,
        "resumes": sum(p.resumes for p in soak.prompts), "resent": sum(p.resent for p in soak.prompts),
        "ttfd_ms": {"calm": {"n": len(calm), "p50": _pct(calm, 0.5), "p99": _pct(calm, 0.99)},
                    "during_failures": {"n": len(in_failure), "p50": _pct(in_failure, 0.5),
                                        "p99": _pct(in_failure, 0.99)}},
        "failures": [{"t": round(e["at"] - start, 2), "kind": e["kind"], "what": e["what"],
                      "recovery_s": None if e["recovery_s"] is None else round(e["recovery_s"], 3)}
                     for e in events],
        "rss_peak_mb": rss, "problems": problems,
        "series": [[round(p.sent - start, 3), round(p.ttfd * 1000, 2)] for p in answered],
        "decision_refusals": soak.refusals,
    }
    check_approvals(report, soak.markers, applied(cluster.workdir))
    return report


def applied(workdir: Path) -> dict[str, int]:
    """Every marker in the sessions' ``applied.log`` files, with how many
    times it was appended."""
    seen: dict[str, int] = {}
    for log in (workdir / "workspaces").glob("*/applied.log"):
        for line in log.read_text(errors="replace").split():
            seen[line] = seen.get(line, 0) + 1
    return seen


def check_approvals(report: dict[str, Any], soak_markers: dict[str, str], ran: dict[str, int]) -> None:
    """Each approved call applied at most once; no denied call, and no call
    nobody was asked about, applied."""
    problems = report["problems"]
    for marker, times in sorted(ran.items()):
        verdict = soak_markers.get(marker)
        if times > 1:
            problems.append(f"call {marker}: applied {times} times")
        if verdict is None:
            problems.append(f"call {marker}: applied, but nobody was asked")
        elif verdict == "deny":
            problems.append(f"call {marker}: applied, but it was denied")
    verdicts = list(soak_markers.values())
    report["approvals"] = {"asked": len(verdicts), "approved": verdicts.count("approve"),
                           "denied": verdicts.count("deny"), "applied": len(ran)}


def check_rss(report: dict[str, Any], limit_mb: float) -> None:
    for name, mb in report["rss_peak_mb"].items():
        if mb > limit_mb:
            report["problems"].append(f"{name}: peak RSS {mb} MB > {limit_mb} MB")


def write(report: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(report, indent=2))
    out.with_suffix(".md").write_text(markdown(report))
    plot(report, out.with_suffix(".png"))


def markdown(r: dict[str, Any]) -> str:
    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f}"
    t = r["ttfd_ms"]
    a = r["approvals"]
    lines = [f"# Chaos soak: {r['minutes']} min, {r['sessions']} sessions, {REPLICAS} replicas", "",
             f"Prompts: {r['prompts']} — " + ", ".join(f"{k}: {v}" for k, v in sorted(r["outcomes"].items())),
             f"Errors shown: {r['errors'] or 'none'}; watchers: {r['watchers']}; resumes: {r['resumes']}; "
             f"prompts resent after a reconnect: {r['resent']}; "
             f"connections: {r['connects']}",
             f"Server-side calls asked about: {a['asked']} — approved {a['approved']}, denied {a['denied']}, "
             f"applied {a['applied']} (each at most once); decisions refused: {r['decision_refusals'] or 'none'}",
             "",
             "| time to first delta | n | p50 ms | p99 ms |", "|---|---|---|---|",
             f"| outside failures | {t['calm']['n']} | {ms(t['calm']['p50'])} | {ms(t['calm']['p99'])} |",
             f"| during failures (+{RECOVERY_WINDOW:g} s) | {t['during_failures']['n']} | "
             f"{ms(t['during_failures']['p50'])} | {ms(t['during_failures']['p99'])} |", "",
             "| t (s) | failure | recovery (s) |", "|---|---|---|"]
    lines += [f"| {f['t']} | {f['what']} | {f['recovery_s']} |" for f in r["failures"]]
    lines += ["", f"Peak RSS (MB): {r['rss_peak_mb']}", "",
              f"## Invariants: {'all held' if not r['problems'] else str(len(r['problems'])) + ' broken'}"]
    lines += [f"- {p}" for p in r["problems"][:200]]
    return "\n".join(lines) + "\n"


def plot(r: dict[str, Any], path: Path) -> None:
    """Latency over time, failures marked (matplotlib: a bench extra)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11, 4.5))
    if r["series"]:
        xs, ys = zip(*r["series"])
        ax.scatter(xs, ys, s=4, alpha=0.5, label="time to first delta")
    colours = dict(zip(FAILURES, ("red", "purple", "orange", "green")))
    seen: set[str] = set()
    for f in r["failures"]:
        ax.axvline(f["t"], color=colours[f["kind"]], linestyle="--", linewidth=1,
                   label=None if f["kind"] in seen else f["kind"])
        seen.add(f["kind"])
    ax.set_yscale("log")
    ax.set_xlabel("seconds into the soak")
    ax.set_ylabel("time to first delta (ms)")
    ax.set_title(f"Chaos soak: {r['sessions']} sessions, {REPLICAS} replicas")
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def soak(minutes: float, sessions: int, seed: int, interval: float, rss_limit_mb: float,
         workdir: Path) -> dict[str, Any]:
    seconds = minutes * 60
    turns = int(sessions * (seconds / 2 + 10))  # more than a replica runs (then it would echo)
    cluster = Cluster(workdir, turns)
    try:
        report = trio.run(run, cluster, sessions, seconds, interval, seed)
    finally:
        cluster.close()
    report["minutes"] = minutes
    check_rss(report, rss_limit_mb)
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--interval", type=float, default=8.0, help="mean seconds between failures (8)")
    parser.add_argument("--rss-limit-mb", type=float, default=1024)
    parser.add_argument("--out", type=Path, default=None, help="report path without suffix")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    args = parser.parse_args()
    if not (rs.available() and ngx.available()):
        print("needs redis-server and nginx (apt-get install redis-server nginx-light)", file=sys.stderr)
        return 2
    out = args.out or ROOT / "bench" / "results" / time.strftime("soak-%Y%m%d-%H%M%S")
    workdir = Path(tempfile.mkdtemp(prefix="soak-"))
    report = soak(args.minutes, args.sessions, args.seed, args.interval, args.rss_limit_mb, workdir)
    report["seed"] = args.seed
    report["workdir"] = str(workdir) if args.keep else None
    write(report, out)
    print(out.with_suffix(".md").read_text())
    if not args.keep:
        import shutil
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if report["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
