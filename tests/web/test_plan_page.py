"""Plan mode in the browser page against a real ``serve --server-tools
--web`` and the fake Gemini server, in headless chromium: the model's
``enter_plan_mode`` is an approval like any other, its plan is shown (as
Markdown, inert) with gemini-cli's choices, and the choice is the mode the
rest of the turn runs in; feedback keeps the model planning. ``ask_user``'s
questions are answered on the page too."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from tests.web.conftest import screenshot, signed_in_page
from tests.web.test_page import _new_session_and_prompt, _script

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

PLAN = "# Add x\n\n1. Write **x.txt**\n2. Check it\n\n<script>alert(1)</script>\n"
ENTER = {"function_calls": [{"name": "enter_plan_mode", "args": {"reason": "a new file"}}]}
WRITE_PLAN = {"function_calls": [{"name": "write_file", "args": {"file_path": "feature-x.md", "content": PLAN}}]}
EXIT = {"function_calls": [{"name": "exit_plan_mode", "args": {"plan_filename": "feature-x.md"}}]}
WRITE_X = {"function_calls": [{"name": "write_file", "args": {"file_path": "x.txt", "content": "x\n"}}]}


def _answers(fake, name: str) -> list[dict]:
    return [p["functionResponse"]["response"] for r in fake.requests if r["action"].endswith("GenerateContent")
            for p in r["body"]["contents"][-1].get("parts", []) if p.get("functionResponse", {}).get("name") == name]


def test_the_browser_enters_plan_mode_approves_the_plan_and_the_turn_implements_it(browser, server, fake):
    _script(fake, [ENTER, WRITE_PLAN, EXIT, WRITE_X, {"text": "implemented"}])
    context, page, watch = signed_in_page(browser, server)
    _new_session_and_prompt(page, "add x")
    card = page.wait_for_selector(".approval")
    assert "enter_plan_mode" in card.inner_text()
    assert "This will restrict the agent to read-only tools to allow for safe planning." in card.inner_text()
    page.get_by_role("button", name="Yes, once", exact=True).click()
    plan = page.wait_for_selector(".approval.plan")
    assert "Plan: feature-x.md" in plan.inner_text()
    assert "Write x.txt" in plan.inner_text() and "<script>alert(1)</script>" in plan.inner_text()
    for label in ("Yes, automatically accept edits", "Yes, manually accept edits", "No, keep planning", "Dismiss"):
        assert page.get_by_role("button", name=label, exact=True).is_visible()
    screenshot(page, "plan-approval-desktop")
    page.get_by_role("button", name="Yes, automatically accept edits", exact=True).click()
    expect(page.locator("#log")).to_contain_text("implemented", timeout=30000)
    page.wait_for_selector(".turn .end")
    expect(page.locator("#log")).to_contain_text("Approval mode: plan (by enter_plan_mode)")
    expect(page.locator("#log")).to_contain_text("Approval mode: auto_edit (by exit_plan_mode)")
    assert page.locator(".approval").count() == 0  # x.txt: written without asking (auto_edit)
    (written,) = [p for p in server.workspaces.rglob("x.txt")]
    assert written.read_text() == "x\n"
    assert not list(server.workspaces.rglob("feature-x.md"))[0].is_relative_to(written.parent)
    (answer,) = _answers(fake, "exit_plan_mode")
    assert answer["output"].startswith("Plan approved. Switching to Auto-Edit mode")
    assert not watch.dialogs and not watch.foreign and not watch.console_errors
    context.close()


def test_feedback_from_the_browser_keeps_the_model_planning(browser, server, fake):
    _script(fake, [ENTER, WRITE_PLAN, EXIT, {"text": "revising"}])
    context, page, watch = signed_in_page(browser, server)
    _new_session_and_prompt(page, "add x")
    page.wait_for_selector(".approval")
    page.get_by_role("button", name="Yes, once", exact=True).click()
    page.wait_for_selector(".approval.plan")
    page.fill(".approval.plan input", "use a y.txt instead")
    page.keyboard.press("Enter")
    expect(page.locator("#log")).to_contain_text("revising", timeout=30000)
    (answer,) = _answers(fake, "exit_plan_mode")
    assert answer["output"].startswith("Plan rejected. User feedback: use a y.txt instead")
    assert not list(server.workspaces.rglob("x.txt"))
    assert not watch.dialogs and not watch.foreign and not watch.console_errors
    context.close()


def test_the_models_questions_are_answered_on_the_page(browser, server, fake):
    ask = {"function_calls": [{"name": "ask_user", "args": {"questions": [
        {"question": "Which database?", "header": "Database", "type": "choice",
         "options": [{"label": "PostgreSQL", "description": "A server"}, {"label": "SQLite", "description": "A file"}]},
        {"question": "Name?", "header": "Name", "type": "text"}]}}]}
    _script(fake, [ask, {"text": "noted"}])
    context, page, watch = signed_in_page(browser, server)
    _new_session_and_prompt(page, "set it up")
    page.wait_for_selector(".approval.questions")
    page.get_by_label("SQLite").check()
    page.get_by_label("Name: answer").fill("shop")
    page.get_by_role("button", name="Answer", exact=True).click()
    expect(page.locator("#log")).to_contain_text("noted", timeout=30000)
    (answer,) = _answers(fake, "ask_user")
    assert json.loads(answer["output"]) == {"answers": {"0": "SQLite", "1": "shop"}}
    assert not watch.dialogs and not watch.foreign and not watch.console_errors
    context.close()
