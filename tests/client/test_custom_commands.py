"""Issue 29 §1, §5 and §6 from the command line: gemini-cli's custom commands
in ``-p``, its subcommands refused, the untrusted-folder notice.

Real ``gemini-split`` processes against the fake Gemini server; what the
model received is read from the fake's recorded request bodies. The command
files are gemini-cli's documented examples (cli/custom-commands.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gemini_split.userfiles.custom_commands import load_custom_commands, split_prompt
from gemini_split.testing.fake_gemini import FakeGemini

from tests.e2e.test_serve_e2e import API_KEY, daemon

pytestmark = pytest.mark.timeout(90)

GIT_COMMIT = '''
# In: <project>/.gemini/commands/git/commit.toml
# Invoked via: /git:commit

description = "Generates a Git commit message based on staged changes."

# The prompt uses !{...} to execute the command and inject its output.
prompt = """
Please generate a Conventional Commit message based on the following git diff:

```diff
!{git diff --staged}
```

"""
'''

GREP_CODE = '''
prompt = """
Please summarize the findings for the pattern `{{args}}`.

Search Results:
!{grep -r {{args}} .}
"""
'''

FIX = '''
# Invoked via: /git:fix "Button is misaligned"

description = "Generates a fix for a given issue."
prompt = "Please provide a code fix for the issue described here: {{args}}."
'''

REVIEW = '''
description = "Reviews the provided context using a best practice guide."
prompt = """
You are an expert code reviewer.

Your task is to review {{args}}.

Use the following best practices when providing your review:

