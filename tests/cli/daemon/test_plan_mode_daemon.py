"""Plan mode through the local daemon (a thin client: the tools run here):
the plan is written in this client's plans directory, its approval (with
nobody to ask, gemini-cli's yolo) reaches the daemon's running request
(``tool_discovery.approval_mode``), whose next model turn is offered the
edit tools and writes the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from gemini_split.tools.plans import project_hash

from .conftest import run

pytestmark = pytest.mark.timeout(90)

PLAN = "# Add x\n\n1. Write x.txt\n"


def _declared(body: dict) -> set[str]:
    return {d["name"] for t in body.get("tools", []) for d in t.get("functionDeclarations", [])}


def test_a_plan_is_approved_and_carried_out_through_the_daemon(environ, home, fake, tmp_path):
    fake.add_turns([
        {"function_calls": [{"name": "write_file", "args": {"file_path": "feature-x.md", "content": PLAN}}]},
        {"function_calls": [{"name": "exit_plan_mode", "args": {"plan_filename": "feature-x.md"}}]},
        {"function_calls": [{"name": "write_file", "args": {"file_path": "x.txt", "content": "x\n"}}]},
        {"text": "implemented"},
    ])
    done = run(["-p", "add x", "--approval-mode", "plan"], {**environ, "GEMINI_CLI_TRUST_WORKSPACE": "true"},
               cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("implemented\n")
    assert Path(home, "daemon", "daemon.sock").exists()  # it went through the daemon
    (plan,) = Path(home, "tmp", project_hash(tmp_path.resolve())).glob("*/plans/feature-x.md")
    assert plan.read_text() == PLAN
    assert (tmp_path / "x.txt").read_text() == "x\n"
    bodies = [r["body"] for r in fake.requests if r["action"].endswith("GenerateContent")]
    assert "exit_plan_mode" in _declared(bodies[0]) and "run_shell_command" not in _declared(bodies[0])
    assert "run_shell_command" in _declared(bodies[2]) and "exit_plan_mode" not in _declared(bodies[2])
