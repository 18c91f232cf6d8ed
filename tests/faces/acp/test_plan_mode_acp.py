"""Plan mode through a real editor (the ACP Python SDK in its own process):
``session/set_mode`` to ``plan`` (gemini-cli's "Plan" mode: "Read-only
mode"), the plan the model wrote sent as ACP's ``plan`` update and asked
about with ``session/request_permission`` — the plan as the call's
content, gemini-cli's answers as the options — and the mode the editor
picks told back with ``current_mode_update``."""

from __future__ import annotations

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from .helpers import API_KEY, agent_env, run_editor

pytestmark = pytest.mark.timeout(60)

PLAN = "# Add x\n\n1. Write x.txt\n2. Check it\n"
SCRIPT = [
    {"function_calls": [{"name": "write_file", "args": {"file_path": "feature-x.md", "content": PLAN}}]},
    {"function_calls": [{"name": "exit_plan_mode", "args": {"plan_filename": "feature-x.md"}}]},
    {"function_calls": [{"name": "write_file", "args": {"file_path": "x.txt", "content": "x\n"}}]},
    {"text": "implemented"},
]
STEPS = [{"do": "initialize"}, {"do": "new"}, {"do": "set_mode", "mode": "plan"}, {"do": "prompt", "text": "add x"}]


def _responses(fake, name: str) -> list[dict]:
    return [p["functionResponse"]["response"] for r in fake.requests
            for p in r["body"]["contents"][-1].get("parts", []) if p.get("functionResponse", {}).get("name") == name]


def test_the_editor_sees_the_plan_approves_it_and_hears_the_new_mode(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    with FakeGemini(script=SCRIPT, api_key=API_KEY) as fake:
        seen = run_editor({"cwd": str(project), "env": agent_env(fake, tmp_path / "home",
                                                                 GEMINI_CLI_TRUST_WORKSPACE="true"),
                           "permission": "autoEdit", "steps": STEPS}, tmp_path)
        (answer,) = _responses(fake, "exit_plan_mode")
    assert "plan" in [m["id"] for m in seen["results"][1]["modes"]["availableModes"]]
    assert seen["results"][3] == {"stopReason": "end_turn"}
    (plan,) = [u for u in seen["updates"] if u["sessionUpdate"] == "plan"]
    assert [e["content"] for e in plan["entries"]] == ["Write x.txt", "Check it"]
    assert {e["status"] for e in plan["entries"]} == {"pending"}
    (asked,) = [c for c in seen["calls"] if c["method"] == "session/request_permission"]
    assert [o["name"] for o in asked["options"]] == ["Yes, automatically accept edits", "Yes, manually accept edits",
                                                     "No, keep planning"]
    assert asked["toolCall"]["title"] == "Plan Approval: feature-x.md"
    assert asked["toolCall"]["content"][0]["content"]["text"] == PLAN
    assert answer["output"].startswith("Plan approved. Switching to Auto-Edit mode (edits will be applied "
                                       "automatically).")
    modes = [u["currentModeId"] for u in seen["updates"] if u["sessionUpdate"] == "current_mode_update"]
    assert modes == ["plan", "autoEdit"]
    assert (project / "x.txt").read_text() == "x\n"  # auto_edit: written without another question


def test_rejecting_the_plan_keeps_planning(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    with FakeGemini(script=SCRIPT[:2] + [{"text": "what should change?"}], api_key=API_KEY) as fake:
        seen = run_editor({"cwd": str(project), "env": agent_env(fake, tmp_path / "home"),
                           "permission": "cancel", "steps": STEPS}, tmp_path)
        (answer,) = _responses(fake, "exit_plan_mode")
    assert answer["output"].startswith("Plan rejected. No feedback provided.")
    modes = [u["currentModeId"] for u in seen["updates"] if u["sessionUpdate"] == "current_mode_update"]
    assert modes == ["plan"]
    assert not (project / "x.txt").exists()
