"""Issue 29 §2 through the local daemon: the user's skill is read on the
client and the daemon answers the model's ``activate_skill`` from what the
client sent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import run

pytestmark = pytest.mark.timeout(90)


def test_a_skill_is_activated_through_the_local_daemon(environ, home, fake, tmp_path):
    skill = Path(home, "skills", "greeter")
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: greeter\ndescription: Greets warmly.\n---\nSay GREETINGS-42.\n")
    fake.add_turns([{"function_calls": [{"name": "activate_skill", "args": {"name": "greeter"}}]},
                    {"text": "done"}])
    done = run(["-p", "greet me"], environ, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "done\n"
    bodies = [r["body"] for r in fake.requests if r["action"].endswith("GenerateContent")]
    assert "<name>greeter</name>" in json.dumps(bodies[0]["systemInstruction"])
    answer = json.dumps(bodies[-1]["contents"][-1])
    assert '<activated_skill name=\\"greeter\\">' in answer and "Say GREETINGS-42." in answer
    assert Path(home, "daemon", "daemon.sock").exists()  # it went through the daemon
