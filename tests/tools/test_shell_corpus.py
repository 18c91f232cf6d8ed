"""Attack the allowed-commands check: with only ``run_shell_command(echo)``
allowed and nobody to ask, nothing in this corpus may create FLAG — run for
real through the ToolExecutor, in a workspace holding ``./cat`` and
``./echo`` scripts that would create it."""

from __future__ import annotations

import os

import pytest

from gemini_split.tools.approval import ApprovalMode

from .conftest import Env

CORPUS = [
    # chaining
    "echo hi && touch FLAG", "echo hi || touch FLAG", "false || touch FLAG", "echo hi; touch FLAG",
    "echo hi;touch FLAG", "echo hi&&touch FLAG", "echo hi | touch FLAG", "echo hi |& touch FLAG",
    "echo hi & touch FLAG", "echo hi\ntouch FLAG", "echo hi\r\ntouch FLAG", "echo hi \\\n; touch FLAG",
    "echo hi # ok\ntouch FLAG", "echo a#; touch FLAG",
    # substitution
    "echo $(touch FLAG)", "echo `touch FLAG`", "echo \"$(touch FLAG)\"", "echo \"a`touch FLAG`b\"",
    "echo $(echo $(touch FLAG))", "echo `echo \\`touch FLAG\\``", "$(echo touch) FLAG", "`echo touch` FLAG",
    "echo ${x:-$(touch FLAG)}", "echo $[$(touch FLAG)]", "echo $((1+$(touch FLAG)))", "echo <(touch FLAG)",
    "echo >(touch FLAG)", "echo <<< \"$(touch FLAG)\"", "cat <<EOF\n$(touch FLAG)\nEOF",
    "x=$(touch FLAG)", "echo hi > \"$(touch FLAG)\"",
    # redirections
    "echo ok > FLAG", "echo ok >> FLAG", "echo ok 2> FLAG", "echo ok &> FLAG", "echo ok &>> FLAG",
    "echo ok >| FLAG", "echo ok <> FLAG", "echo ok >& FLAG", "echo ok 1>FLAG", "> FLAG", "(echo ok) > FLAG",
    "echo ok > $(echo FLAG)", "echo ok >FL\\AG",
    # wrappers
    "bash -c 'touch FLAG'", "sh -c 'touch FLAG'", "dash -c 'touch FLAG'", "bash -c \"echo hi; touch FLAG\"",
    "bash -c 'echo hi' && touch FLAG", "/bin/sh -c 'touch FLAG'", "bash -x -c 'touch FLAG'",
    "eval touch FLAG", "eval 'touch FLAG'", "eval \"echo \\$(touch FLAG)\"", "echo hi; eval touch FLAG",
    "exec touch FLAG", "command touch FLAG", "env touch FLAG", "xargs touch <<< FLAG",
    "echo FLAG | xargs touch", "find . -maxdepth 0 -exec touch FLAG \\;", "time touch FLAG", "! touch FLAG",
    "coproc touch FLAG", "nohup touch FLAG",
    # subshells and compound commands
    "(touch FLAG)", "( echo hi; touch FLAG )", "{ touch FLAG; }", "if true; then touch FLAG; fi",
    "for i in 1; do touch FLAG; done", "f() { touch FLAG; }; f", "((1)) && touch FLAG",
    # words that are not the word 'echo'
    "./cat", "./echo hi", "./cat && echo hi", "\\./echo hi", "/bin/echo hi && touch FLAG", "\\touch FLAG",
    "t\\ouch FLAG", "e\\cho hi; \\touch FLAG", "ec'h'o hi && to'u'ch FLAG", "{touch,FLAG}", "tou?h FLAG",
    "~/touch FLAG", "$'touch' FLAG", "PATH=.:$PATH echo hi", "PATH=. cat", "export PATH=.; echo hi",
    "IFS=,; x=touch,FLAG; $x", "echo hi; PATH=. echo",
    # broken syntax
    "echo 'unterminated; touch FLAG", "echo hi; }", "echo hi )", ";touch FLAG",
]


@pytest.fixture
def trapped(env: Env) -> Env:
    for name in ("cat", "echo"):
        script = env.root / name
        script.write_text("#!/bin/sh\ntouch FLAG\n")
        script.chmod(0o755)
    return env


async def test_nothing_in_the_corpus_creates_flag(trapped: Env):
    executor = trapped.executor(ApprovalMode.DEFAULT, ("run_shell_command(echo)",))
    flag = trapped.root / "FLAG"
    for command in CORPUS:
        out = await trapped.run("run_shell_command", {"command": command}, executor=executor)
        assert out.failure is not None and out.failure.code == "refused", (command, out.result)
        assert "non-interactive" in out.failure.message
        assert not flag.exists(), command
        assert not out.deltas, command  # nothing ran at all


async def test_the_corpus_is_live(trapped: Env):
    """Sanity check of the corpus itself: in yolo mode, a sample of it does
    create FLAG, so the test above is not vacuous."""
    executor = trapped.executor(ApprovalMode.YOLO)
    flag = trapped.root / "FLAG"
    for command in ["echo hi && touch FLAG", "echo $(touch FLAG)", "echo ok > FLAG", "eval touch FLAG",
                    "./cat", "\\touch FLAG", "bash -c 'touch FLAG'", "{touch,FLAG}", "PATH=.:$PATH cat"]:
        out = await trapped.run("run_shell_command", {"command": command}, executor=executor)
        assert out.failure is None, (command, out.failure)
        assert flag.exists(), command
        flag.unlink()


