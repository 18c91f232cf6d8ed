"""Benchmark: the gRPC face next to the WebSocket listener, on one daemon.
(Not bench/grpc.py: run as a script, that name would shadow grpcio.)

One ``gemini-split serve --listen 127.0.0.1:P --grpc 127.0.0.1:Q -m
scripted:FILE`` (the scripted model: no HTTP, so the figures are the
server and the transports), and two clients in this process:

* WebSocket: gemini-split's own ``ProtocolClient`` (``open_client``);
* gRPC: grpcio with stubs generated here from the shipped proto, as a third
  party would (on a worker thread: grpcio's client blocks).

  (a) time to first text (first ``text_delta`` / ``TextResponse`` after the
      prompt is sent), median over ``--turns`` turns on one connection /
      one stream, the two alternating;
  (b) one long answer of ``--chunks`` model chunks on one stream: model
      chunks/s and messages/s delivered (the server merges deltas while a
      client lags, so messages <= chunks).

Goals are ratios to the WebSocket figure measured in the same run: gRPC's
median time to first text at most 2x WebSocket's (+1 ms), and its chunks/s
at least half of WebSocket's.

    python bench/grpc_face.py [--turns 30] [--chunks 20000] [--json]
"""

from __future__ import annotations

import argparse
import importlib
import importlib.resources
import json
import os
import re
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
from gemini_split.client.connect import ClientSettings, Endpoint, ToolSettings, open_client  # noqa: E402
from gemini_split.protocol import TextDelta  # noqa: E402

PY = sys.executable
SHORT = {"text": "ok"}


def generate_stubs(out: Path) -> Any:
    from grpc_tools import protoc

    root = importlib.resources.files("gemini_split_grpc")
    include = importlib.resources.files("grpc_tools") / "_proto"
    assert protoc.main(["protoc", f"-I{root}", f"-I{include}", f"--python_out={out}", f"--grpc_python_out={out}",
                        "gemini/v1/gemini.proto"]) == 0
    sys.path.insert(0, str(out))
    return importlib.import_module("gemini.v1.gemini_pb2"), importlib.import_module("gemini.v1.gemini_pb2_grpc")


