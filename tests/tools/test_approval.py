"""Approval modes, --allowed-tools entries, and asking through the executor."""

from __future__ import annotations

import pytest

from gemini_split.tools.approval import (
    Answer,
    ApprovalMode,
    ApprovalPolicy,
    ApprovalRequest,
    Decision,
    parse_allowed_tools,
    parse_approval_mode,
)
from gemini_split.tools.registry import default_tools

from .conftest import Env

TOOLS = default_tools()
READ_ONLY = ["read_file", "list_directory", "glob", "grep_search"]
ARGS = {
    "read_file": {"file_path": "a"}, "list_directory": {"dir_path": "."}, "glob": {"pattern": "*"},
    "grep_search": {"pattern": "x"}, "write_file": {"file_path": "a", "content": ""},
    "replace": {"instruction": "edit", "file_path": "a", "old_string": "x", "new_string": "y"},
    "run_shell_command": {"command": "ls"}, "web_fetch": {"prompt": "summarise http://example.com"},
}

EXPECTED = {
    ApprovalMode.DEFAULT: {"write_file": Decision.ASK, "replace": Decision.ASK, "run_shell_command": Decision.ASK, "web_fetch": Decision.ASK},
    ApprovalMode.AUTO_EDIT: {"write_file": Decision.ALLOW, "replace": Decision.ALLOW, "run_shell_command": Decision.ASK, "web_fetch": Decision.ASK},
    ApprovalMode.YOLO: {"write_file": Decision.ALLOW, "replace": Decision.ALLOW, "run_shell_command": Decision.ALLOW, "web_fetch": Decision.ALLOW},
    ApprovalMode.PLAN: {"write_file": Decision.DENY, "replace": Decision.DENY, "run_shell_command": Decision.DENY, "web_fetch": Decision.DENY},
}


@pytest.mark.parametrize("mode", list(ApprovalMode))
def test_mode_matrix(mode):
    policy = ApprovalPolicy(mode)
    for name in READ_ONLY:
        assert policy.decide(TOOLS.get(name), ARGS[name]) is Decision.ALLOW
    for name, decision in EXPECTED[mode].items():
        assert policy.decide(TOOLS.get(name), ARGS[name]) is decision, (mode, name)


def test_default_constructor_is_default_mode():
    policy = ApprovalPolicy()
    assert policy.mode is ApprovalMode.DEFAULT and policy.allowed_tools == ()


@pytest.mark.parametrize(
    "text, mode",
    [("default", ApprovalMode.DEFAULT), ("auto_edit", ApprovalMode.AUTO_EDIT), ("YOLO", ApprovalMode.YOLO),
     (" auto-edit ", ApprovalMode.AUTO_EDIT)],
)
def test_parse_approval_mode(text, mode):
    assert parse_approval_mode(text) is mode


def test_parse_approval_mode_lists_valid_modes():
    with pytest.raises(ValueError) as info:
        parse_approval_mode("always")
    message = str(info.value)
    assert "'always'" in message and "default" in message and "auto_edit" in message and "yolo" in message


def test_allowed_tool_names():
    policy = ApprovalPolicy(ApprovalMode.DEFAULT, ["write_file", "web_fetch"])
    assert policy.decide(TOOLS.get("write_file"), ARGS["write_file"]) is Decision.ALLOW
    assert policy.decide(TOOLS.get("web_fetch"), ARGS["web_fetch"]) is Decision.ALLOW
    assert policy.decide(TOOLS.get("replace"), ARGS["replace"]) is Decision.ASK


@pytest.mark.parametrize("entry", ["run_shell_command", "run_shell_command()", "ShellTool"])
def test_whole_shell_allowed(entry):
    policy = ApprovalPolicy(ApprovalMode.DEFAULT, [entry])
    shell = TOOLS.get("run_shell_command")
    for command in ["rm -rf build", "echo $(id) > x", "if true; then :; fi"]:
        assert policy.decide(shell, {"command": command}) is Decision.ALLOW


def test_shell_prefixes():
    policy = ApprovalPolicy(ApprovalMode.DEFAULT, ["run_shell_command(git status)", "ShellTool(ls)", "read_file"])
    shell = TOOLS.get("run_shell_command")
    assert policy.decide(shell, {"command": "git status -s && ls -la"}) is Decision.ALLOW
    verdict = policy.check(shell, {"command": "git status; git push"})
    assert verdict.decision is Decision.ASK and "git push" in verdict.reason
    assert policy.decide(shell, {"command": "git log"}) is Decision.ASK


@pytest.mark.parametrize(
    "entry",
    ["", "run_shell_command(git status", "write_file(foo)", "run_shell_command(git && ls)",
     "run_shell_command(echo > x)", "run_shell_command($x)", "read_file)"],
)
def test_bad_entries_raise(entry):
    with pytest.raises(ValueError):
        ApprovalPolicy(ApprovalMode.DEFAULT, [entry])


