"""Benchmark: a long session stays under its compression threshold.

One session of ``--turns`` prompts (default 200) in this process: an
``AgentService`` on the real Gemini client (google-genai's wire, our fast
paths) in front of the fake Gemini server, which answers each prompt with
``--answer`` characters and counts every request's prompt tokens as the API
would (about four characters a token). The session's
``compression_threshold`` is set so that the limit is ``--limit`` tokens of
the model's context window; the server compresses automatically whenever
the last prompt passed it. Reported: turns that failed (goal: 0), the
largest prompt a turn sent after the first compression point was reached
against the limit (goal: no turn's prompt more than one answer's worth
over it: the check happens before each call), how many compressions
happened, and the wall time per turn.

    python bench/compression.py [--turns 200] [--answer 4000] [--limit 20000] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import trio  # noqa: E402

from gemini_split.transport.memory_pair import open_memory_pair  # noqa: E402
from gemini_split.protocol import Hello, encode  # noqa: E402
from gemini_split.server.config import ServerConfig  # noqa: E402
from gemini_split.server.model.credentials import ModelAuth  # noqa: E402
from gemini_split.server.model.gemini import GeminiModel  # noqa: E402
from gemini_split.server.service import AgentService  # noqa: E402
from gemini_split.server.session.features.compression import context_window  # noqa: E402
from gemini_split.testing.fake_gemini import FakeGemini  # noqa: E402

MODEL = "gemini-2.5-flash"
KEY = "bench-key"


async def _session(url: str, turns: int, answer: int, limit: int) -> dict:
    model = GeminiModel(auth=ModelAuth("api-key", api_key=KEY, key_source="bench", base_url=url))
    service = AgentService(model, ServerConfig(model=MODEL))
    threshold = limit / context_window(MODEL)
    failed, compressions = 0, 0
    began = time.perf_counter()
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        client, server = open_memory_pair(buffer=4096, client_peer="bench", server_peer="bench",
                                          client_max=1 << 26, server_max=1 << 26)
        nursery.start_soon(service.handle_connection, server)
        await client.send(encode(Hello(id="h", timestamp=1)))
        json.loads(await client.receive())
        for n in range(turns):
            request = {"type": "generate_content_request", "id": f"r-{n}", "timestamp": 1,
                       "prompt": f"turn {n}: answer with {answer} characters",
                       "context": {"compression_threshold": threshold}}
            await client.send(json.dumps(request))
            while True:
                event = json.loads(await client.receive())
                if event["type"] == "compressed":
                    compressions += 1
                if event.get("request_id") == request["id"] and event["type"] in ("finished", "error"):
                    break
            if event["type"] == "error":
                failed += 1
                print(f"turn {n} failed: {event['message']}", file=sys.stderr)
        nursery.cancel_scope.cancel()
    await model.aclose()
    return {"failed": failed, "compressions": compressions, "seconds_per_turn": (time.perf_counter() - began) / turns}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--answer", type=int, default=4000, help="characters of each answer")
    parser.add_argument("--limit", type=int, default=20000, help="tokens the prompt may reach before compression")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    # Every call is answered with --answer characters: the prompts' answers
    # and the summaries the compressions ask for.
    script = [{"text": "x" * args.answer}] * (args.turns * 2)
    with FakeGemini(script, api_key=KEY) as fake:
        result = trio.run(_session, fake.url, args.turns, args.answer, args.limit)
        # The fake counts a prompt's tokens as ~4 characters of its text each.
        prompts = [sum((len(p.get("text", "")) + 3) // 4 for c in r["body"]["contents"] for p in c["parts"])
                   for r in fake.requests]
    exchange = 2 * args.answer // 4
    largest = max(prompts)
    result.update(turns=args.turns, limit=args.limit, largest_prompt=largest, calls=len(prompts))
    result["pass"] = ok = result["failed"] == 0 and result["compressions"] > 0 and largest <= args.limit + exchange
    if args.json:
        print(json.dumps(result))
        return
    print(f"{args.turns} turns, limit {args.limit:,} tokens ({args.limit / context_window(MODEL):.4f} of "
          f"{context_window(MODEL):,})")
    print(f"  failed turns      {result['failed']}  (goal 0)")
    print(f"  compressions      {result['compressions']}")
    print(f"  largest prompt    {largest:,} tokens  (goal <= limit + one exchange = {args.limit + exchange:,})")
    print(f"  per turn          {result['seconds_per_turn'] * 1000:.1f} ms")
    print("PASS" if ok else "FAIL")


if __name__ == "__main__":
    main()
