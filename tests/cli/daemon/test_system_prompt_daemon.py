"""Issue 31 §11 through the local daemon: the user's ``GEMINI_SYSTEM_MD``
file is read by the thin client and is the system instruction the daemon
sends; ``GEMINI_WRITE_SYSTEM_MD`` writes what the daemon would send."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import run

pytestmark = pytest.mark.timeout(90)


def _instruction(body: dict) -> str:
    return "".join(p.get("text", "") for p in (body.get("systemInstruction") or {}).get("parts", []))


def test_the_system_prompt_file_is_used_and_written_through_the_local_daemon(environ, home, fake, tmp_path):
    (tmp_path / "mine.md").write_text("You are DAEMON-PROMPT. Tools: ${AvailableTools}\n")
    fake.add_turns([{"text": "one"}, {"text": "two"}])
    done = run(["-p", "hi"], {**environ, "GEMINI_SYSTEM_MD": "mine.md"}, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    bodies = [r["body"] for r in fake.requests if r["action"].endswith("GenerateContent")]
    assert _instruction(bodies[0]).startswith("You are DAEMON-PROMPT. Tools: - read_file\n")
    done = run(["-p", "hi"], {**environ, "GEMINI_WRITE_SYSTEM_MD": str(tmp_path / "out.md")}, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    bodies = [r["body"] for r in fake.requests if r["action"].endswith("GenerateContent")]
    assert (tmp_path / "out.md").read_text() == _instruction(bodies[1])
    assert _instruction(bodies[1]).startswith("You are gemini-split")
    assert Path(home, "daemon", "daemon.sock").exists()  # it went through the daemon
