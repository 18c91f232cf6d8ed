"""``-w`` in the REPL: at exit, gemini-cli's words on how to come back to
the session in the worktree and how to remove it — the real REPL under a
pty, a real git repository; and the session is found again from there."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gemini_split.commands.run_repl import say_worktree
from gemini_split.environment import Environment

from .pty_driver import CTRL_D
from .test_repl import PROMPT, _environ, ask, start_repl  # noqa: F401 (fixtures)

pytestmark = pytest.mark.timeout(60)

GIT_ENV = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """The REPL's directory: a repository with one commit."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("the notes\n")
    for args in (["init", "-q"], ["add", "notes.txt"],
                 ["-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "first"]):
        subprocess.run(["git", *args], cwd=work, check=True, env=GIT_ENV, capture_output=True)
    home = tmp_path / "home"
    home.mkdir()
    (home / "settings.json").write_text(json.dumps({"experimental": {"worktrees": True}}))
    return work


def test_at_exit_the_repl_says_how_to_resume_in_the_worktree_and_how_to_remove_it(start_repl, workdir, tmp_path):
    repl = start_repl([], "-w", "feat", cols=300, GEMINI_CLI_TRUST_WORKSPACE="true")
    path = workdir / ".gemini" / "worktrees" / "feat"
    ask(repl, "hello there")
    repl.expect(r"Echo: hello there")
    repl.expect(PROMPT)
    repl.send(CTRL_D)
    match = repl.expect(rf"To resume work in this worktree: cd {re.escape(str(path))} && "
                        r"gemini-split --resume (s-[\w-]+)")
    repl.expect(rf"To remove manually: git worktree remove {re.escape(str(path))}")
    assert repl.wait() == 0
    assert "working in the new git worktree" in repl.text  # said at the start too
    # What it says works: from the worktree, the session is this project's.
    listed = subprocess.run([sys.executable, "-m", "gemini_split", "--list-sessions"], cwd=path,
                            env=_environ(tmp_path), capture_output=True, text=True, timeout=30)
    assert listed.returncode == 0, listed.stderr
    assert match.group(1) in listed.stdout and "hello there" in listed.stdout


def test_the_footer_is_said_in_any_worktree_of_a_project_and_names_a_remote_server(workdir):
    path = workdir / ".gemini" / "worktrees" / "older"
    subprocess.run(["git", "worktree", "add", str(path), "-b", "worktree-older"], cwd=workdir, check=True,
                   env=GIT_ENV, capture_output=True)

    def said(cwd: Path, server: str | None, label: str) -> str:
        out = io.StringIO()
        say_worktree(Environment(stdout=out, environ={}, cwd=cwd), "s-1", server, label)
        return out.getvalue()

    assert said(workdir, None, "embedded") == ""  # the main checkout is no worktree
    assert said(path, None, "embedded") == (f"To resume work in this worktree: cd {path} && gemini-split --resume s-1\n"
                                            f"To remove manually: git worktree remove {path}\n")
    assert said(path, "unix:/run/d.sock", "local").startswith(  # the local daemon shares embedded's sessions
        f"To resume work in this worktree: cd {path} && gemini-split --resume s-1\n")
    assert f"gemini-split --resume s-1 --server ws://box:8080\n" in said(
        path, "ws://box:8080?auth=secret", "ws://box:8080?auth=secret")  # never the token
