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


def _resume_in(tmp_path, directory, script, session: str, *keys: str) -> tuple[str, int]:
    """``gemini-split --resume SESSION`` started under a pty in ``directory``;
    ``keys`` answer what it asks. Returns what it showed and its status."""
    import json
    import sys

    from .pty_driver import PtyProcess
    from .test_repl import _environ

    path = tmp_path / "resume-script.json"
    path.write_text(json.dumps(script))
    proc = PtyProcess([sys.executable, "-m", "gemini_split", "-m", f"scripted:{path}", "--resume", session],
                      env=_environ(tmp_path, NO_COLOR="1"), cwd=str(directory))
    try:
        proc.expect(r"This session was started in another directory", timeout=15)
        proc.expect(r"2\. Cancel")
        for key in keys:
            proc.send(key)
        if keys[-1] == "2":
            proc.expect(r"Not resumed here")
            return proc.text, proc.wait()
        proc.expect(PROMPT)
        ask(proc, "/quit")
        return proc.text, proc.wait()
    finally:
        proc.close()


@pytest.mark.timeout(90)
def test_resuming_a_session_started_in_another_project_asks_before_its_tools_run_here(start_repl, tmp_path, workdir):
    first = start_repl([{"text": "Planned."}])
    session = re.search(r"session\s+(s-[0-9a-f]+)", first.text).group(1)
    ask(first, "plan the refactor")
    first.expect(r"Planned\.")
    first.expect(PROMPT)
    first.close()
    other = tmp_path / "other-project"
    other.mkdir()
    shown, status = _resume_in(tmp_path, other, [], session, "2")
    said = f"This session was started in another directory, {workdir}; its tools would now run here, in {other}."
    assert "".join(said.split()) in "".join(shown.split())  # (wrapped at the terminal's width)
    assert re.search(r"Notresumedhere:rungemini-split--resumes-[0-9a-f]{16}in" + re.escape("".join(str(workdir).split())),
                     "".join(shown.split()))
    assert status == 0
    shown, status = _resume_in(tmp_path, other, [], session, "1")
    assert status == 0 and "Not resumed here" not in shown


@pytest.mark.timeout(90)
def test_resume_latest_and_numbers_count_this_projects_sessions_only(start_repl, tmp_path, workdir):
    first = start_repl([{"text": "Planned."}])
    ask(first, "plan the refactor")
    first.expect(r"Planned\.")
    first.expect(PROMPT)
    first.close()
    other = tmp_path / "other-project"
    other.mkdir()
    import json
    import sys

    from .pty_driver import PtyProcess
    from .test_repl import _environ

    path = tmp_path / "other-script.json"
    path.write_text(json.dumps([]))
    proc = PtyProcess([sys.executable, "-m", "gemini_split", "-m", f"scripted:{path}", "--resume"],
                      env=_environ(tmp_path, NO_COLOR="1"), cwd=str(other))
    try:
        proc.expect(r"No previous sessions found for this project\.", timeout=20)
        proc.expect(PROMPT)
        ask(proc, "hello here")
        proc.expect(r"Echo: hello here")  # a new session: the other project's is not carried
        proc.expect(PROMPT)
        ask(proc, "/resume 2")
        proc.expect(r"Invalid session identifier \"2\"")
        proc.expect(PROMPT)
        ask(proc, "/resume 1")
        proc.expect(r"Resumed session s-[0-9a-f]{16} \(\d+ messages\)")
        proc.expect(r"» hello here")
        proc.expect(PROMPT)
    finally:
        proc.close()
    assert "plan the refactor" not in proc.text


@pytest.mark.timeout(90)
def test_resume_without_an_id_lists_this_projects_sessions_to_search_and_pick(start_repl):
    from .pty_driver import DOWN, ESC

    repl = start_repl([{"text": "Blue it is."}, {"text": "Tea, then."}, {"text": "Noted."}, {"text": "Again."}])
    for prompt in ("pick a colour", "pick a drink"):
        ask(repl, prompt)
        repl.expect(r"\.")
        repl.expect(PROMPT)
        ask(repl, "/clear")
        repl.expect(r"New conversation")
        repl.expect(PROMPT)
    ask(repl, "/resume")
    repl.expect(r"Resume a session of this project \(2; newest first")
    repl.expect(r"❯\s+2\. \d{4}-\d\d-\d\d \d\d:\d\d · 1 turn · pick a drink · s-[0-9a-f]{16}")
    repl.expect(r"1\. \d{4}-\d\d-\d\d \d\d:\d\d · 1 turn · pick a colour")
    repl.expect(r"2 of 2 · type to search")
    repl.type("colo")
    repl.expect(r"1 of 2")
    repl.send(ENTER)
    repl.expect(r"Resumed session s-[0-9a-f]{16}")
    repl.expect(r"» pick a colour")
    repl.expect(r"Blue it is\.")
    repl.expect(PROMPT)
    ask(repl, "/resume")
    repl.expect(r"1 of 1")  # the drink's: the one resumed now is not listed
    repl.type("nothing like it")
    repl.expect(r"nothing matches")
    repl.send(ESC)
    repl.expect(PROMPT)
    ask(repl, "/resume")
    repl.expect(r"1 of 1")
    repl.send(DOWN)
    repl.send(ESC)
    repl.expect(PROMPT)
    ask(repl, "and?")
    repl.expect(r"Noted\.")  # still in the colour conversation
    repl.expect(PROMPT)
    ask(repl, "/resume list")
    repl.expect(r"No saved chats")
    repl.expect(PROMPT)
