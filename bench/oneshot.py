"""Benchmark: wall time and peak RSS of ``gemini-split -p``.

Against a local fake Gemini server (real REST wire format), for

  (a) a 50-chunk streamed text answer, and
  (b) one ``read_file`` round trip (two model calls, the tool run locally),

each beside a floor: a plain script that makes the same requests with
google-genai directly (no gemini-split at all). Every figure is the median of
``--runs`` fresh processes (default 7). Peak RSS comes from ``wait4``'s
rusage of each child.

    python bench/oneshot.py [--runs N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gemini_split.testing.fake_gemini import FakeGemini  # noqa: E402

API_KEY = "bench-key"
TEXT = "".join(f"token{i:02d} " for i in range(50))
TEXT_TURN = {"text": TEXT, "chunks": 50}
TOOL_TURNS = [
    {"function_calls": [{"name": "read_file", "args": {"file_path": "notes.txt"}}]},
    {"text": "The notes say the demo is on Friday.", "chunks": 5},
]

# The floor: the same requests, made by google-genai directly. It uses the
# sync client, the cheapest way google-genai offers to make them.
FLOOR_TEXT = """
from google import genai
client = genai.Client()
for chunk in client.models.generate_content_stream(model="gemini-2.5-flash", contents="count"):
    print(chunk.text or "", end="", flush=True)
print()
"""
FLOOR_TOOL = """
from google import genai
from google.genai import types
client = genai.Client()
decl = types.FunctionDeclaration(name="read_file", description="read a file",
    parameters_json_schema={"type": "object", "properties": {"file_path": {"type": "string"}}})
config = types.GenerateContentConfig(tools=[types.Tool(function_declarations=[decl])])
contents = [types.Content(role="user", parts=[types.Part(text="read notes.txt")])]
calls = []
for chunk in client.models.generate_content_stream(model="gemini-2.5-flash", contents=contents, config=config):
    calls += chunk.function_calls or []
contents.append(types.Content(role="model", parts=[types.Part(function_call=c) for c in calls]))
text = open(calls[0].args["file_path"]).read()
contents.append(types.Content(role="user", parts=[
    types.Part.from_function_response(name="read_file", response={"output": text})]))
for chunk in client.models.generate_content_stream(model="gemini-2.5-flash", contents=contents, config=config):
    print(chunk.text or "", end="", flush=True)
print()
"""


def measure(cmd: list[str], env: dict[str, str], cwd: str) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one run of ``cmd``."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.read().decode()}")
    return wall, usage.ru_maxrss / 1024


def run_case(name: str, turns: list[dict], cmd: list[str], runs: int, workdir: str) -> dict:
    walls, rss = [], []
    with FakeGemini(api_key=API_KEY) as fake:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_"))}
        env.update(GEMINI_API_KEY=API_KEY, GOOGLE_GEMINI_BASE_URL=fake.url)
        fake.add_turns(turns)
        measure(cmd, env, workdir)  # warm the OS caches; not counted
        for _ in range(runs):
            fake.add_turns(turns)
            wall, mb = measure(cmd, env, workdir)
            walls.append(wall)
            rss.append(mb)
    return {"case": name, "runs": runs, "wall_s": statistics.median(walls), "rss_mb": statistics.median(rss),
            "wall_min_s": min(walls), "wall_max_s": max(walls)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory() as workdir:
        Path(workdir, "notes.txt").write_text("The demo is on Friday.\n")
        results = [
            run_case("(a) 50-chunk text: gemini-split -p", [TEXT_TURN], [py, "-m", "gemini_split", "-p", "count"], args.runs, workdir),
            run_case("(a) 50-chunk text: google-genai floor", [TEXT_TURN], [py, "-c", FLOOR_TEXT], args.runs, workdir),
            run_case("(b) read_file round trip: gemini-split -p", TOOL_TURNS, [py, "-m", "gemini_split", "-p", "read notes.txt"], args.runs, workdir),
            run_case("(b) read_file round trip: google-genai floor", TOOL_TURNS, [py, "-c", FLOOR_TOOL], args.runs, workdir),
        ]
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{'case':48} {'median wall':>12} {'peak RSS':>10}   (min–max wall, {args.runs} runs)")
    for r in results:
        print(f"{r['case']:48} {r['wall_s']:>10.3f} s {r['rss_mb']:>7.1f} MB   ({r['wall_min_s']:.3f}–{r['wall_max_s']:.3f} s)")


if __name__ == "__main__":
    main()