def start_daemon(workdir: Path, script: list[dict]) -> tuple[subprocess.Popen, str, str]:
    path = workdir / "script.json"
    path.write_text(json.dumps(script))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_"))}
    env["GEMINI_SPLIT_HOME"] = str(workdir / "home")
    proc = subprocess.Popen([PY, "-m", "gemini_split", "serve", "--listen", "127.0.0.1:0", "--grpc", "127.0.0.1:0",
                             "-m", f"scripted:{path}", "--state-dir", ":memory:"],
                            cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    found: dict[str, str] = {}
    deadline = time.monotonic() + 30
    while len(found) < 2 and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            raise SystemExit("the daemon did not start")
        for address in re.findall(r"serving on (\S+)", line):
            found[address.split(":")[0]] = address
    return proc, found["ws"], found["grpc"]


class GrpcStream:
    """One Chat stream; ``turn(prompt)`` returns (time to first text,
    seconds from first to last text, text messages, text)."""

    def __init__(self, pb: Any, stubs: Any, address: str):
        import grpc
        import queue

        self.pb = pb
        self.channel = grpc.insecure_channel(address.removeprefix("grpc://"),
                                             options=[("grpc.max_receive_message_length", 64 << 20)])
        self.requests: queue.SimpleQueue = queue.SimpleQueue()
        self.requests.put(pb.ClientRequest(start_request=pb.StartRequest()))
        self.responses = stubs.GeminiServiceStub(self.channel).Chat(iter(self.requests.get, None))
        assert next(self.responses).WhichOneof("response") == "session_info"

    def turn(self, prompt: str) -> tuple[float, float, int, str]:
        t0 = time.perf_counter()
        self.requests.put(self.pb.ClientRequest(prompt=prompt))
        first = last = None
        parts = []
        for response in self.responses:
            kind = response.WhichOneof("response")
            if kind == "text_response":
                last = time.perf_counter()
                first = first or last
                parts.append(response.text_response.content)
            elif kind == "session_info":
                break
            elif kind == "error":
                raise SystemExit(f"gRPC turn failed: {response.error.message}")
        return first - t0, last - first, len(parts), "".join(parts)

    def close(self) -> None:
        self.requests.put(None)
        self.channel.close()


class Recorder:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.first = self.last = None
        self.parts: list[str] = []

    async def on_event(self, event: Any) -> None:
        if isinstance(event, TextDelta):
            self.last = time.perf_counter()
            self.first = self.first or self.last
            self.parts.append(event.content)


async def run(args: argparse.Namespace, pb: Any, stubs: Any, ws: str, grpc_address: str, workdir: Path) -> dict:
    rec = Recorder()
    settings = ClientSettings(endpoint=Endpoint(server=ws), tools=ToolSettings(workspace=workdir))
    grpc_stream = await trio.to_thread.run_sync(GrpcStream, pb, stubs, grpc_address)
    ttft: dict[str, list[float]] = {"ws": [], "grpc": []}
    stream: dict[str, dict] = {}
    async with open_client(settings, on_event=rec.on_event) as client:
        for i in range(args.turns + 1):  # the first of each: warm-up
            rec.reset()
            t0 = time.perf_counter()
            await client.run_turn(f"turn {i}")
            if i:
                ttft["ws"].append(rec.first - t0)
            first, *_ = await trio.to_thread.run_sync(grpc_stream.turn, f"turn {i}")
            if i:
                ttft["grpc"].append(first)
        expected = "x" * args.chunks
        rec.reset()
        await client.run_turn("long")
        stream["ws"] = {"seconds": rec.last - rec.first, "messages": len(rec.parts), "ok": "".join(rec.parts) == expected}
        _, seconds, messages, text = await trio.to_thread.run_sync(grpc_stream.turn, "long")
        stream["grpc"] = {"seconds": seconds, "messages": messages, "ok": text == expected}
    grpc_stream.close()
    result = {}
    for mode in ("ws", "grpc"):
        s = stream[mode]
        result[mode] = {
            "ttft_ms": statistics.median(ttft[mode]) * 1e3,
            "chunks_per_s": args.chunks / max(s["seconds"], 1e-9),
            "messages_per_s": s["messages"] / max(s["seconds"], 1e-9),
            "messages": s["messages"], "text_ok": s["ok"],
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--chunks", type=int, default=20000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        pb, stubs = generate_stubs(workdir)
        long_turn = {"text": "x" * args.chunks, "chunks": args.chunks}
        script = [SHORT] * (2 * (args.turns + 1)) + [long_turn, long_turn]
        proc, ws, grpc_address = start_daemon(workdir, script)
        try:
            result = trio.run(run, args, pb, stubs, ws, grpc_address, workdir)
        finally:
            stop(proc, 15)
    ws_r, grpc_r = result["ws"], result["grpc"]
    rows = [
        ("(a) median time to first text", "<= 2x WebSocket + 1 ms",
         f"gRPC {grpc_r['ttft_ms']:.2f} ms, WebSocket {ws_r['ttft_ms']:.2f} ms",
         grpc_r["ttft_ms"] <= 2 * ws_r["ttft_ms"] + 1),
        ("(b) model chunks/s on one stream", ">= 0.5x WebSocket",
         f"gRPC {grpc_r['chunks_per_s']:,.0f}/s ({grpc_r['messages_per_s']:,.0f} msg/s), "
         f"WebSocket {ws_r['chunks_per_s']:,.0f}/s ({ws_r['messages_per_s']:,.0f} msg/s)",
         grpc_r["chunks_per_s"] >= 0.5 * ws_r["chunks_per_s"] and grpc_r["text_ok"] and ws_r["text_ok"]),
    ]
    if args.json:
        print(json.dumps(result, indent=2))
    print(f"{'test':36} {'goal':26} {'figure':70} result")
    for name, goal, figure, ok in rows:
        print(f"{name:36} {goal:26} {figure:70} {'pass' if ok else 'FAIL'}")
    sys.exit(0 if all(ok for *_, ok in rows) else 1)


if __name__ == "__main__":
    main()
