"""``-w`` through the local daemon: the worktree is made here, where the
client's tools run, and the model's edit lands in it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from .conftest import run

pytestmark = pytest.mark.timeout(90)

GIT_ENV = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def test_a_worktree_through_the_local_daemon_holds_the_models_edit(environ, home, fake, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.txt").write_text("a\n")
    for args in (["init", "-q"], ["add", "a.txt"],
                 ["-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "first"]):
        subprocess.run(["git", *args], cwd=repo, check=True, env=GIT_ENV, capture_output=True)
    Path(home, "settings.json").write_text(json.dumps({"experimental": {"worktrees": True}}))
    fake.add_turns([{"function_calls": [{"name": "write_file", "args": {"file_path": "new.txt", "content": "x\n"}}]},
                    {"text": "written"}])
    done = run(["-w", "local-one", "-y", "-p", "write it"], dict(environ, GEMINI_CLI_TRUST_WORKSPACE="true"), cwd=repo)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "written\n"
    path = repo / ".gemini" / "worktrees" / "local-one"
    assert (path / "new.txt").read_text() == "x\n" and not (repo / "new.txt").exists()
    assert "worktree-local-one" in subprocess.run(["git", "branch"], cwd=repo, env=GIT_ENV, capture_output=True,
                                                  text=True).stdout
    assert Path(home, "daemon", "daemon.sock").exists()  # it went through the daemon
