"""Plan mode in one-shot runs (``-p``), gemini-cli 0.61's "Non-interactive
execution": the model writes its plan in the session's plans directory,
``exit_plan_mode`` is approved without asking and the session switches to
yolo, so the implementation runs in the same request — its next model turn
is offered the edit tools and told it is out of plan mode."""

from __future__ import annotations

import pytest

from gemini_split.testing.fake_gemini import FakeGemini
from gemini_split.tools.plans import project_hash

from .helpers import API_KEY, Sandbox, declared_tools

pytestmark = pytest.mark.timeout(60)

PLAN = "# Plan\n\n1. Write x.txt\n2. Check it\n"


def _outputs(fake, index: int = -1):
    return [p["functionResponse"]["response"] for c in fake.requests[index]["body"]["contents"]
            for p in c["parts"] if "functionResponse" in p]


def _system(request) -> str:
    return "".join(p["text"] for p in request["body"]["systemInstruction"]["parts"])


@pytest.fixture
def box(tmp_path) -> Sandbox:
    return Sandbox(tmp_path).setup()


def _plans(box: Sandbox) -> list:
    base = box.config_dir / "tmp" / project_hash(box.project.resolve())
    return sorted(base.glob("*/plans/*.md"))


def test_a_plan_is_written_in_the_plans_directory_approved_and_carried_out_in_one_request(box):
    script = [
        {"function_calls": [{"name": "write_file", "args": {"file_path": "feature-x.md", "content": PLAN}}]},
        {"function_calls": [{"name": "exit_plan_mode", "args": {"plan_filename": "feature-x.md"}}]},
        {"function_calls": [{"name": "write_file", "args": {"file_path": "x.txt", "content": "done\n"}}]},
        {"text": "implemented"},
    ]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        result = box.run(["-p", "add x", "--approval-mode", "plan"], fake=fake, GEMINI_CLI_TRUST_WORKSPACE="true")
        requests = list(fake.requests)
        wrote_plan, exited, wrote_code = _outputs(fake, 1), _outputs(fake, 2), _outputs(fake, 3)
    assert result.status == 0, result.stderr
    assert "implemented" in result.stdout
    (plan,) = _plans(box)
    assert plan.name == "feature-x.md" and plan.read_text() == PLAN
    assert "error" not in wrote_plan[-1], wrote_plan
    message = exited[-1]["output"]
    assert message.startswith("Plan approved. Switching to YOLO mode (all tool calls auto-approved).")
    assert f"The approved implementation plan is stored at: {plan}" in message
    assert "error" not in wrote_code[-1], wrote_code
    assert (box.project / "x.txt").read_text() == "done\n"
    # Planning: read-only tools, the plans' writes and exit_plan_mode; no shell.
    planning = declared_tools(requests[0])
    assert {"read_file", "write_file", "replace", "exit_plan_mode"} <= set(planning)
    assert "run_shell_command" not in planning and "enter_plan_mode" not in planning
    assert "Plan Mode" in _system(requests[0])
    # After the approval, in the same request: every tool, and no plan mode.
    implementing = declared_tools(requests[2])
    assert "run_shell_command" in implementing and "exit_plan_mode" not in implementing
    assert "Plan Mode" not in _system(requests[2])


def test_in_an_untrusted_folder_an_approved_plan_switches_to_default_not_yolo(box):
    script = [
        {"function_calls": [{"name": "write_file", "args": {"file_path": "p.md", "content": PLAN}}]},
        {"function_calls": [{"name": "exit_plan_mode", "args": {"plan_filename": "p.md"}}]},
        {"function_calls": [{"name": "write_file", "args": {"file_path": "x.txt", "content": "x"}}]},
        {"text": "ok"},
    ]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        result = box.run(["-p", "add x", "--approval-mode", "plan"], fake=fake)
        exited, wrote = _outputs(fake, 2), _outputs(fake, 3)
    assert result.status == 0, result.stderr
    assert exited[-1]["output"].startswith("Plan approved. Switching to Default mode (edits will require confirmation).")
    assert wrote[-1]["error"]["code"] == "refused"  # default mode, nobody to ask
    assert not (box.project / "x.txt").exists()


