"""Issue 45 item 2: leaving the REPL (Ctrl-D, ``/quit``, ``/exit``) says what
gemini-cli's exit summary says: the session's id, what it cost in this REPL
(turns, tokens in and out, wall time) and the exact command that resumes it
— with ``--server`` when the session is on a server — run here to prove it."""

from __future__ import annotations

import json
import shlex
import sys

import pytest

from .pty_driver import CTRL_D, PtyProcess
from .test_repl import PROMPT, _environ, ask, start_repl, workdir  # noqa: F401  (fixtures)

pytestmark = pytest.mark.timeout(60)

GOODBYE = r"Agent powering down\. Goodbye!"


def _resume_words(repl: PtyProcess) -> list[str]:
    """The resume command the summary printed, as a shell would split it."""
    line = repl.expect(r"To resume this session: (gemini-split --resume [^\r\n]+)").group(1)
    return shlex.split(line)


def test_ctrl_d_says_the_session_what_it_cost_and_the_command_that_resumes_it(start_repl, tmp_path, workdir):
    repl = start_repl([{"text": "First answer."}])
    ask(repl, "hello")
    repl.expect(r"First answer\.")
    repl.expect(PROMPT)
    repl.send(CTRL_D)
    repl.expect(GOODBYE)
    session = repl.expect(r"session\s+(s-\S+)").group(1)
    repl.expect(r"turns\s+1\b")
    repl.expect(r"tokens\s+\d[\d,]* in · \d[\d,]* out")
    repl.expect(r"time\s+0 min \d+ s")
    words = _resume_words(repl)
    assert repl.wait() == 0
    assert words == ["gemini-split", "--resume", session]  # embedded: no --server

    # The command does what it says: the conversation goes on in that
    # session (an id no session has is refused).
    resumed = _run(words, tmp_path, workdir, "and again")
    assert (resumed["session_id"], resumed["response"]) == (session, "Echo: and again")


@pytest.mark.parametrize("leave", ["/quit", "/exit"])
def test_a_session_with_nothing_sent_says_goodbye_and_nothing_to_resume(start_repl, leave):
    repl = start_repl([])
    ask(repl, leave)
    repl.expect(GOODBYE + r" Nothing was sent, so no session was saved\.")
    assert repl.wait() == 0
    assert "To resume" not in repl.text


def test_quit_delete_says_the_session_was_deleted_and_offers_no_resume(start_repl):
    repl = start_repl([{"text": "Noted."}])
    ask(repl, "remember this")
    repl.expect(r"Noted\.")
    repl.expect(PROMPT)
    ask(repl, "/quit --delete")
    session = repl.expect(r"Deleted session (s-\S+)\.").group(1)
    repl.expect(GOODBYE)
    repl.expect(rf"session\s+{session} \(deleted\)")
    repl.expect(r"turns\s+1\b")
    assert repl.wait() == 0
    assert "To resume" not in repl.text


@pytest.mark.timeout(90)
def test_a_session_on_serve_is_resumed_with_the_server_it_used(tmp_path, workdir):
    from gemini_split.testing.fake_gemini import FakeGemini

    from tests.e2e.test_serve_e2e import API_KEY, client, daemon

    with FakeGemini(script=[{"text": "Remote answer."}, {"text": "Again, remotely."}], api_key=API_KEY) as fake, \
            daemon(tmp_path, fake) as (_, address):
        repl = PtyProcess([sys.executable, "-m", "gemini_split", "--server", address],
                          env=_environ(tmp_path, NO_COLOR="1"), cwd=str(workdir))
        try:
            repl.expect(r"/help for commands", timeout=30)
            repl.expect(PROMPT)
            ask(repl, "hello server")
            repl.expect(r"Remote answer\.")
            repl.expect(PROMPT)
            ask(repl, "/quit")
            repl.expect(GOODBYE)
            session = repl.expect(r"session\s+(s-\S+)").group(1)
            words = _resume_words(repl)
            assert repl.wait() == 0
        finally:
            repl.close()
        assert words == ["gemini-split", "--resume", session, "--server", address]
        resumed = client([*words[1:], "-p", "and again", "-o", "json"], cwd=workdir,
                         env_extra={"HOME": str(tmp_path), "GEMINI_SPLIT_HOME": str(tmp_path / "home")})
    assert resumed.returncode == 0, resumed.stderr
    out = json.loads(resumed.stdout)
    assert (out["session_id"], out["response"]) == (session, "Again, remotely.")


def _run(words: list[str], tmp_path, workdir, prompt: str) -> dict:
    """The printed command with a one-shot prompt, as this test's user, on
    a scripted model that echoes."""
    from tests.inprocess import cli

    echo = tmp_path / "echo.json"
    echo.write_text("[]")
    result = cli([*words[1:], "-m", f"scripted:{echo}", "-p", prompt, "-o", "json"],
                 environ=_environ(tmp_path), cwd=workdir)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)
