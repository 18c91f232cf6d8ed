"""Sample a running process with py-spy and summarise where its time went.

Used by ``bench/serve.py --profile DIR``: py-spy attaches to the daemon once
it is up (``py-spy record --pid``, raw collapsed stacks, idle frames left
out) and is stopped with SIGINT before the daemon, so the file is written.
:func:`summarize` turns the collapsed stacks into two short tables: the
functions where samples ended (self time) and the functions on the stack
(inclusive time), each as a share of all samples.

    python bench/pyspy.py FILE.txt [--top N]     # summarise a recorded file
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
from collections import Counter
from pathlib import Path


def available() -> bool:
    return shutil.which("py-spy") is not None


class Sampler:
    """``py-spy record`` on ``pid`` until :meth:`stop`."""

    def __init__(self, pid: int, out: Path, *, rate: int = 250):
        self.out = out
        self.proc = subprocess.Popen(
            ["py-spy", "record", "--pid", str(pid), "--format", "raw", "--rate", str(rate),
             "--nonblocking", "--output", str(out)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )

    def stop(self) -> str:
        """Stop sampling; returns py-spy's complaint, if any."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                _, err = self.proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                _, err = self.proc.communicate()
        else:
            _, err = self.proc.communicate()
        return "" if self.proc.returncode == 0 else (err or "")[-300:]


def _frame_name(frame: str) -> str:
    """``func (path/to/file.py:123)`` → ``func (file.py)``: one row per function."""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    parts = path.split("/")
    short = "/".join(parts[-2:]) if len(parts) > 1 else path
    return f"{name} ({short})"


def summarize(path: Path, top: int = 15) -> dict:
    """Self and inclusive shares (percent of samples) of the top functions."""
    self_time: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_frame_name(f) for f in stack.split(";") if f]
        if not frames:
            continue
        total += count
        self_time[frames[-1]] += count
        for name in set(frames):
            inclusive[name] += count
    share = (lambda n: 100.0 * n / total) if total else (lambda n: 0.0)
    return {
        "samples": total,
        "self": [(name, share(n)) for name, n in self_time.most_common(top)],
        "inclusive": [(name, share(n)) for name, n in inclusive.most_common(top * 2)],
    }


def format_summary(summary: dict, title: str) -> str:
    lines = [f"{title}: {summary['samples']} samples"]
    lines.append("  self time:")
    lines += [f"    {pct:5.1f}%  {name}" for name, pct in summary["self"]]
    lines.append("  on the stack (inclusive):")
    lines += [f"    {pct:5.1f}%  {name}" for name, pct in summary["inclusive"]]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", type=Path)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    print(format_summary(summarize(args.file, args.top), str(args.file)))


if __name__ == "__main__":
    main()