def test_plan_mode_writes_nothing_but_plans(box):
    script = [
        {"function_calls": [{"name": "write_file", "args": {"file_path": "src.py", "content": "x = 1\n"}},
                            {"name": "write_file", "args": {"file_path": "/tmp/evil.md", "content": "x"}}]},
        {"text": "ok"},
    ]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        result = box.run(["-p", "add x", "--approval-mode", "plan"], fake=fake)
        code, outside = _outputs(fake)
    assert result.status == 0, result.stderr
    assert code["error"]["message"].endswith(
        "You are in Plan Mode and cannot modify source code. You may ONLY use write_file or replace to save plans "
        "to the designated plans directory as .md files.")
    assert outside["error"]["code"] == "refused"
    assert not (box.project / "src.py").exists() and _plans(box) == []


def test_exit_plan_mode_names_a_missing_plan_in_gemini_clis_words(box):
    script = [{"function_calls": [{"name": "exit_plan_mode", "args": {"plan_filename": "nope.md"}}]}, {"text": "ok"}]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        box.run(["-p", "plan it", "--approval-mode", "plan"], fake=fake)
        (out,) = _outputs(fake)
    assert out["error"]["message"] == ("Plan file does not exist: nope.md. You must create the plan file before "
                                       "requesting approval.")


def test_enter_plan_mode_switches_a_one_shot_run_without_asking(box):
    script = [
        {"function_calls": [{"name": "enter_plan_mode", "args": {"reason": "big change"}}]},
        {"function_calls": [{"name": "run_shell_command", "args": {"command": "echo hi"}}]},
        {"text": "here is the plan"},
    ]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        result = box.run(["-p", "change it"], fake=fake)
        entered, refused = _outputs(fake, 1), _outputs(fake, 2)
        offered = declared_tools(fake.requests[0]), declared_tools(fake.requests[1])
    assert result.status == 0, result.stderr
    assert entered[-1] == {"output": "Switching to Plan mode."}
    assert refused[-1]["error"]["code"] == "refused"
    assert "enter_plan_mode" in offered[0] and "exit_plan_mode" not in offered[0]
    assert "exit_plan_mode" in offered[1] and "enter_plan_mode" not in offered[1]


def test_yolo_offers_no_planning_tools(box):
    with FakeGemini(script=[{"text": "ok"}], api_key=API_KEY) as fake:
        box.run(["-p", "hi", "--approval-mode", "yolo"], fake=fake)
        offered = declared_tools(fake.requests[0])
    assert "enter_plan_mode" not in offered and "exit_plan_mode" not in offered


def test_plan_mode_can_be_turned_off_in_settings(box):
    box.user_settings({"general": {"plan": {"enabled": False}}})
    with FakeGemini(script=[{"text": "ok"}], api_key=API_KEY) as fake:
        box.run(["-p", "hi"], fake=fake)
        offered = declared_tools(fake.requests[0])
    assert "enter_plan_mode" not in offered


def test_a_custom_plans_directory_outside_the_project_is_refused(box):
    box.user_settings({"general": {"plan": {"directory": "../elsewhere"}}})
    result = box.run(["-p", "hi"])
    assert result.status == 52
    assert "Custom plans directory '../elsewhere' resolves to" in result.stderr
    assert "which is outside the project root" in result.stderr


def test_a_custom_plans_directory_in_the_project_keeps_the_plans(box):
    box.user_settings({"general": {"plan": {"directory": ".gemini/plans"}}})
    script = [
        {"function_calls": [{"name": "write_file", "args": {"file_path": "p.md", "content": PLAN}}]},
        {"text": "ok"},
    ]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        result = box.run(["-p", "plan", "--approval-mode", "plan"], fake=fake)
    assert result.status == 0, result.stderr
    assert (box.project / ".gemini" / "plans" / "p.md").read_text() == PLAN
