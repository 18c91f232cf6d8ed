"""Issue 31 §6 against a real ``serve --server-tools`` process with
``--tools server``: the server runs the model's ``ask_user`` call, the
REPL under a pty shows the question as a menu, and the pick reaches the
model (the fake Gemini server's requests are the judge). A one-shot client
is nobody to ask: the model reads gemini-cli's non-interactive refusal."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from tests.e2e.test_serve_e2e import API_KEY, daemon
from tests.ui.repl.pty_driver import DOWN, ENTER, PtyProcess
from tests.ui.repl.test_repl import PROMPT, _environ
from .helpers import unix_listener

pytestmark = pytest.mark.timeout(120)

ASK = {"function_calls": [{"name": "ask_user", "args": {"questions": [
    {"question": "Which database would you like to use?", "header": "Database", "type": "choice",
     "options": [{"label": "PostgreSQL", "description": "A server"}, {"label": "SQLite", "description": "A file"}]}]}}]}


def _answers(fake: FakeGemini) -> list[str]:
    """What the model was sent back for its ask_user calls (each request's
    new turn: the history repeats the earlier ones)."""
    out = []
    for request in fake.requests:
        for content in request["body"].get("contents", [])[-1:]:
            for part in content.get("parts", []):
                response = part.get("functionResponse")
                if response and response.get("name") == "ask_user":
                    out.append(json.dumps(response["response"]))
    return out


def test_the_repl_answers_a_question_the_server_asks(tmp_path):
    options = ("--workspace-root", str(tmp_path / "workspaces"), "--sandbox", "none", "--server-tools")
    client_dir = tmp_path / "client"
    client_dir.mkdir()
    with FakeGemini(script=[ASK, {"text": "Using SQLite."}], api_key=API_KEY) as fake, unix_listener() as listen, \
            daemon(tmp_path, fake, *listen, *options) as (_proc, address):
        repl = PtyProcess([sys.executable, "-m", "gemini_split", "--server", address, "--tools", "server"],
                          env=_environ(tmp_path, NO_COLOR="1"), cwd=str(client_dir), rows=40, cols=110)
        try:
            repl.expect(PROMPT, timeout=30)
            repl.type("set up the app")
            repl.send(ENTER)
            repl.expect(r"\? Database", timeout=30)
            repl.expect(r"❯ 1\. PostgreSQL — A server")
            repl.send(DOWN)
            repl.send(ENTER)
            repl.expect(r"Database → SQLite")
            repl.expect(r"Using SQLite\.", timeout=30)
            repl.expect(PROMPT)
        finally:
            repl.close()
    assert _answers(fake) == ['{"output": "{\\"answers\\":{\\"0\\":\\"SQLite\\"}}"}']


def test_a_one_shot_client_is_nobody_to_ask_and_the_model_goes_on(tmp_path):
    options = ("--workspace-root", str(tmp_path / "workspaces"), "--sandbox", "none", "--server-tools")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI", "GOOGLE"))}
    env.update(HOME=str(tmp_path), GEMINI_SPLIT_HOME=str(tmp_path / "home"))
    with FakeGemini(script=[ASK, {"text": "Going on with PostgreSQL."}], api_key=API_KEY) as fake, \
            unix_listener() as listen, daemon(tmp_path, fake, *listen, *options) as (_proc, address):
        done = subprocess.run([sys.executable, "-m", "gemini_split", "--server", address, "--tools", "server",
                               "-p", "set up the app"], env=env, cwd=tmp_path, capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("Going on with PostgreSQL.\n")
    [answer] = _answers(fake)
    assert "requires user confirmation, which is not supported in non-interactive mode." in answer
    body = [r["body"] for r in fake.requests if r["action"].endswith("GenerateContent")][0]
    assert "ask_user" not in [d["name"] for t in body.get("tools", []) for d in t.get("functionDeclarations", [])]


def test_a_question_answered_by_another_client_leaves_no_menu_behind(tmp_path):
    """Two REPLs on one session (the second attached): both are asked; the
    second answers; the first one's menu goes away, and what is typed there
    afterwards is a prompt of its own, never an answer (issue 34.1's defect,
    for questions)."""
    options = ("--workspace-root", str(tmp_path / "workspaces"), "--sandbox", "none", "--server-tools")
    client_dir = tmp_path / "client"
    client_dir.mkdir()
    with FakeGemini(script=[ASK, {"text": "Using SQLite."}], api_key=API_KEY) as fake, unix_listener() as listen, \
            daemon(tmp_path, fake, *listen, *options) as (_proc, address):
        first = PtyProcess([sys.executable, "-m", "gemini_split", "--server", address, "--tools", "server"],
                           env=_environ(tmp_path, NO_COLOR="1"), cwd=str(client_dir), rows=40, cols=110)
        second = None
        try:
            first.expect(PROMPT, timeout=30)
            first.type("set up the app")
            first.send(ENTER)
            first.expect(r"❯ 1\. PostgreSQL", timeout=30)
            second = PtyProcess([sys.executable, "-m", "gemini_split", "attach", "latest", "--server", address],
                                env=_environ(tmp_path, NO_COLOR="1"), cwd=str(client_dir), rows=40, cols=110)
            second.expect(r"❯ 1\. PostgreSQL", timeout=30)
            second.send(DOWN)
            second.send(ENTER)
            first.expect(r"Using SQLite\.", timeout=30)
            first.expect(PROMPT)
            first.drain(1.0)
            first.type("2")
            first.send(ENTER)
            first.expect(r"Echo: 2|2", timeout=30)
            first.drain(1.0)
        finally:
            first.close()
            if second is not None:
                second.close()
    assert _answers(fake) == ['{"output": "{\\"answers\\":{\\"0\\":\\"SQLite\\"}}"}']
    prompts = [p.get("text") for r in fake.requests for c in r["body"]["contents"][-1:] if c.get("role") == "user"
               for p in c.get("parts", []) if "text" in p]
    assert "2" in prompts and "1" not in prompts  # the digit typed was a prompt; nothing else became one