@{docs/best-practices.md}
"""
'''

CHANGELOG = '''
description = "Adds a new entry to the project's CHANGELOG.md file."
prompt = """
# Task: Update Changelog
The user's raw command is appended below your instructions.
"""
'''


@pytest.fixture
def setup(tmp_path: Path) -> dict:
    """A home with user commands, a trusted git project with project commands."""
    home = tmp_path / "home"
    work = tmp_path / "work"
    (home / "commands" / "git").mkdir(parents=True)
    (work / ".gemini" / "commands" / "git").mkdir(parents=True)
    (work / "docs").mkdir()
    (home / "commands" / "git" / "fix.toml").write_text(FIX)
    (home / "commands" / "changelog.toml").write_text(CHANGELOG)
    (home / "commands" / "git" / "commit.toml").write_text('prompt = "the user one"\n')
    (work / ".gemini" / "commands" / "git" / "commit.toml").write_text(GIT_COMMIT)
    (work / ".gemini" / "commands" / "grep-code.toml").write_text(GREP_CODE)
    (work / ".gemini" / "commands" / "review.toml").write_text(REVIEW)
    (work / "docs" / "best-practices.md").write_text("Prefer small functions.\n")
    (work / "notes.txt").write_text("It's complicated, said the notes\n")
    subprocess.run(["git", "init", "-q"], cwd=work, check=True)
    subprocess.run(["git", "add", "notes.txt"], cwd=work, check=True)
    (tmp_path / "trusted.json").write_text(json.dumps({str(work): "TRUST_FOLDER"}))
    return {"home": home, "work": work, "tmp": tmp_path}


def _env(setup: dict, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI", "GOOGLE"))}
    env.update(HOME=str(setup["tmp"]), GEMINI_SPLIT_HOME=str(setup["home"]),
               GEMINI_CLI_TRUSTED_FOLDERS_PATH=str(setup["tmp"] / "trusted.json"))
    env.update(extra)
    return env


def run(setup: dict, fake: FakeGemini | None, *args: str, **extra: str) -> subprocess.CompletedProcess:
    env = _env(setup, **extra)
    if fake is not None:
        env.update(GEMINI_API_KEY=API_KEY, GOOGLE_GEMINI_BASE_URL=fake.url)
    return subprocess.run([sys.executable, "-m", "gemini_split", *args], cwd=setup["work"], env=env,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def sent(fake: FakeGemini) -> str:
    """The prompt the model received last (the last text part: the session
    context goes before it)."""
    contents = fake.requests[-1]["body"]["contents"]
    return [p["text"] for p in contents[-1]["parts"] if "text" in p][-1]


def test_a_namespaced_command_with_args_expands_in_one_shot_exactly_as_typed(setup):
    with FakeGemini(api_key=API_KEY) as fake:
        done = run(setup, fake, "-p", '/git:fix "Button is misaligned"')
        assert done.returncode == 0, done.stderr
        assert sent(fake) == 'Please provide a code fix for the issue described here: "Button is misaligned".'


def test_without_args_placeholder_the_typed_command_is_appended_after_a_blank_line(setup):
    with FakeGemini(api_key=API_KEY) as fake:
        done = run(setup, fake, "-p", '/changelog 1.2.0 added "New feature"')
        assert done.returncode == 0, done.stderr
        assert sent(fake).endswith('appended below your instructions.\n\n/changelog 1.2.0 added "New feature"')
        assert run(setup, fake, "-p", "/changelog").returncode == 0
        assert sent(fake).endswith("appended below your instructions.\n")  # sent as it is, nothing appended


def test_shell_injection_is_refused_in_one_shot_unless_allowed_and_nothing_is_sent(setup):
    with FakeGemini(api_key=API_KEY) as fake:
        done = run(setup, fake, "-p", "/git:commit")
        assert done.returncode == 42
        assert "!{git diff --staged} did not run" in done.stderr and "--allowed-tools" in done.stderr
        assert "nothing was sent" in done.stderr
        assert not [r for r in fake.requests if r["action"].endswith("GenerateContent")]


def test_allowed_shell_injection_runs_and_its_output_reaches_the_model_the_project_command_winning(setup):
    with FakeGemini(api_key=API_KEY) as fake:
        done = run(setup, fake, "--allowed-tools", "run_shell_command(git diff)", "-p", "/git:commit")
        assert done.returncode == 0, done.stderr
        assert "+It's complicated, said the notes" in sent(fake)  # the staged diff
        assert sent(fake).startswith("Please generate a Conventional Commit message")
        assert "the user one" not in sent(fake)


def test_arguments_inside_shell_injection_are_one_quoted_word_and_cannot_run_a_second_command(setup):
    marker = setup["tmp"] / "PWNED"
    with FakeGemini(api_key=API_KEY) as fake:
        done = run(setup, fake, "--allowed-tools", "run_shell_command(grep)", "-p",
                   f"/grep-code It's complicated; touch {marker}")
        assert not marker.exists()
        # grep looked for the whole text as one pattern: found nothing (exit 1), said so.
        assert done.returncode == 0, done.stderr
        body = sent(fake)
        assert f"for the pattern `It's complicated; touch {marker}`." in body
        assert "[Shell command exited with code 1]" in body
        done = run(setup, fake, "--allowed-tools", "run_shell_command(grep)", "-p", "/grep-code It's complicated")
        assert "notes.txt:It's complicated, said the notes" in sent(fake)


def test_file_injection_reads_inside_the_workspace_only(setup):
    (setup["work"] / ".gemini" / "commands" / "leak.toml").write_text('prompt = "see @{../secret.txt} now"')
    (setup["tmp"] / "secret.txt").write_text("TOP SECRET")
    with FakeGemini(api_key=API_KEY) as fake:
        done = run(setup, fake, "-p", "/review FileCommandLoader.ts")
        assert done.returncode == 0, done.stderr
        body = sent(fake)
        assert "Your task is to review FileCommandLoader.ts." in body
        assert "Content from @docs/best-practices.md:\nPrefer small functions." in body
        done = run(setup, fake, "-p", "/leak")
        assert "TOP SECRET" not in sent(fake)
        assert "@{../secret.txt} not attached" in done.stderr and "outside the workspace" in done.stderr


def test_an_unknown_slash_word_in_one_shot_is_bad_input_never_a_prompt(setup):
    with FakeGemini(api_key=API_KEY) as fake:
        done = run(setup, fake, "-p", "/frobnicate now")
        assert done.returncode == 42
        assert "unknown command /frobnicate" in done.stderr and "//" in done.stderr
        done = run(setup, fake, "-p", "/help")
        assert done.returncode == 42 and "is a REPL command" in done.stderr
        assert not fake.requests
        done = run(setup, fake, "-p", "//frobnicate is a word")
        assert done.returncode == 0 and sent(fake) == "/frobnicate is a word"
        # A path is not a command name: it goes to the model as typed.
        done = run(setup, fake, "-p", "/etc/hosts: what is this file for?")
        assert done.returncode == 0 and sent(fake) == "/etc/hosts: what is this file for?"


def test_a_malformed_file_and_a_built_in_name_are_reported_and_the_others_still_load(setup):
    broken = setup["home"] / "commands" / "broken.toml"
    broken.write_text('prompt = "unclosed\n')
    (setup["home"] / "commands" / "help.toml").write_text('prompt = "mine"')
    with FakeGemini(api_key=API_KEY) as fake:
        done = run(setup, fake, "-p", "/git:fix it")
        assert done.returncode == 0
        assert f"{broken}: not valid TOML:" in done.stderr and "line 1" in done.stderr
        assert "/help is a built-in command; the built-in is used" in done.stderr


def test_a_command_expands_the_same_through_serve(setup):
    with FakeGemini(api_key=API_KEY) as fake, daemon(setup["tmp"], fake) as (_proc, address):
        env = _env(setup)
        done = subprocess.run([sys.executable, "-m", "gemini_split", "--server", address, "-p",
                               '/git:fix "Button is misaligned"'], cwd=setup["work"], env=env,
                              capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stderr
        assert sent(fake) == 'Please provide a code fix for the issue described here: "Button is misaligned".'


def test_project_commands_need_a_trusted_folder_and_the_notice_says_so(setup):
    with FakeGemini(api_key=API_KEY) as fake:
        done = run(setup, fake, "-p", "/review x", GEMINI_CLI_TRUSTED_FOLDERS_PATH=str(setup["tmp"] / "none.json"))
        assert done.returncode == 42
        lines = [line for line in done.stderr.splitlines() if "not trusted" in line]
        assert len(lines) == 1
        assert ".gemini/commands/" in lines[0] and "--skip-trust" in lines[0]


def test_one_shot_in_an_untrusted_folder_names_the_ignored_files_in_one_line(setup):
    (setup["work"] / "GEMINI.md").write_text("project rules\n")
    with FakeGemini(api_key=API_KEY) as fake:
        done = run(setup, fake, "-p", "hi", GEMINI_CLI_TRUSTED_FOLDERS_PATH=str(setup["tmp"] / "none.json"))
        assert done.returncode == 0, done.stderr
        lines = [line for line in done.stderr.splitlines() if "not trusted" in line]
        assert len(lines) == 1 and "GEMINI.md" in lines[0] and ".gemini/commands/" in lines[0]
        assert "project rules" not in json.dumps(fake.requests[-1]["body"])
        done = run(setup, fake, "-p", "hi")  # trusted: no notice, the rules go
        assert "not trusted" not in done.stderr
        assert "project rules" in json.dumps(fake.requests[-1]["body"])


@pytest.mark.parametrize("words, says", [
    (["extension", "list"], "its name here is 'extensions'"),
    (["skill", "list"], "its name here is 'skills'"),
    (["hook", "list"], "its name here is 'hooks'"),
    (["gemma"], "does not run local Gemma"),
    (["update"], "does not update itself"),
])
def test_gemini_cli_subcommands_gemini_split_lacks_are_refused_never_sent(setup, words, says):
    with FakeGemini(api_key=API_KEY) as fake:
        done = run(setup, fake, *words)
        assert done.returncode == 2
        assert len(done.stderr.strip().splitlines()) == 1 and says in done.stderr
        assert done.stdout == "" and not fake.requests


def test_hostile_prompts_are_parsed_or_refused_clearly(tmp_path):
    assert [p.kind for p in split_prompt('a !{echo {"x": {"y": 1}}} b @{f} c')] == ["text", "shell", "text",
                                                                                      "file", "text"]
    for bad in ("!{echo {", "@{ }"):
        with pytest.raises(ValueError):
            split_prompt(bad)
    (tmp_path / "commands").mkdir()
    (tmp_path / "commands" / "open.toml").write_text('prompt = "x !{echo {"')
    (tmp_path / "commands" / "noprompt.toml").write_text('description = "d"')
    (tmp_path / "commands" / "ok.toml").write_text('prompt = "fine"')
    os.mkfifo(tmp_path / "commands" / "fifo.toml")  # never opened for a blocking read
    found = load_custom_commands(tmp_path, None, trusted=True)
    assert list(found.commands) == ["/ok"]
    assert any("fifo.toml: cannot read: not a regular file" in p for p in found.problems)
    assert any("open.toml: '!{' on line 1 of the prompt is never closed" in p for p in found.problems)
    assert any("noprompt.toml: 'prompt' is missing" in p for p in found.problems)


def test_a_recorded_trust_decision_is_read_as_gemini_cli_reads_it_and_keeps_other_rules(tmp_path):
    from gemini_split.environment import Environment
    from gemini_split.userfiles.folder_trust import record_trust
    from gemini_split.userfiles.settings import is_folder_trusted, trust_rule

    projects = tmp_path / "projects"
    (projects / "a").mkdir(parents=True)
    (projects / "b").mkdir()
    (tmp_path / "elsewhere").mkdir()
    env = Environment(environ={"GEMINI_SPLIT_HOME": str(tmp_path / "home"), "HOME": str(tmp_path)}, cwd=tmp_path)
    path = record_trust(tmp_path / "elsewhere", "DO_NOT_TRUST", env)
    assert trust_rule(projects / "a", env) is None  # no decision yet: the REPL asks
    record_trust(projects / "a", "TRUST_PARENT", env)
    assert is_folder_trusted(projects / "b", env)  # the parent's other folders too
    assert not is_folder_trusted(tmp_path / "elsewhere", env)
    assert json.loads(path.read_text()) == {str(tmp_path / "elsewhere"): "DO_NOT_TRUST",
                                            str(projects / "a"): "TRUST_PARENT"}
    path.write_text("{not json")
    with pytest.raises(Exception, match="not JSON"):
        record_trust(projects / "a", "TRUST_FOLDER", env)
    assert path.read_text() == "{not json"  # nothing lost


def test_every_subcommand_in_gemini_clis_help_is_offered_or_refused():
    import argparse
    import re

    from gemini_split.cli import GEMINI_CLI_ONLY_COMMANDS, build_parser

    help_text = (Path(__file__).parents[1] / "e2e" / "compat" / "fixtures" / "gemini-cli-0.61.0-help.txt").read_text()
    listed = help_text.split("Commands:", 1)[1].split("\n\n", 1)[0]
    names = []
    for line in listed.splitlines():
        m = re.match(r"\s+gemini (\w[\w-]*)", line)
        if m:
            names.append(m.group(1))
            names += re.findall(r"aliases: ([\w, ]+)\]", line)[0].split(", ") if "aliases:" in line else []
    assert {"mcp", "extensions", "skill", "gemma"} <= set(names)
    ours = set()
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            ours.update(action.choices)
    assert [n for n in names if n not in ours and n not in GEMINI_CLI_ONLY_COMMANDS] == []
