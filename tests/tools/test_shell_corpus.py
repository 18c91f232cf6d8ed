"""Attack the allowed-commands check: with only ``run_shell_command(echo)``
allowed and nobody to ask, nothing in this corpus may create FLAG — run for
real through the ToolExecutor, in a workspace holding ``./cat`` and
``./echo`` scripts that would create it."""

from __future__ import annotations

import os

import pytest

from gemini_split.client.approval import ApprovalMode

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