@pytest.mark.parametrize(
    "command, stdout",
    [
        ("echo hi", "hi\n"),
        ("e\\cho hi", "hi\n"),
        ("'echo' a 'b  c'", "a b  c\n"),
        ("echo a; echo b | echo c", "a\nc\n"),
        ("echo hi 2>&1 >/dev/null; echo there", "there\n"),
        ("bash -c 'echo inner'", "inner\n"),
        ("eval echo evaluated", "evaluated\n"),
    ],
)
async def test_allowed_echo_runs(trapped: Env, command: str, stdout: str):
    executor = trapped.executor(ApprovalMode.DEFAULT, ("run_shell_command(echo)",))
    out = await trapped.run("run_shell_command", {"command": command}, executor=executor)
    assert out.failure is None, out.failure
    assert out.result["exit_code"] == 0 and out.result["stdout"] == stdout
    assert not (trapped.root / "FLAG").exists()


async def test_refusal_tells_the_model_which_part(trapped: Env):
    executor = trapped.executor(ApprovalMode.DEFAULT, ("run_shell_command(echo)",))
    out = await trapped.run("run_shell_command", {"command": "echo hi && touch FLAG"}, executor=executor)
    assert "touch FLAG" in out.failure.message
    assert out.failure.hint


async def test_auto_edit_still_refuses_shell(trapped: Env):
    out = await trapped.run("run_shell_command", {"command": "touch FLAG"}, mode=ApprovalMode.AUTO_EDIT)
    assert out.failure is not None and out.failure.code == "refused"
    assert not os.path.exists(trapped.root / "FLAG")


# --- secrets in the environment (issue 13 §8) ---------------------------------

SECRETS = {
    "GEMINI_API_KEY": "sk-gemini-4f1a", "GOOGLE_API_KEY": "sk-google-77c0", "GEMINI_SERVER_TOKEN": "tok-serve-19e2",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-3b8d", "GITHUB_TOKEN": "ghp-5d2e", "DB_PASSWORD": "pw-hunter2",
    "STRIPE_SECRET": "stripe-0a9c", "my_api_key": "lower-case-6e6e",
}
LEAK_COMMANDS = [
    "echo $GEMINI_API_KEY $GOOGLE_API_KEY $GEMINI_SERVER_TOKEN $AWS_SECRET_ACCESS_KEY",
    "echo $GITHUB_TOKEN $DB_PASSWORD $STRIPE_SECRET $my_api_key",
    "env", "printenv", "export -p", "set", "cat /proc/self/environ | tr '\\0' '\\n'",
    "bash -c 'echo $GEMINI_API_KEY'", "echo ${!GEMINI*} ${!AWS*}",
]


@pytest.fixture
def secrets_env(env: Env, monkeypatch) -> Env:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HARMLESS_SETTING", "visible-1234")
    return env


async def test_no_secret_reaches_a_shell_command(secrets_env: Env):
    executor = secrets_env.executor(ApprovalMode.YOLO)
    for command in LEAK_COMMANDS:
        out = await secrets_env.run("run_shell_command", {"command": command}, executor=executor)
        assert out.failure is None, (command, out.failure)
        for value in SECRETS.values():
            assert value not in out.text(), (command, value)
    out = await secrets_env.run("run_shell_command", {"command": "echo $HARMLESS_SETTING $HOME"}, executor=executor)
    assert out.result["stdout"].split()[0] == "visible-1234"  # the rest of the environment is kept


async def test_allowed_secret_patterns_pass_but_never_the_programs_own(secrets_env: Env):
    from gemini_split.tools.registry import default_tools

    registry = default_tools(shell_env_allow=("GITHUB_TOKEN", "GEMINI_*"))
    executor = secrets_env.executor(ApprovalMode.YOLO, registry=registry)
    out = await secrets_env.run("run_shell_command", {"command": "echo $GITHUB_TOKEN; echo x$GEMINI_API_KEY$GEMINI_SERVER_TOKEN; echo y$DB_PASSWORD"},
                                executor=executor)
    assert out.result["stdout"] == f"{SECRETS['GITHUB_TOKEN']}\nx\ny\n"


def test_secret_name_patterns():
    from gemini_split.tools.builtin.subprocess_env import is_secret_name

    for name in ["GEMINI_API_KEY", "OPENAI_API_KEY", "aws_secret_access_key", "NPM_TOKEN", "PGPASSWORD_X_PASSWORD",
                 "CLIENT_SECRET", "GOOGLE_APPLICATION_CREDENTIALS", "API_KEY", "TOKEN", "SLACK_TOKEN_2"]:
        assert is_secret_name(name), name
    for name in ["PATH", "HOME", "KEYBOARD", "TOKENIZERS_PARALLELISM", "LANG", "TERM", "SSH_AUTH_SOCK", "EDITOR"]:
        assert not is_secret_name(name), name
    assert not is_secret_name("GITHUB_TOKEN", allow=("github_*",))
    assert is_secret_name("GEMINI_API_KEY", allow=("*",))
