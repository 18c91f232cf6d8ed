"""Benchmark: the protocol codec, per message, and the protocol's import cost.

Three messages, each encoded and decoded with ``gemini_split.protocol``'s
``encode``/``decode`` (which validate every field):

  text_delta               one short streamed delta (the hot path of a turn);
  tool_discovery           the real default tool set's announcement (~6.8 KB);
  tool_execution_response  a 64 KB tool result (a file read).

The floor is the standard library on the same JSON text in the same run:
``json.dumps`` of the message's dict (encode) and ``json.loads`` of its text
(decode), neither of which validates anything. Goal: our validated codec is
no slower than that unvalidated floor (ratio <= 1.0).

Import cost: ``python -X importtime -c "import gemini_split.protocol"``, the
cumulative time of the ``gemini_split.protocol`` line, median of several
fresh interpreters, beside the floor ``import json`` measured the same way.

    python bench/codec.py [--quick] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gemini_split.tools.registry import default_tools  # noqa: E402
from gemini_split.protocol import TextDelta, ToolDiscovery, ToolExecutionResponse, decode, encode  # noqa: E402

STAMP = {"id": "b7c1e2f0-42", "timestamp": 1_700_000_000_000}


def messages() -> dict[str, object]:
    result = {"path": "src/big.py", "content": ("x = 1  # a line of a file\n" * 2600)[: 64 * 1024]}
    return {
        "text_delta": TextDelta(**STAMP, seq=41, request_id="b7c1e2f0-7", content="Hello, wor"),
        "tool_discovery": ToolDiscovery(**STAMP, tools=tuple(default_tools().specs())),
        "tool_execution_response": ToolExecutionResponse(**STAMP, request_id="s-3", result=result),
    }


def per_call_us(fn, quick: bool) -> float:
    """Median over repeats of the mean time of one call, in µs."""
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    number = max(1, number // (4 if quick else 1))
    runs = timer.repeat(repeat=3 if quick else 7, number=number)
    return statistics.median(runs) / number * 1e6


def import_ms(module: str, runs: int) -> float:
    """Cumulative -X importtime of ``module`` (ms), median of fresh interpreters."""
    figures = []
    for _ in range(runs):
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", f"import {module}"],
            capture_output=True, text=True, cwd=ROOT, check=True,
        )
        for line in proc.stderr.splitlines():
            parts = [p.strip() for p in line.removeprefix("import time:").split("|")]
            if len(parts) == 3 and parts[2] == module:
                figures.append(int(parts[1]) / 1000)
    return statistics.median(figures)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()

    rows = []
    for name, message in messages().items():
        text = encode(message)
        obj = json.loads(text)
        assert decode(text) == decode(encode(decode(text)))
        enc = per_call_us(lambda: encode(message), args.quick)
        dec = per_call_us(lambda: decode(text), args.quick)
        floor_enc = per_call_us(lambda: json.dumps(obj, ensure_ascii=False, separators=(",", ":")), args.quick)
        floor_dec = per_call_us(lambda: json.loads(text), args.quick)
        rows.append({"message": name, "bytes": len(text.encode()), "encode_us": enc, "decode_us": dec,
                     "floor_encode_us": floor_enc, "floor_decode_us": floor_dec})
    runs = 5 if args.quick else 11
    imports = {"gemini_split.protocol": import_ms("gemini_split.protocol", runs), "json": import_ms("json", runs)}

    if args.json:
        print(json.dumps({"codec": rows, "import_ms": imports}, indent=2))
        return
    print("goal: validated encode/decode <= 1.0x the stdlib json floor (no validation) on the same text")
    print(f"{'message':<25} {'bytes':>7} {'op':<7} {'µs':>9} {'floor µs':>9} {'ratio':>6}  pass")
    for row in rows:
        for op in ("encode", "decode"):
            us, floor = row[f"{op}_us"], row[f"floor_{op}_us"]
            print(f"{row['message']:<25} {row['bytes']:>7} {op:<7} {us:>9.2f} {floor:>9.2f} "
                  f"{us / floor:>6.2f}  {'PASS' if us <= floor else 'FAIL'}")
    print()
    print(f"import gemini_split.protocol: {imports['gemini_split.protocol']:.1f} ms cumulative "
          f"(floor: import json {imports['json']:.1f} ms)")


if __name__ == "__main__":
    main()
