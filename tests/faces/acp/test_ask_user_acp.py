"""Issue 31 §6 through a real editor (the ACP Python SDK in its own
process): the model's ``ask_user`` questions are the editor's own UI — one
form when it offers form elicitation (ACP's ``elicitation/create``), else a
``session/request_permission`` per question with the choices as options —
and the answers reach the model in gemini-cli's form."""

from __future__ import annotations

import json

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from .helpers import API_KEY, agent_env, run_editor

pytestmark = pytest.mark.timeout(60)

DB = {"question": "Which database would you like to use?", "header": "Database", "type": "choice",
      "options": [{"label": "PostgreSQL", "description": "A server"}, {"label": "SQLite", "description": "A file"}]}
NAME = {"question": "Name of the project?", "header": "Name", "type": "text", "placeholder": "my-app"}
DEPLOY = {"question": "Deploy now?", "header": "Deploy", "type": "yesno"}
STEPS = [{"do": "initialize"}, {"do": "new"}, {"do": "prompt", "text": "set it up"}]


def _script(*questions: dict) -> list[dict]:
    return [{"function_calls": [{"name": "ask_user", "args": {"questions": list(questions)}}]}, {"text": "ok"}]


def _answer(fake) -> dict:
    (response,) = [p["functionResponse"]["response"] for r in fake.requests
                   for p in r["body"]["contents"][-1].get("parts", []) if "functionResponse" in p]
    return response


def test_an_editor_with_form_elicitation_gets_one_form_and_the_model_its_answers(tmp_path):
    with FakeGemini(script=_script(DB, NAME, DEPLOY), api_key=API_KEY) as fake:
        seen = run_editor({"cwd": str(tmp_path), "env": agent_env(fake, tmp_path / "home"),
                           "capabilities": {"elicitation": True},
                           "elicit": {"action": "accept", "content": {
                               "q0": "SQLite", "q1": "shop", "q2": "Nope", "q2_other": "after lunch"}},
                           "steps": STEPS}, tmp_path)
    assert seen["results"][2] == {"stopReason": "end_turn"}
    (form,) = [c for c in seen["calls"] if c["method"] == "elicitation/create"]
    schema = form["mode"]["requestedSchema"]["properties"]
    assert [o["const"] for o in schema["q0"]["oneOf"]] == ["PostgreSQL", "SQLite"]
    assert schema["q0"]["title"] == "Database" and schema["q1"]["type"] == "string"
    assert [o["const"] for o in schema["q2"]["oneOf"]] == ["Yes", "No"]
    assert form["mode"]["toolCallId"]
    # "Nope" was not offered: only the typed "other" answers the third question.
    assert _answer(fake) == {"output": '{"answers":{"0":"SQLite","1":"shop","2":"after lunch"}}'}


def test_a_declined_form_is_a_dismissal(tmp_path):
    with FakeGemini(script=_script(DB), api_key=API_KEY) as fake:
        run_editor({"cwd": str(tmp_path), "env": agent_env(fake, tmp_path / "home"),
                    "capabilities": {"elicitation": True}, "elicit": {"action": "decline"}, "steps": STEPS}, tmp_path)
    assert _answer(fake) == {"output": "User dismissed ask_user dialog without answering."}


def test_without_elicitation_a_choice_is_a_permission_question_with_the_choices(tmp_path):
    with FakeGemini(script=_script(DB, DEPLOY), api_key=API_KEY) as fake:
        seen = run_editor({"cwd": str(tmp_path), "env": agent_env(fake, tmp_path / "home"),
                           "permission": "answer-1", "steps": STEPS}, tmp_path)
    asks = [c for c in seen["calls"] if c["method"] == "session/request_permission"]
    assert [[o["name"] for o in a["options"]] for a in asks] == [["PostgreSQL", "SQLite", "Dismiss"],
                                                                 ["Yes", "No", "Dismiss"]]
    assert asks[0]["toolCall"]["title"] == "Database: Which database would you like to use?"
    assert _answer(fake) == {"output": '{"answers":{"0":"SQLite","1":"No"}}'}


def test_without_elicitation_a_text_question_is_not_asked_and_the_model_is_told_why(tmp_path):
    with FakeGemini(script=_script(NAME), api_key=API_KEY) as fake:
        seen = run_editor({"cwd": str(tmp_path), "env": agent_env(fake, tmp_path / "home"), "steps": STEPS},
                          tmp_path)
    assert not [c for c in seen["calls"] if c["method"] == "session/request_permission"]
    error = _answer(fake)["error"]
    assert error["code"] == "unsupported" and "ask the question in your reply" in error["hint"]


def test_a_hostile_question_reaches_the_editor_bounded(tmp_path):
    huge = dict(DB, question="why " * 250_000)
    with FakeGemini(script=_script(huge), api_key=API_KEY) as fake:
        seen = run_editor({"cwd": str(tmp_path), "env": agent_env(fake, tmp_path / "home"),
                           "capabilities": {"elicitation": True}, "elicit": {"action": "cancel"}, "steps": STEPS},
                          tmp_path)
    (form,) = [c for c in seen["calls"] if c["method"] == "elicitation/create"]
    assert len(json.dumps(form)) < 10_000
    assert _answer(fake) == {"output": "User dismissed ask_user dialog without answering."}
