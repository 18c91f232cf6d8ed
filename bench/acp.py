"""Benchmark: first ``agent_message_chunk`` latency after ``session/prompt``
(``gemini-split --acp``) against the native protocol's first ``text_delta``
after ``generate_content_request`` (``gemini-split serve --stdio``).

Both are a real process on stdin/stdout with the embedded model talking to
the same local fake Gemini server (real REST wire format), the same SQLite
session store (a request is durably marked running before the model is
called) and the same session context with every prompt, driven by raw lines
from this script — so the difference is what the ACP face adds: the
JSON-RPC translation and the in-process loopback hop to the native session.
Each figure is the median over ``--prompts`` prompts (default 20) in one
session, after one warm-up prompt.

    python bench/acp.py [--prompts N] [--json]
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

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gemini_split.protocol import GenerateContentRequest, Hello, ToolDiscovery  # noqa: E402
from gemini_split.protocol.codec import encode  # noqa: E402
from gemini_split.stamping import stamp  # noqa: E402
from gemini_split.testing.fake_gemini import FakeGemini  # noqa: E402

API_KEY = "bench-key"
TURN = {"text": "first words of a longer answer", "chunks": 3}
#: Goal: ACP's first chunk within this factor of the native protocol's
#: (the face adds one in-process hop and a JSON-RPC re-encoding).
GOAL_RATIO = 1.5


class Lines:
    """Line-at-a-time reading of a process's stdout."""

    def __init__(self, process: trio.Process):
        self.process = process
        self.buffer = b""

    async def next(self) -> dict:
        while b"\n" not in self.buffer:
            data = await self.process.stdout.receive_some(65536)
            if not data:
                raise EOFError("the process closed its stdout")
            self.buffer += data
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line)

    async def send(self, message: dict | str) -> None:
        text = message if isinstance(message, str) else json.dumps(message)
        await self.process.stdin.send_all(text.encode() + b"\n")


async def _acp(env: dict, cwd: str, prompts: int) -> list[float]:
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "gemini_split", "--acp"], stdin=-1, stdout=-1, env=env, cwd=cwd)
    try:
        io = Lines(process)
        await io.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
        await io.next()
        await io.send({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": cwd, "mcpServers": []}})
        session = (await io.next())["result"]["sessionId"]
        figures = []
        for i in range(prompts + 1):
            start = time.perf_counter()
            await io.send({"jsonrpc": "2.0", "id": 10 + i, "method": "session/prompt",
                           "params": {"sessionId": session, "prompt": [{"type": "text", "text": f"p{i}"}]}})
            first = None
            while True:
                message = await io.next()
                if first is None and message.get("method") == "session/update" and \
                        message["params"]["update"]["sessionUpdate"] == "agent_message_chunk":
                    first = time.perf_counter() - start
                if message.get("id") == 10 + i:
                    break
            if i:  # the first prompt warms up
                figures.append(first)
    finally:
        await process.stdin.aclose()
        await process.wait()
    return figures


async def _native(env: dict, cwd: str, prompts: int) -> list[float]:
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "gemini_split", "serve", "--stdio"],
        stdin=-1, stdout=-1, env=env, cwd=cwd)
    try:
        io = Lines(process)
        await io.send(encode(stamp(Hello(client="bench"))))
        await io.next()
        await io.send(encode(stamp(ToolDiscovery(tools=()))))
        figures = []
        for i in range(prompts + 1):
            # The context every native client sends with a prompt (the REPL
            # does, and so does the ACP face): the same for both.
            request = stamp(GenerateContentRequest(prompt=f"p{i}", context=_context(env, cwd)))
            start = time.perf_counter()
            await io.send(encode(request))
            first = None
            while True:
                message = await io.next()
                if first is None and message.get("type") == "text_delta":
                    first = time.perf_counter() - start
                if message.get("type") in ("finished", "error") and message.get("request_id") == request.id:
                    break
            if i:
                figures.append(first)
    finally:
        await process.stdin.aclose()
        await process.wait()
    return figures


def _context(env: dict, cwd: str):
    """The session context a client in ``cwd`` sends (context files, the
    environment listing), built as the REPL and the ACP face build it."""
    from gemini_split.app import attach_context
    from gemini_split.client.connect import ClientSettings, ToolSettings
    from gemini_split.environment import Environment
    from gemini_split.userfiles.settings import load_settings

    environment = Environment(environ=env, cwd=Path(cwd))
    settings = ClientSettings(tools=ToolSettings(workspace=Path(cwd)), loaded_settings=load_settings(environment))
    attach_context(settings, environment, interactive=True)
    return settings.context.message


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, FakeGemini(script=[TURN] * (2 * args.prompts + 4),
                                                         api_key=API_KEY) as fake:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_"))}
        env.update(GEMINI_API_KEY=API_KEY, GOOGLE_GEMINI_BASE_URL=fake.url, GEMINI_SPLIT_HOME=tmp)
        native = trio.run(_native, env, tmp, args.prompts)
        acp = trio.run(_acp, env, tmp, args.prompts)
    n, a = statistics.median(native) * 1000, statistics.median(acp) * 1000
    ratio = a / n
    if args.json:
        print(json.dumps({"native_ms": n, "acp_ms": a, "ratio": ratio, "goal_ratio": GOAL_RATIO}))
    else:
        print(f"{'measure':<52} {'goal':>10} {'figure':>10}  result")
        print(f"{'native: first text_delta after the request (ms)':<52} {'floor':>10} {n:>10.1f}")
        print(f"{'ACP: first agent_message_chunk after prompt (ms)':<52} {'':>10} {a:>10.1f}")
        print(f"{'ACP / native':<52} {'<= ' + str(GOAL_RATIO):>10} {ratio:>10.2f}  "
              f"{'pass' if ratio <= GOAL_RATIO else 'FAIL'}")
    return 0 if ratio <= GOAL_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
