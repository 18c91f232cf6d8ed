"""Plan mode in the REPL, under a pty (gemini-cli 0.61's plan mode): ``/plan``
switches to it, ``enter_plan_mode`` asks first, the plan the model wrote in
the session's plans directory is shown for approval with gemini-cli's
choices, and the mode the user picks is the session's from the next model
turn on (the toolbar shows it). The scripted model echoes the tool results
once its script runs out (``Tool results: …``)."""

from __future__ import annotations

import pytest

from .pty_driver import ENTER, ESC
from .test_repl import PROMPT, ask, start_repl, workdir  # noqa: F401  (fixtures)

pytestmark = pytest.mark.timeout(90)

PLAN = "# Add x\n\n1. Write **x.txt**\n2. Check it\n"


def _write_plan() -> dict:
    return {"function_calls": [{"name": "write_file", "args": {"file_path": "feature-x.md", "content": PLAN}}]}


def _exit() -> dict:
    return {"function_calls": [{"name": "exit_plan_mode", "args": {"plan_filename": "feature-x.md"}}]}


def test_plan_then_an_approval_that_accepts_edits_switches_the_mode_for_the_rest_of_the_turn(start_repl, workdir):  # noqa: F811
    repl = start_repl([
        _write_plan(), _exit(),
        {"function_calls": [{"name": "write_file", "args": {"file_path": "x.txt", "content": "x\n"}}]},
        {"text": "implemented"},
    ], GEMINI_CLI_TRUST_WORKSPACE="true")  # auto_edit: only in a trusted folder
    ask(repl, "/plan")
    repl.expect(r"Switched to Plan Mode\.")
    repl.expect(r"approval plan")
    ask(repl, "add x")
    repl.expect(r"Plan: feature-x\.md", timeout=30)
    repl.expect(r"Add x")
    repl.expect(r"1 Write x\.txt")  # rendered markdown
    repl.expect(r"╰─ \S+/home/tmp/[0-9a-f]+")  # the file (gemini-cli's ~/.gemini/tmp/<project>/…)
    repl.expect(r"Approve this plan\?", timeout=30)
    repl.expect(r"1\. Yes, automatically accept edits — Approves plan and allows tools to run automatically")
    repl.expect(r"2\. Yes, manually accept edits — Approves plan but requires confirmation for each tool")
    repl.expect(r"❯ 3\. No, keep planning: type your feedback")
    repl.send("1")
    repl.expect(r"✓ plan approved: approval mode auto_edit")
    repl.expect(r"Plan approved\. Switching to Auto-Edit mode \(edits will be applied automatically\)\.")
    repl.expect(r"implemented", timeout=30)  # x.txt written without a question: auto_edit
    repl.expect(PROMPT)
    repl.expect(r"approval auto_edit")
    assert (workdir / "x.txt").read_text() == "x\n"
    assert "Allow write_file" not in repl.text
    ask(repl, "/plan")
    repl.expect(r"Switched to Plan Mode\.")
    repl.expect(r"Approved Plan: feature-x\.md")
    repl.expect(r"2 Check it")


def test_feedback_keeps_planning_and_goes_to_the_model(start_repl):  # noqa: F811
    repl = start_repl([_write_plan(), _exit()], "--approval-mode", "plan")
    ask(repl, "add x")
    repl.expect(r"❯ 3\. No, keep planning", timeout=30)
    repl.send(ENTER)
    repl.expect(r"Your feedback: ")
    ask(repl, "use sqlite")
    repl.expect(r"✗ not approved: your feedback goes to the model")
    # The tool result holds the plan's path, whose length varies: it may wrap anywhere.
    repl.expect(r"Plan\s+rejected\.\s+User\s+feedback:\s+use\s+sqlite", timeout=30)
    repl.expect(r"Revise\s+the\s+plan\s+based\s+on\s+the\s+feedback\.")
    repl.expect(PROMPT)
    repl.expect(r"approval plan")


def test_escape_dismisses_the_plan_in_gemini_clis_words(start_repl):  # noqa: F811
    repl = start_repl([_write_plan(), _exit()], "--approval-mode", "plan")
    ask(repl, "add x")
    repl.expect(r"Approve this plan\?", timeout=30)
    repl.send(ESC)
    repl.expect(r"✗ dismissed: the plan is not approved; still in plan mode")
    repl.expect(r"User cancelled the plan approval dialog\. The plan was not approved and you are still in "
                r"Plan Mode\.")


def test_enter_plan_mode_asks_first_and_then_offers_only_planning(start_repl):  # noqa: F811
    repl = start_repl([
        {"function_calls": [{"name": "enter_plan_mode", "args": {"reason": "a big change"}}]},
        {"function_calls": [{"name": "run_shell_command", "args": {"command": "echo hi"}}]},
        {"text": "planned"},
    ])
    ask(repl, "change everything")
    repl.expect(r"enter_plan_mode", timeout=30)
    repl.expect(r"a big change")
    repl.expect(r"This will restrict the agent to read-only tools to allow for safe planning\.")
    repl.send("1")
    repl.expect(r"Switching to Plan mode\.")
    repl.expect(r"not allowed by the approval policy")  # the shell, in plan mode
    repl.expect(r"planned", timeout=30)
    repl.expect(PROMPT)
    repl.expect(r"approval plan")


def test_plan_with_a_goal_sends_it_in_plan_mode(start_repl):  # noqa: F811
    repl = start_repl([])
    ask(repl, "/plan don't touch the parser")
    repl.expect(r"Switched to Plan Mode\.")
    repl.expect(r"Echo: don't touch the parser", timeout=30)
    repl.expect(PROMPT)
    ask(repl, "/plan copy")
    repl.expect(r"No approved plan found to copy\.")
