"""Issue 29 §1 and §6 in the REPL: custom commands and the folder-trust question.

The scripted model answers ``Echo: <prompt>`` once its script is used up, so
what it echoes is exactly what the model received.
"""

from __future__ import annotations

import json
import sys

import pytest

from .pty_driver import CTRL_C, TAB, PtyProcess
from .test_repl import PROMPT, _environ, ask, start_repl, workdir  # noqa: F401  (fixtures)

pytestmark = pytest.mark.timeout(90)

GREP_CODE = '''
description = "Greps the code for a pattern."
prompt = """
Please summarize the findings for the pattern `{{args}}`.

Search Results:
!{grep -r {{args}} .}
"""
'''


@pytest.fixture
def commands(tmp_path, workdir):  # noqa: F811
    home = tmp_path / "home"
    (home / "commands" / "git").mkdir(parents=True)
    (home / "commands" / "git" / "fix.toml").write_text(
        'description = "Generates a fix for a given issue."\n'
        'prompt = "Please provide a code fix for the issue described here: {{args}}."\n')
    (home / "commands" / "grep-code.toml").write_text(GREP_CODE)
    return home / "commands"


def test_a_custom_command_is_listed_completed_and_expanded(start_repl, commands):  # noqa: F811
    repl = start_repl([])
    ask(repl, "/help")
    repl.expect(r"/git:fix \[ARGS\]\s+Generates a fix for a given issue\. \(user command\)")
    repl.expect(PROMPT)
    repl.type("/git:f")
    repl.drain(0.3)
    repl.send(TAB)
    repl.drain(0.3)
    ask(repl, ' "Button is misaligned"')
    repl.expect(r'Echo: Please provide a code fix for the issue described here: "Button is\s+misaligned"\.')
    repl.expect(PROMPT)
    ask(repl, "/sessions")  # issue 46 §4: titled by the command as typed, not its expansion
    repl.expect(r'/git:fix "Button is misaligned"')
    repl.expect(PROMPT)


def test_shell_injection_is_asked_first_and_arguments_cannot_inject_a_command(start_repl, commands, tmp_path):  # noqa: F811
    marker = tmp_path / "PWNED"
    repl = start_repl([])
    ask(repl, f"/grep-code notes; touch {marker}")
    repl.expect(r"grep -r 'notes; touch ")  # the approval shows the exact, quoted command
    repl.expect(r"1\. ")
    repl.send("1")  # allow once
    repl.expect(r"Echo: Please summarize the findings for the pattern `?notes; touch")
    repl.expect(r"\[Shell command exited with code 1\]")
    repl.expect(PROMPT)
    assert not marker.exists()


def test_commands_reload_rereads_the_files_and_reports_a_broken_one(start_repl, commands):  # noqa: F811
    repl = start_repl([])
    (commands / "hello.toml").write_text('prompt = "Say hello to {{args}}"')
    (commands / "broken.toml").write_text("prompt = = 1")
    ask(repl, "/commands reload")
    repl.expect(r"toml:\s+not\s+valid\s+TOML:\s+Invalid\s+value\s+\(at\s+line\s+1")
    assert "broken.toml" in repl.text.replace("\n", "")  # the path, however the terminal wrapped it
    repl.expect(r"Reloaded custom commands: 3 commands\.")
    ask(repl, "/hello world")
    repl.expect(r"Echo: Say hello to world")
    repl.expect(PROMPT)


def _start(tmp_path, workdir, **environ) -> PtyProcess:  # noqa: F811
    script = tmp_path / "script.json"
    script.write_text("[]")
    argv = [sys.executable, "-m", "gemini_split", "-m", f"scripted:{script}"]
    return PtyProcess(argv, env=_environ(tmp_path, NO_COLOR="1", **environ), cwd=str(workdir))


def test_the_trust_question_is_asked_once_recorded_and_applied_at_once(tmp_path, workdir):  # noqa: F811
    (workdir / "GEMINI.md").write_text("Project rule: answer in haiku.\n")
    (workdir / ".gemini" / "commands").mkdir(parents=True)
    (workdir / ".gemini" / "commands" / "proj.toml").write_text('prompt = "from the project"')
    repl = _start(tmp_path, workdir)
    try:
        repl.expect(r"Do you trust this folder\?", timeout=20)
        repl.expect(r"GEMINI\.md")
        repl.expect(r"3\. Don't trust")
        repl.send("1")
        repl.expect(r"Trusted .*work \(recorded in ")
        repl.expect(PROMPT, timeout=20)
        assert "not trusted" not in repl.text
        ask(repl, "/memory show")
        repl.expect(r"Project rule: answer in haiku\.")
        ask(repl, "/proj")
        repl.expect(r"Echo: from the project")
        repl.expect(PROMPT)
    finally:
        repl.close()
    rules = json.loads((tmp_path / "home" / "trustedFolders.json").read_text())
    assert rules == {str(workdir.resolve()): "TRUST_FOLDER"}
    again = _start(tmp_path, workdir)  # decided: not asked again
    try:
        again.expect(PROMPT, timeout=20)
        assert "Do you trust" not in again.text
    finally:
        again.close()


def test_dont_trust_is_recorded_and_the_ignored_files_are_named(tmp_path, workdir):  # noqa: F811
    (workdir / "GEMINI.md").write_text("Project rule.\n")
    repl = _start(tmp_path, workdir)
    try:
        repl.expect(r"Do you trust this folder\?", timeout=20)
        repl.send("3")
        repl.expect(r"Not trusting .*work")
        repl.expect(r"this folder is not trusted, so its project files are ignored: GEMINI\.md")
        repl.expect(PROMPT, timeout=20)
        ask(repl, "/memory show")
        repl.expect(r"No context files loaded")
    finally:
        repl.close()
    rules = json.loads((tmp_path / "home" / "trustedFolders.json").read_text())
    assert rules == {str(workdir.resolve()): "DO_NOT_TRUST"}


def test_a_folder_without_project_configuration_is_not_asked_about(start_repl):  # noqa: F811
    repl = start_repl([])  # the fixture waits for the prompt
    assert "Do you trust" not in repl.text
    ask(repl, "hello")
    repl.expect(r"Echo: hello")
    repl.expect(PROMPT)


def test_ctrl_c_stops_a_slow_shell_injection_and_nothing_is_sent(start_repl, commands):  # noqa: F811
    (commands / "slow.toml").write_text('prompt = "waited: !{sleep 30; echo done}"')
    repl = start_repl([], "--approval-mode", "yolo")
    ask(repl, "/slow")
    repl.drain(1.0)
    repl.send(CTRL_C)
    repl.expect(r"Interrupted: nothing was sent\.", timeout=10)
    repl.expect(PROMPT)
    ask(repl, "still here?")
    repl.expect(r"Echo: still here\?")
    assert "waited:" not in repl.text
