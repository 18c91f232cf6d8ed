"""Benchmark: sub-agents' deltas cost the server what the main agent's do.

Issue 32's goal: 4 concurrent sub-agents streaming 200 deltas each cost the
server at most 1.2x the CPU of the same 800 deltas streamed by the main
agent alone. Both runs are one request in this process: an
``AgentService`` with the scripted model (no network: what is measured is
the server's work per delta — the loop, the outbox, the event log, the
store, the encoding — not a model's), a client on a memory pair that reads
every event. Run A: the main agent answers with 800 text chunks. Run B: the
main agent calls 4 sub-agents in one turn; each streams 200 chunks, then
reports (``complete_task``); the main agent answers in one chunk. The CPU
time of the process for the request (``time.process_time``), the median of
``--repeat`` runs each, and the events the client received are reported.

    python bench/subagents.py [--deltas 200] [--agents 4] [--repeat 7] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import trio  # noqa: E402

from gemini_split.protocol import AgentDefinition, GenerateContentRequest, Hello, SessionContext, encode  # noqa: E402
from gemini_split.server.config import ServerConfig  # noqa: E402
from gemini_split.server.model.scripted import ScriptedModel  # noqa: E402
from gemini_split.server.service import AgentService  # noqa: E402
from gemini_split.stamping import stamp  # noqa: E402
from gemini_split.transport.memory_pair import open_memory_pair  # noqa: E402

GOAL = 1.2
PIECE = "token-ish words "  # 16 characters a delta
MAIN = "You are gemini-split"


def _script(agents: int, deltas: int, *, sub: bool) -> tuple[list[dict], SessionContext | None]:
    stream = {"chunks": deltas, "chunk_delay": 1e-9}  # a chunk at a time, as fast as possible
    if not sub:
        return [{"text": PIECE * deltas * agents, **{**stream, "chunks": deltas * agents}}], None
    names = [f"agent{i}" for i in range(agents)]
    script = [{"system_contains": MAIN, "function_calls": [{"name": n, "args": {"query": "go"}} for n in names]}]
    for n in names:
        script.append({"system_contains": f"You are {n.upper()}.", "text": PIECE * deltas, **stream,
                       "function_calls": [{"name": "complete_task", "args": {"result": f"{n} done"}}]})
    script.append({"system_contains": MAIN, "text": "all done"})
    context = SessionContext(agents=tuple(AgentDefinition(name=n, description=f"{n} streams",
                                                          system_prompt=f"You are {n.upper()}.", tools=())
                                          for n in names))
    return script, context


async def _one(agents: int, deltas: int, sub: bool) -> tuple[float, int]:
    script, context = _script(agents, deltas, sub=sub)
    service = AgentService(ScriptedModel(script), ServerConfig(model="scripted"))
    events = 0
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        client, server = open_memory_pair(buffer=4096, client_peer="bench", server_peer="bench",
                                          client_max=1 << 26, server_max=1 << 26)
        nursery.start_soon(service.handle_connection, server)
        await client.send(encode(Hello(id="h", timestamp=1)))
        await client.receive()
        began = time.process_time()
        await client.send(encode(stamp(GenerateContentRequest(prompt="go", context=context))))
        while True:
            text = await client.receive()
            events += 1
            if text.startswith(('{"type":"finished"', '{"type":"error"')):
                break
        spent = time.process_time() - began
        nursery.cancel_scope.cancel()
    await service.aclose()
    return spent, events


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deltas", type=int, default=200)
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    runs: dict[str, list[tuple[float, int]]] = {"main": [], "sub": []}
    trio.run(_one, args.agents, args.deltas, False)  # warm up: imports, caches
    trio.run(_one, args.agents, args.deltas, True)
    for _ in range(args.repeat):  # interleaved: a busy neighbour hits both alike
        runs["main"].append(trio.run(_one, args.agents, args.deltas, False))
        runs["sub"].append(trio.run(_one, args.agents, args.deltas, True))
    main_cpu = statistics.median(r[0] for r in runs["main"])
    sub_cpu = statistics.median(r[0] for r in runs["sub"])
    ratio = sub_cpu / main_cpu
    result = {
        "deltas": args.agents * args.deltas, "agents": args.agents,
        "main_alone_cpu_ms": round(main_cpu * 1000, 1), "subagents_cpu_ms": round(sub_cpu * 1000, 1),
        "main_alone_events": runs["main"][-1][1], "subagents_events": runs["sub"][-1][1],
        "ratio": round(ratio, 3), "goal": GOAL, "pass": ratio <= GOAL,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{result['deltas']} deltas: main agent alone {result['main_alone_cpu_ms']} ms CPU "
              f"({result['main_alone_events']} events); {args.agents} sub-agents x {args.deltas} "
              f"{result['subagents_cpu_ms']} ms CPU ({result['subagents_events']} events)")
        print(f"ratio {ratio:.3f} (goal <= {GOAL}): {'PASS' if result['pass'] else 'FAIL'}")
    return 0 if result["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
