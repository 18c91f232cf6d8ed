"""The REPL finds earlier conversations again: /sessions, /resume with Tab,
--resume, the conversation redrawn from the session's history."""

from __future__ import annotations

import re

import pytest

from .pty_driver import ENTER, TAB
from .test_repl import PROMPT, ask, start_repl, workdir  # noqa: F401  (fixtures)


@pytest.mark.timeout(60)
def test_sessions_lists_and_resume_redraws_an_earlier_conversation(start_repl):
    repl = start_repl([{"text": "The plan has three steps."}, {"text": "Noted."}])
    ask(repl, "make a plan")
    repl.expect(r"The plan has three steps\.")
    repl.expect(PROMPT)
    ask(repl, "/clear")
    repl.expect(r"New conversation")
    repl.expect(PROMPT)
    ask(repl, "/sessions")
    earlier = repl.expect(r"(s-[0-9a-f]{16})\s+\d{4}-\d\d-\d\d \d\d:\d\d\s+1\s+make a plan").group(1)
    repl.expect(PROMPT)
    repl.type("/resume s-")
    repl.send(TAB)
    repl.expect(earlier[2:])  # Tab completed the id
    repl.send(ENTER)
    repl.expect(rf"Resumed session {earlier}")
    repl.expect(r"» make a plan")
    repl.expect(r"The plan has three steps\.")
    repl.expect(PROMPT)
    ask(repl, "and now?")
    repl.expect(r"Noted\.")


@pytest.mark.timeout(60)
def test_resume_latest_at_start_continues_the_last_conversation(start_repl, tmp_path):
    first = start_repl([{"text": "Remember: blue."}])
    ask(first, "remember a colour")
    first.expect(r"Remember: blue\.")
    first.expect(PROMPT)
    first.close()
    again = start_repl([], "--resume")  # waits for the banner and the first prompt
    shown = again.text  # the conversation is redrawn before that prompt
    assert re.search(r"Resumed session s-[0-9a-f]{16} \(2 messages\):\s+» remember a colour\s+Remember: blue\.", shown)
    ask(again, "which one?")
    again.expect(r"Echo: which one\?")
