"""Edits to files that run code later — git hooks and config, .envrc,
editor tasks, shell rc files — are asked about in every mode but yolo, and
the question says so (issue 13 §11)."""

from __future__ import annotations

import os

import pytest

from gemini_split.tools.approval import Answer, ApprovalMode, ApprovalRequest, executes_later

from .conftest import Env

LATER = [
    ".git/hooks/pre-commit", ".git/config", "sub/.git/hooks/post-checkout", ".GIT/hooks/pre-push", ".git",
    ".envrc", "sub/.envrc", ".vscode/tasks.json", ".vscode/settings.json", ".bashrc", ".zshrc", ".profile",
    ".config/fish/config.fish", ".husky/pre-commit", ".pre-commit-config.yaml", "./.git/hooks/x",
    "lib/site-packages/evil.pth", ".idea/workspace.xml",
]
ORDINARY = ["src/main.py", "README.md", "git/hooks.py", "docs/.gitignore", ".gitignore", "envrc", "vscode/tasks.json",
            "bashrc.txt", ".github/workflows/ci.yml"]


def test_what_executes_later():
    for path in LATER:
        assert executes_later(path), path
    for path in ORDINARY:
        assert executes_later(path) is None, path
    assert "git" in executes_later(".git/hooks/pre-commit")


class Recorder:
    def __init__(self, answer: Answer = Answer.NO):
        self.answer = answer
        self.requests: list[ApprovalRequest] = []

    async def ask(self, request: ApprovalRequest) -> Answer:
        self.requests.append(request)
        return self.answer


def _edits(path: str) -> list[tuple[str, dict]]:
    return [("write_file", {"file_path": path, "content": "#!/bin/sh\ntouch FLAG\n"}),
            ("replace", {"instruction": "edit", "file_path": path, "old_string": "", "new_string": "touch FLAG\n"})]


@pytest.mark.parametrize("mode", [ApprovalMode.DEFAULT, ApprovalMode.AUTO_EDIT])
async def test_auto_edit_and_allowed_tools_still_ask(env: Env, mode: ApprovalMode):
    (env.root / ".git" / "hooks").mkdir(parents=True)
    for path in [".git/hooks/pre-commit", ".envrc", ".vscode/tasks.json", ".bashrc"]:
        for tool, args in _edits(path):
            asker = Recorder(Answer.NO)
            # Even with the tool allowed outright, and after an ALWAYS:
            executor = env.executor(mode, ("write_file", "replace"), asker=asker)
            executor.policy.remember(executor.registry.get(tool), args)
            out = await env.run(tool, args, executor=executor)
            assert out.failure is not None and out.failure.code == "refused", (mode, path, tool)
            assert len(asker.requests) == 1, (mode, path, tool)
            request = asker.requests[0]
            assert request.executes_later and request.reason and "every approval mode but yolo" in request.reason
            assert not (env.root / path).exists(), path
            # Without anyone to ask, the edit is refused and the model told why.
            out = await env.run(tool, args, executor=env.executor(mode, ("write_file", "replace")))
            assert out.failure.code == "refused" and "but yolo" in out.failure.message, out.failure
            assert not (env.root / path).exists(), path


async def test_a_symlink_does_not_hide_the_hooks_directory(env: Env):
    (env.root / ".git" / "hooks").mkdir(parents=True)
    os.symlink(".git/hooks", env.root / "hooks")
    asker = Recorder(Answer.NO)
    out = await env.run("write_file", {"file_path": "hooks/pre-commit", "content": "touch FLAG"},
                        executor=env.executor(ApprovalMode.AUTO_EDIT, asker=asker))
    assert out.failure.code == "refused" and asker.requests[0].executes_later
    assert not (env.root / ".git" / "hooks" / "pre-commit").exists()


async def test_yes_writes_it_and_yolo_does_not_ask(env: Env):
    asker = Recorder(Answer.YES)
    out = await env.run("write_file", {"file_path": ".envrc", "content": "export A=1\n"},
                        executor=env.executor(ApprovalMode.AUTO_EDIT, asker=asker))
    assert out.failure is None and (env.root / ".envrc").read_text() == "export A=1\n"
    asker = Recorder()
    out = await env.run("write_file", {"file_path": ".git/hooks/pre-commit", "content": "x"},
                        executor=env.executor(ApprovalMode.YOLO, asker=asker))
    assert out.failure is None and not asker.requests


async def test_ordinary_edits_in_auto_edit_do_not_ask(env: Env):
    asker = Recorder()
    for path in ORDINARY:
        out = await env.run("write_file", {"file_path": path, "content": "x"},
                            executor=env.executor(ApprovalMode.AUTO_EDIT, asker=asker))
        assert out.failure is None, (path, out.failure)
    assert not asker.requests


async def test_plan_mode_still_refuses_them_outright(env: Env):
    asker = Recorder(Answer.YES)
    out = await env.run("write_file", {"file_path": ".git/hooks/pre-commit", "content": "x"},
                        executor=env.executor(ApprovalMode.PLAN, asker=asker))
    assert out.failure.code == "refused" and "plan" in out.failure.message and not asker.requests
    assert not (env.root / ".git").exists()
