"""Running the SDK editor (``sdk_editor.py``) against ``gemini-split --acp``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
API_KEY = "test-key-acp"


def agent_env(fake: Any, home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_"))}
    env.update(GEMINI_API_KEY=API_KEY, GOOGLE_GEMINI_BASE_URL=fake.url, GEMINI_SPLIT_HOME=str(home))
    env.update(extra)
    return env


def run_editor(plan: dict[str, Any], tmp_path: Path, *, timeout: float = 40) -> dict[str, Any]:
    """Run the SDK editor with ``plan``; what it saw (results, updates, calls)."""
    plan.setdefault("agent", [sys.executable, "-m", "gemini_split", "--acp", *plan.pop("args", [])])
    path = tmp_path / f"plan-{len(list(tmp_path.glob('plan-*')))}.json"
    path.write_text(json.dumps(plan))
    done = subprocess.run([sys.executable, str(HERE / "sdk_editor.py"), str(path)], capture_output=True,
                          text=True, timeout=timeout, env=plan.get("env"))
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def kinds(seen: dict[str, Any]) -> list[str]:
    return [u["sessionUpdate"] for u in seen["updates"]]


def message_text(seen: dict[str, Any], kind: str = "agent_message_chunk") -> str:
    return "".join(u["content"]["text"] for u in seen["updates"] if u["sessionUpdate"] == kind)
