"""Running the SDK editor (``sdk_editor.py``) against ``gemini-split --acp``."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
API_KEY = "test-key-acp"


def agent_env(fake: Any, home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_"))}
    env.update(GEMINI_API_KEY=API_KEY, GOOGLE_GEMINI_BASE_URL=fake.url, GEMINI_SPLIT_HOME=str(home))
    env.update(extra)
    return env


class SdkEditor:
    """``sdk_editor.py --serve``: the SDK editor as one long-lived process of
    its own that carries out plan after plan (each with its own agent
    process), so a test process pays for importing the SDK once. Started on
    first use; a plan that takes longer than its timeout kills it (the next
    plan starts a fresh one) and fails the test with what it wrote."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[str] | None = None
        self.log: Any = None

    def run(self, path: Path, timeout: float) -> dict[str, Any]:
        if self.process is None or self.process.poll() is not None:
            self.close()
            self.log = tempfile.TemporaryFile()  # its stderr and its agents': never a full pipe
            self.process = subprocess.Popen([sys.executable, str(HERE / "sdk_editor.py"), "--serve"], text=True,
                                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log)
        assert self.process.stdin is not None and self.process.stdout is not None
        start = os.fstat(self.log.fileno()).st_size
        self.process.stdin.write(f"{path}\n")
        self.process.stdin.flush()
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        line = self.process.stdout.readline() if ready else ""
        if not line:
            said = self._said_since(start)
            self.close()
            raise AssertionError(f"the SDK editor gave no answer within {timeout:g} s (killed it):\n{said}")
        seen = json.loads(line)
        if "crash" in seen:
            raise AssertionError(f"the SDK editor failed the plan:\n{seen['crash']}\n{self._said_since(start)}")
        return seen

    def _said_since(self, start: int) -> str:
        """What the editor (and its agents) wrote to stderr since ``start``
        (read without moving the offset it writes at)."""
        fd = self.log.fileno()
        return os.pread(fd, os.fstat(fd).st_size - start, start).decode(errors="replace")[-3000:]

    def close(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            for pipe in (self.process.stdin, self.process.stdout):
                if pipe is not None:
                    pipe.close()
            self.process = None
        if self.log is not None:
            self.log.close()
            self.log = None


#: This test process's editor (tests/faces/acp/conftest.py closes it at the end).
EDITOR = SdkEditor()


def run_editor(plan: dict[str, Any], tmp_path: Path, *, timeout: float = 40) -> dict[str, Any]:
    """Have the SDK editor carry out ``plan``; what it saw (results, updates,
    calls). The agent it spawns gets ``plan["env"]``, or this process's."""
    plan.setdefault("agent", [sys.executable, "-m", "gemini_split", "--acp", *plan.pop("args", [])])
    plan.setdefault("env", dict(os.environ))
    path = tmp_path / f"plan-{len(list(tmp_path.glob('plan-*')))}.json"
    path.write_text(json.dumps(plan))
    return EDITOR.run(path, timeout)


def kinds(seen: dict[str, Any]) -> list[str]:
    return [u["sessionUpdate"] for u in seen["updates"]]


def message_text(seen: dict[str, Any], kind: str = "agent_message_chunk") -> str:
    return "".join(u["content"]["text"] for u in seen["updates"] if u["sessionUpdate"] == kind)
