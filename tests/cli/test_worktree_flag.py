"""gemini-cli's ``-w/--worktree [NAME]`` (its docs/cli/git-worktrees.md and
0.61.0's code): a session in a new git worktree
``<project>/.gemini/worktrees/NAME`` on branch ``worktree-NAME``, made with
real ``git`` in a temporary repository, the model's edits landing there and
kept at exit. The CLI runs in this process against the fake Gemini server;
``serve`` is a real process."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from gemini_split.testing.fake_gemini import FakeGemini
from gemini_split.worktrees import check_name, generated_name, worktree_at

from tests.e2e.test_serve_e2e import API_KEY as SERVE_KEY
from tests.e2e.test_serve_e2e import daemon
from tests.inprocess import cli

pytestmark = pytest.mark.timeout(60)

API_KEY = "test-key-123"
WRITE = [{"function_calls": [{"name": "write_file", "args": {"file_path": "new.txt", "content": "from the model\n"}}]},
         {"text": "written"}]
NOT_ENABLED = "The --worktree flag is only available when experimental.worktrees is enabled in your settings."


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env={**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with one commit (``a.txt``)."""
    root = tmp_path / "repo"
    root.mkdir()
    git("init", "-q", cwd=root)
    (root / "a.txt").write_text("a\n")
    git("add", "a.txt", cwd=root)
    git("-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "first", cwd=root)
    return root


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A config dir whose settings.json turns gemini-cli's gate on."""
    path = tmp_path / "home"
    path.mkdir()
    (path / "settings.json").write_text(json.dumps({"experimental": {"worktrees": True}}))
    return path


def run(args: list[str], *, cwd: Path, home: Path, fake: FakeGemini | None = None):
    environ = {"HOME": str(home.parent), "GEMINI_SPLIT_HOME": str(home), "PATH": os.environ["PATH"],
               "GEMINI_API_KEY": API_KEY, "GEMINI_CLI_TRUST_WORKSPACE": "true"}
    if fake is not None:
        environ["GOOGLE_GEMINI_BASE_URL"] = fake.url
    return cli(args, environ=environ, cwd=cwd)


def worktrees(repo: Path) -> list[str]:
    """``git worktree list``'s paths and branches, the main checkout left out."""
    lines = git("worktree", "list", "--porcelain", cwd=repo).split("\n\n")
    found = []
    for block in lines[1:]:
        fields = dict(line.split(" ", 1) for line in block.splitlines() if " " in line)
        if fields:
            found.append(f"{fields['worktree']} {fields.get('branch', '')}")
    return found


def test_a_named_worktree_holds_the_models_edits_and_stays_after_the_run(repo, home):
    with FakeGemini(script=WRITE, api_key=API_KEY) as fake:
        done = run(["-w", "feature-search", "-y", "-p", "write it"], cwd=repo, home=home, fake=fake)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "written\n"
    path = repo / ".gemini" / "worktrees" / "feature-search"
    assert f"working in the new git worktree {path} (branch worktree-feature-search)" in done.stderr
    assert worktrees(repo) == [f"{path} refs/heads/worktree-feature-search"]
    assert (path / "new.txt").read_text() == "from the model\n" and (path / "a.txt").exists()
    assert not (repo / "new.txt").exists()  # the main checkout is untouched
    assert "?? new.txt" in git("status", "--porcelain", cwd=path)  # kept, uncommitted, as gemini-cli keeps it
    assert git("rev-parse", "HEAD", cwd=path) == git("rev-parse", "HEAD", cwd=repo)
    # The session was told it works there.
    assert str(path) in json.dumps(fake.requests[0]["body"])


def test_without_a_name_gemini_clis_time_and_random_name_is_made(repo, home):
    with FakeGemini(script=[{"text": "ok"}], api_key=API_KEY) as fake:
        done = run(["-w", "-p", "hi"], cwd=repo, home=home, fake=fake)
    assert done.returncode == 0, done.stderr
    (entry,) = worktrees(repo)
    match = re.fullmatch(r"(\S+)/\.gemini/worktrees/(\S+) refs/heads/worktree-(\S+)", entry)
    assert match and match.group(1) == str(repo) and match.group(2) == match.group(3)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d-\d\d-\d\d-\d\d-\d{3}-[0-9a-z]{4}", match.group(2))
    assert generated_name(0.25, "k3x9") == "1970-01-01-00-00-00-250-k3x9"


def test_from_a_subdirectory_or_another_worktree_it_is_made_under_the_main_checkout(repo, home):
    (repo / "src").mkdir()
    with FakeGemini(script=[{"text": "one"}, {"text": "two"}], api_key=API_KEY) as fake:
        first = run(["-w", "one", "-p", "hi"], cwd=repo / "src", home=home, fake=fake)
        second = run(["-w", "two", "-p", "hi"], cwd=repo / ".gemini" / "worktrees" / "one", home=home, fake=fake)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    base = repo / ".gemini" / "worktrees"
    assert worktrees(repo) == [f"{base / 'one'} refs/heads/worktree-one", f"{base / 'two'} refs/heads/worktree-two"]


def test_without_experimental_worktrees_gemini_clis_refusal_and_nothing_is_made(repo, home):
    (home / "settings.json").write_text("{}")
    done = run(["-w", "x", "-p", "hi"], cwd=repo, home=home)
    assert done.returncode == 2
    assert done.stderr.strip() == f"gemini-split: {NOT_ENABLED}"
    assert worktrees(repo) == [] and not (repo / ".gemini").exists()


def test_git_failures_say_gemini_clis_words_with_gits_and_exit_1(repo, home, tmp_path):
    elsewhere = tmp_path / "not-a-repo"
    elsewhere.mkdir()
    outside = run(["-w", "x", "-p", "hi"], cwd=elsewhere, home=home)
    assert outside.returncode == 1
    assert outside.stderr.startswith("Failed to create or switch to worktree: Command failed with exit code 128: "
                                     "git rev-parse HEAD\n\nfatal: not a git repository")
    empty = tmp_path / "empty"
    empty.mkdir()
    git("init", "-q", cwd=empty)
    fresh = run(["-w", "x", "-p", "hi"], cwd=empty, home=home)
    assert fresh.returncode == 1 and "git rev-parse HEAD" in fresh.stderr  # no commit to start from

    git("branch", "worktree-taken", cwd=repo)
    taken = run(["-w", "taken", "-p", "hi"], cwd=repo, home=home)
    assert taken.returncode == 1
    assert "Command failed with exit code 255: git worktree add" in taken.stderr
    assert "a branch named 'worktree-taken' already exists" in taken.stderr
    assert worktrees(repo) == []


def test_a_worktree_that_exists_is_not_reused_and_the_way_back_to_it_is_said(repo, home):
    with FakeGemini(script=[{"text": "ok"}], api_key=API_KEY) as fake:
        assert run(["-w", "same", "-p", "hi"], cwd=repo, home=home, fake=fake).returncode == 0
        again = run(["-w", "same", "-p", "hi"], cwd=repo, home=home, fake=fake)
    path = repo / ".gemini" / "worktrees" / "same"
    assert again.returncode == 1
    assert again.stderr.strip() == (f"Failed to create or switch to worktree: {path} already exists; to go on "
                                    f"working in it: cd {path} (or choose another name)")
    assert len(fake.requests) == 1


@pytest.mark.parametrize("name", ["a b", "../escape", "-x", ".hidden", "x/../../y", "x.lock", "a" * 101])
def test_a_name_that_cannot_be_a_directory_and_a_branch_is_refused_before_git_runs(repo, home, name):
    done = run([f"--worktree={name}", "-p", "hi"], cwd=repo, home=home)
    assert done.returncode == 2
    assert "invalid worktree name" in done.stderr and "letters, digits" in done.stderr
    assert worktrees(repo) == [] and not (repo / ".gemini").exists()
    assert check_name(" fix/bug-12 ") == "fix/bug-12"


@pytest.mark.parametrize("flags, said", [
    (["--server", "ws://127.0.0.1:9", "--tools", "server"], "with --tools server the tools run in the server's"),
    (["--workspace", "."], "--worktree and --workspace cannot be combined"),
    (["--list-sessions"], "it does not go with --list-sessions"),
    (["--acp"], "it does not go with --acp"),
])
def test_flags_it_cannot_go_with_are_refused_and_nothing_is_made(repo, home, flags, said):
    done = run(["-w", "x", *flags], cwd=repo, home=home)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr
    assert worktrees(repo) == []


def test_against_serve_the_worktree_is_on_the_client_where_the_tools_edit(repo, home, tmp_path):
    with FakeGemini(script=WRITE, api_key=SERVE_KEY) as fake, daemon(tmp_path, fake) as (_proc, address):
        done = run(["--server", address, "-w", "remote", "-y", "-p", "write it"], cwd=repo, home=home, fake=fake)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "written\n"
    path = repo / ".gemini" / "worktrees" / "remote"
    assert (path / "new.txt").read_text() == "from the model\n" and not (repo / "new.txt").exists()
    assert not list((tmp_path / "server").rglob("new.txt"))


def test_a_directory_in_a_worktree_is_known_as_one_without_running_git(repo, home):
    assert worktree_at(repo) is None
    with FakeGemini(script=[{"text": "ok"}], api_key=API_KEY) as fake:
        assert run(["-w", "deep", "-p", "hi"], cwd=repo, home=home, fake=fake).returncode == 0
    path = repo / ".gemini" / "worktrees" / "deep"
    (path / "pkg").mkdir()
    found = worktree_at(path / "pkg")
    assert found is not None and (found.name, found.path, found.branch) == ("deep", path, "worktree-deep")
