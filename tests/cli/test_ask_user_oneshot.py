"""Issue 31 §6 in one-shot mode: nobody can answer, so ``ask_user`` is not
offered (as gemini-cli leaves it out of non-interactive runs), and a model
that calls it anyway reads gemini-cli's non-interactive refusal and goes on
to a final answer."""

from __future__ import annotations

import json

from gemini_split.testing.fake_gemini import FakeGemini

from .test_oneshot_cli import _function_responses, run_cli

ASK = {"function_calls": [{"name": "ask_user", "args": {"questions": [
    {"question": "Which database?", "header": "Database", "type": "choice",
     "options": [{"label": "PostgreSQL", "description": ""}, {"label": "SQLite", "description": ""}]}]}}]}
NO_USER = 'Tool execution for "Ask User" requires user confirmation, which is not supported in non-interactive mode.'


def test_one_shot_does_not_offer_ask_user_and_a_call_anyway_gets_no_user_present(tmp_path):
    with FakeGemini(script=[ASK, {"text": "Assuming PostgreSQL."}], api_key="test-key-123") as fake:
        done = run_cli(["-p", "set up the app", "-o", "stream-json"], cwd=tmp_path, fake=fake)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    (result,) = [e for e in events if e["type"] == "tool_result"]
    assert result["status"] == "error" and result["output"] == NO_USER
    assert events[-2]["content"] == "Assuming PostgreSQL."
    (response,) = _function_responses(fake)[:1]
    assert response["response"]["error"]["message"] == NO_USER
    assert response["response"]["error"]["code"] == "no_user_present"
    first = fake.requests[0]["body"]
    assert "ask_user" not in [d["name"] for t in first.get("tools", []) for d in t.get("functionDeclarations", [])]