def test_parse_allowed_tools_keeps_commas_in_parentheses():
    assert parse_allowed_tools("read_file, run_shell_command(git log --format=%h,%s),glob") == [
        "read_file", "run_shell_command(git log --format=%h,%s)", "glob",
    ]
    assert parse_allowed_tools("") == []


def test_always_for_shell_remembers_root_commands_only():
    policy = ApprovalPolicy()
    shell = TOOLS.get("run_shell_command")
    args = {"command": "git status && bash -c 'ls -l'"}
    assert policy.always_scope(shell, args) == "run_shell_command(git), run_shell_command(ls)"
    policy.remember(shell, args)
    assert policy.decide(shell, {"command": "git diff"}) is Decision.ALLOW
    assert policy.decide(shell, {"command": "ls"}) is Decision.ALLOW
    assert policy.decide(shell, {"command": "rm x"}) is Decision.ASK
    assert policy.always_scope(shell, {"command": "echo $(("}) is None  # cannot parse: no ALWAYS
    assert policy.always_scope(shell, {"command": "echo x > f"}) is None  # would not cover it
    for wrapper in ("env git status", "timeout 5 make", "find . -name x -exec cat {} ;", "git status; xargs ls"):
        # ALWAYS for the wrapper would allow whatever it runs next: never offered
        assert policy.always_scope(shell, {"command": wrapper}) is None, wrapper
    write = TOOLS.get("write_file")
    assert policy.always_scope(write, ARGS["write_file"]) == "write_file"
    policy.remember(write, ARGS["write_file"])
    assert policy.decide(write, ARGS["write_file"]) is Decision.ALLOW


class ScriptedAsker:
    def __init__(self, *answers: Answer):
        self.answers = list(answers)
        self.requests: list[ApprovalRequest] = []

    async def ask(self, request: ApprovalRequest) -> Answer:
        self.requests.append(request)
        return self.answers.pop(0)


async def test_asker_sees_exactly_what_will_happen(env: Env):
    (env.root / "f.txt").write_text("one\ntwo\n")
    asker = ScriptedAsker(Answer.YES, Answer.YES, Answer.YES)
    executor = env.executor(ApprovalMode.DEFAULT, asker=asker)
    out = await env.run("replace", {"instruction": "edit", "file_path": "f.txt", "old_string": "two", "new_string": "deux"}, executor=executor)
    assert out.failure is None
    desc = asker.requests[0].description
    assert "--- a/f.txt" in desc and "-two" in desc and "+deux" in desc
    out = await env.run("write_file", {"file_path": "new.txt", "content": "hello\n"}, executor=executor)
    assert out.failure is None
    assert "Create new.txt" in asker.requests[1].description and "+hello" in asker.requests[1].description
    cmd = "echo 'a  b' | tr a-z A-Z"
    out = await env.run("run_shell_command", {"command": cmd, "description": "shout"}, executor=executor)
    assert out.failure is None and out.result["stdout"] == "A  B\n"
    assert cmd in asker.requests[2].description and "shout" in asker.requests[2].description
    assert asker.requests[2].always_scope == "run_shell_command(echo), run_shell_command(tr)"


async def test_declined_and_always(env: Env):
    asker = ScriptedAsker(Answer.NO, Answer.ALWAYS)
    executor = env.executor(ApprovalMode.DEFAULT, asker=asker)
    out = await env.run("write_file", {"file_path": "a.txt", "content": "x"}, executor=executor)
    assert out.failure.code == "refused" and "declined" in out.failure.message
    assert not (env.root / "a.txt").exists()
    out = await env.run("write_file", {"file_path": "a.txt", "content": "x"}, executor=executor)
    assert out.failure is None
    out = await env.run("write_file", {"file_path": "b.txt", "content": "y"}, executor=executor)
    assert out.failure is None and len(asker.requests) == 2  # not asked again


async def test_failing_edit_is_not_asked_about(env: Env):
    (env.root / "f.txt").write_text("abc\n")
    asker = ScriptedAsker()
    executor = env.executor(ApprovalMode.DEFAULT, asker=asker)
    out = await env.run("replace", {"instruction": "edit", "file_path": "f.txt", "old_string": "zzz", "new_string": "y"}, executor=executor)
    assert out.failure.code == "no_match" and not asker.requests


async def test_no_asker_refuses_with_reason(env: Env):
    for tool in ("write_file", "replace", "run_shell_command", "web_fetch"):
        out = await env.run(tool, ARGS[tool], mode=ApprovalMode.DEFAULT)
        assert out.failure.code == "refused", tool
        assert "non-interactive" in out.failure.message and out.failure.hint
    assert not (env.root / "a").exists()
