"""Benchmark: a Vertex AI turn against a Gemini-API turn, and token refreshes
against other sessions' streams.

  (a) CPU per model chunk in ``serve``: two ``gemini-split serve`` processes,
      one on an API key (the Gemini API), one on Vertex AI with a service
      account (real google-auth, token from a local fake token endpoint),
      both in front of the same kind of fake Gemini server (the Vertex one
      checks ``Authorization: Bearer``). Each round a one-shot client
      (``--server ws://… -p``) streams one long answer of ``--chunks`` small
      chunks through each, alternately; the server process's CPU time
      (utime+stime from /proc) over the turn, per chunk. Reported: the
      median of each and their ratio (goal: Vertex within 5 % of Gemini API).
  (b) Token refreshes and other streams: in this process, one GeminiModel on
      Vertex AI with tokens living ``--lifetime`` seconds, whose token
      endpoint takes ``--refresh-delay`` seconds to answer; one session
      streams a long answer (a chunk every 10 ms) while others keep
      starting turns that need refreshed tokens. Reported: the longest gap
      between two chunks of the long stream, with and without refreshes,
      and how many refreshes happened.

Figures are ratios measured in one run: the machine's speed varies (and
other work may share it).

    python bench/vertex.py [--rounds 7] [--chunks 20000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gemini_split.testing.fake_gemini import FakeGemini  # noqa: E402
from gemini_split.testing.fake_google_auth import FakeGoogleAuth  # noqa: E402


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _clean_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_", "GCE_"))}
    env.update(HOME=str(home), GEMINI_SPLIT_HOME=str(home / ".gemini"))
    env.update(extra)
    return env


def _serve(env: dict[str, str], cwd: Path, state: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "gemini_split", "serve", "--listen", "127.0.0.1:0",
                             "--state-dir", str(state)],
                            cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    seen = []
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        seen.append(line)
        match = re.search(r"serving on (ws://\S+)", line)
        if match:
            return proc, match.group(1)
        if not line:
            break
    raise RuntimeError("serve did not start: " + "".join(seen))


def cpu_per_chunk(rounds: int, chunks: int) -> dict[str, object]:
    work = Path(tempfile.mkdtemp(prefix="bench-vertex-"))
    text = "x" * chunks
    turn = {"text": text, "chunks": chunks}
    with FakeGoogleAuth() as auth, FakeGemini(api_key="bench-key") as plain, \
            FakeGemini(access_token=auth.valid) as vertex:
        key = auth.service_account_file(work / "sa.json")
        servers = {
            "gemini-api": _serve(_clean_env(work, GEMINI_API_KEY="bench-key", GOOGLE_GEMINI_BASE_URL=plain.url),
                                 work, work / "state-gemini"),
            "vertex-ai": _serve(_clean_env(work, **vertex.vertex_env(), GOOGLE_APPLICATION_CREDENTIALS=str(key)),
                                work, work / "state-vertex"),
        }
        fakes = {"gemini-api": plain, "vertex-ai": vertex}
        client_env = _clean_env(work)
        per_chunk: dict[str, list[float]] = {name: [] for name in servers}
        try:
            for round_ in range(rounds + 1):  # the first round warms up
                for name, (proc, address) in servers.items():
                    fakes[name].add_turns([turn])
                    before = _cpu(proc.pid)
                    done = subprocess.run([sys.executable, "-m", "gemini_split", "--server", address, "-p", "go"],
                                          env=client_env, cwd=work, capture_output=True, text=True, timeout=300)
                    after = _cpu(proc.pid)
                    if done.returncode != 0 or len(done.stdout) != chunks + 1:
                        raise RuntimeError(f"{name}: {done.stderr[-500:]}")
                    if round_:
                        per_chunk[name].append((after - before) / chunks * 1e6)
        finally:
            for proc, _ in servers.values():
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=10)
        assert all(r["auth"] == "ok" for r in vertex.requests)
        assert auth.token_requests == 1
    gemini = statistics.median(per_chunk["gemini-api"])
    vertex_cpu = statistics.median(per_chunk["vertex-ai"])
    return {"chunks": chunks, "rounds": rounds, "gemini_api_us_per_chunk": round(gemini, 3),
            "vertex_ai_us_per_chunk": round(vertex_cpu, 3), "ratio": round(vertex_cpu / gemini, 3),
            "samples": {k: [round(v, 3) for v in vs] for k, vs in per_chunk.items()}}


def refresh_pauses(lifetime: float, refresh_delay: float) -> dict[str, object]:
    import trio

    from gemini_split.server.model.gemini import GeminiModel
    from gemini_split.server.model.base import ModelRequest, TextChunk
    from gemini_split.server.model.credentials import resolve_model_auth

    work = Path(tempfile.mkdtemp(prefix="bench-vertex-"))

    def request(text: str) -> ModelRequest:
        return ModelRequest(model="gemini-2.5-flash", contents=[{"role": "user", "parts": [{"text": text}]}])

    def run(refreshing: bool) -> tuple[float, int]:
        long = {"text": "y" * 400, "chunks": 400, "chunk_delay": 0.01}
        with FakeGoogleAuth(lifetime=lifetime if refreshing else 3600) as auth, \
                FakeGemini(access_token=auth.valid) as fake:
            env = dict(fake.vertex_env(), GOOGLE_APPLICATION_CREDENTIALS=str(
                auth.service_account_file(work / "sa.json")), HOME=str(work))
            model = GeminiModel(auth=resolve_model_auth(env))
            gaps: list[float] = []

            async def main() -> None:
                async for _ in model.stream(request("warm")):
                    pass
                auth.delay = refresh_delay
                fake.add_turns([long])  # the next request's (the long stream's): the others start later
                async with trio.open_nursery() as nursery:
                    async def others() -> None:
                        await trio.sleep(0.1)
                        for i in range(1000):
                            async for _ in model.stream(request(f"other {i}")):
                                pass
                            await trio.sleep(0.05)

                    nursery.start_soon(others)
                    last = None
                    async for chunk in model.stream(request("long")):
                        if isinstance(chunk, TextChunk):
                            now = trio.current_time()
                            if last is not None:
                                gaps.append(now - last)
                            last = now
                    nursery.cancel_scope.cancel()

            trio.run(main)
            return max(gaps), auth.token_requests

    quiet_gap, _ = run(False)
    refresh_gap, refreshes = run(True)
    return {"lifetime_s": lifetime, "refresh_delay_s": refresh_delay, "refreshes": refreshes,
            "max_gap_ms_without_refresh": round(quiet_gap * 1000, 1),
            "max_gap_ms_with_refresh": round(refresh_gap * 1000, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--chunks", type=int, default=20000)
    parser.add_argument("--lifetime", type=float, default=1.2)
    parser.add_argument("--refresh-delay", type=float, default=0.3)
    parser.add_argument("--only", default="a,b")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    out: dict[str, object] = {}
    if "a" in args.only:
        out["cpu_per_chunk"] = cpu_per_chunk(args.rounds, args.chunks)
    if "b" in args.only:
        out["refresh_pauses"] = refresh_pauses(args.lifetime, args.refresh_delay)
    if args.json:
        print(json.dumps(out, indent=2))
        return
    a = out.get("cpu_per_chunk")
    if a:
        print(f"(a) serve CPU per chunk ({a['chunks']} chunks, median of {a['rounds']} rounds): "
              f"Gemini API {a['gemini_api_us_per_chunk']} µs, Vertex AI {a['vertex_ai_us_per_chunk']} µs, "
              f"ratio {a['ratio']}")
    b = out.get("refresh_pauses")
    if b:
        print(f"(b) longest gap in a 10 ms-per-chunk stream: {b['max_gap_ms_without_refresh']} ms without "
              f"refreshes, {b['max_gap_ms_with_refresh']} ms with {b['refreshes']} refreshes "
              f"(token endpoint {b['refresh_delay_s']} s slow, tokens living {b['lifetime_s']} s)")


if __name__ == "__main__":
    main()
