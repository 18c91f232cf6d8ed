"""Issue 31 §6 for a watcher: ``attach --watch`` shows the model's
``ask_user`` question another client is asked as a line (header,
question, choices), inert and bounded."""

from __future__ import annotations

import io
import sys

import pytest
from rich.console import Console

from gemini_split.protocol import Finished, RequestStarted, ToolStarted
from gemini_split.testing.fake_gemini import FakeGemini
from gemini_split.ui.follow import Follower

from tests.e2e.test_serve_e2e import API_KEY, client, daemon
from tests.ui.repl.pty_driver import PtyProcess
from tests.ui.repl.test_repl import _environ

pytestmark = pytest.mark.timeout(90)

QUESTIONS = [{"question": "Which database would you like to use?", "header": "Database", "type": "choice",
              "options": [{"label": "PostgreSQL", "description": "A server"},
                          {"label": "SQLite", "description": "A file"}]}]


def test_a_watcher_sees_the_question_another_client_is_asked_as_a_line(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    script = [{"text": "Hello."}, {"function_calls": [{"name": "ask_user", "args": {"questions": QUESTIONS}}]},
              {"text": "Going on."}]
    with FakeGemini(script=script, api_key=API_KEY) as fake, \
            daemon(tmp_path, fake, "--state-dir", str(tmp_path / "state")) as (_, address):
        assert client(["--server", address, "-p", "hello"], cwd=work, in_process=False).returncode == 0
        watcher = PtyProcess([sys.executable, "-m", "gemini_split", "attach", "latest", "--watch", "--limit", "0",
                              "--server", address], env=_environ(tmp_path, NO_COLOR="1"), cwd=str(work),
                             rows=40, cols=110)
        try:
            watcher.expect(r"Ctrl-C leaves", timeout=30)
            other = client(["--server", address, "--resume", "latest", "-p", "set up the app"], cwd=work,
                           in_process=False)
            assert other.returncode == 0, other.stderr
            watcher.expect(r"⚙ ask_user", timeout=30)
            watcher.expect(r"\? Database: Which database would you like to use\? \(PostgreSQL / SQLite\)")
            watcher.expect(r"Going on\.", timeout=30)
        finally:
            watcher.close()


def test_a_hostile_question_is_one_inert_bounded_line():
    out = io.StringIO()
    follower = Follower(Console(file=out, width=300, force_terminal=False, color_system=None), live=False)
    question = {"question": "Really\x1b[2J?\n" + "why " * 250_000, "header": "H\x1b]0;x\x07", "type": "yesno"}
    for event in (RequestStarted(request_id="r1", prompt="go", client="phone"),
                  ToolStarted(request_id="r1", call_id="c1", tool="ask_user", parameters={"questions": [question]}),
                  Finished(request_id="r1")):
        follower.on_event(event)
    lines = out.getvalue().splitlines()
    assert lines[1] == "  ⚙ ask_user"
    assert lines[2].startswith("    ? H␛]0;x␇: Really␛[2J? why why") and lines[2].endswith("… (Yes / No)")
    assert len(lines[2]) < 300 and len(lines) == 3
