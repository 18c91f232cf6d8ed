"""write_todos, save_memory and enter_plan_mode, called by the model through
the real CLI, with gemini-cli's parameters and answers."""

from __future__ import annotations

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from .helpers import API_KEY, Sandbox, declared_tools

pytestmark = pytest.mark.timeout(60)


def _outputs(fake):
    return [p["functionResponse"]["response"] for c in fake.requests[-1]["body"]["contents"]
            for p in c["parts"] if "functionResponse" in p]


@pytest.fixture
def box(tmp_path) -> Sandbox:
    return Sandbox(tmp_path).setup()


def test_write_todos_answers_as_gemini_cli_does(box):
    calls = {"function_calls": [{"name": "write_todos", "args": {"todos": [
        {"description": "write the test", "status": "completed"},
        {"description": "fix the bug", "status": "in_progress"}]}}]}
    with FakeGemini(script=[calls, {"text": "ok"}], api_key=API_KEY) as fake:
        assert box.run(["-p", "plan"], fake=fake).status == 0
        (out,) = _outputs(fake)
    assert out == {"output": "Successfully updated the todo list. The current list is now:\n"
                             "1. [completed] write the test\n2. [in_progress] fix the bug"}


def test_write_todos_refuses_two_items_in_progress(box):
    calls = {"function_calls": [{"name": "write_todos", "args": {"todos": [
        {"description": "a", "status": "in_progress"}, {"description": "b", "status": "in_progress"}]}}]}
    with FakeGemini(script=[calls, {"text": "ok"}], api_key=API_KEY) as fake:
        box.run(["-p", "plan"], fake=fake)
        (out,) = _outputs(fake)
    assert out["error"]["code"] == "invalid_arguments"


def test_save_memory_appends_under_gemini_clis_heading_and_is_read_next_time(box):
    memory = box.config_dir / "GEMINI.md"
    memory.write_text("# Me\n\nI like tea.\n")
    call = {"function_calls": [{"name": "save_memory", "args": {"fact": "My favourite editor is vim."}}]}
    with FakeGemini(script=[call, {"text": "ok"}, {"text": "again"}], api_key=API_KEY) as fake:
        refused = box.run(["-p", "remember"], fake=fake)  # default mode: an edit, nobody to ask
        assert refused.status == 0 and "vim" not in memory.read_text()
    with FakeGemini(script=[call, {"text": "ok"}, {"text": "again"}], api_key=API_KEY) as fake:
        assert box.run(["-p", "remember", "--approval-mode", "auto_edit"], fake=fake).status == 0
        (out,) = _outputs(fake)
        assert out == {"output": 'Okay, I\'ve remembered that: "My favourite editor is vim."'}
        assert box.run(["-p", "what editor?"], fake=fake).status == 0
        system = "".join(p["text"] for p in fake.requests[-1]["body"]["systemInstruction"]["parts"])
    assert memory.read_text() == "# Me\n\nI like tea.\n\n## Gemini Added Memories\n- My favourite editor is vim.\n"
    assert "- My favourite editor is vim." in system


def test_enter_plan_mode_stops_later_edits(box):
    calls = [
        {"function_calls": [{"name": "enter_plan_mode", "args": {"reason": "big change"}}]},
        {"function_calls": [{"name": "write_file", "args": {"file_path": "x.txt", "content": "x"}}]},
        {"text": "here is the plan"},
    ]
    with FakeGemini(script=calls, api_key=API_KEY) as fake:
        result = box.run(["-p", "change it", "--approval-mode", "auto_edit"], fake=fake,
                         GEMINI_CLI_TRUST_WORKSPACE="true")
        outputs = _outputs(fake)
        offered = declared_tools(fake.requests[0])
    assert result.status == 0, result.stderr
    assert "enter_plan_mode" in offered and "write_todos" in offered
    assert outputs[0]["output"] == "Switching to Plan mode."
    assert outputs[1]["error"]["code"] == "refused" and "Plan Mode" in outputs[1]["error"]["message"]
    assert not (box.project / "x.txt").exists()
