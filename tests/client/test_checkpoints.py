"""Checkpoints (issue 30, general.checkpointing.enabled): the workspace is
snapshotted into a shadow git repository before each edit tool runs, and
``gemini-split restore`` puts the files back — through the real CLI in
embedded mode, the real google-genai client and the fake Gemini server."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from gemini_split.tools.checkpoints import project_hash
from gemini_split.testing.fake_gemini import FakeGemini

from tests.cli.test_oneshot_cli import API_KEY, run_cli

ON = {"general": {"checkpointing": {"enabled": True}}}


def _write(name: str, content: str) -> list[dict]:
    return [{"function_calls": [{"name": "write_file", "args": {"file_path": name, "content": content}}]},
            {"text": f"wrote {name}"}]


def _home(tmp_path: Path, settings: dict | None = ON) -> Path:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    if settings is not None:
        (home / "settings.json").write_text(json.dumps(settings))
    return home


def _workspace(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    return workspace


def _run(args, *, workspace, home, fake=None, stdin=""):
    return run_cli(args, cwd=workspace, fake=fake, stdin=stdin, env_extra={"GEMINI_SPLIT_HOME": str(home)})


def _three_turns(tmp_path: Path, fake: FakeGemini, workspace: Path, home: Path) -> list[str]:
    """Three prompts in one session, each writing a file; returns the
    checkpoint ids ``gemini-split restore`` lists."""
    for i, resume in ((1, []), (2, ["--resume", "latest"]), (3, ["--resume", "latest"])):
        result = _run(["-p", f"write f{i}", "--approval-mode", "yolo", *resume], workspace=workspace, home=home,
                      fake=fake)
        assert result.returncode == 0, result.stderr
    listed = _run(["restore"], workspace=workspace, home=home)
    assert listed.returncode == 0, listed.stderr
    ids = [line.split()[0] for line in listed.stdout.splitlines()]
    assert len(ids) == 3 and [line.split()[-1] for line in listed.stdout.splitlines()] == ["f1.txt", "f2.txt", "f3.txt"]
    return ids


def _record(home: Path, workspace: Path, checkpoint_id: str) -> dict:
    path = home / "tmp" / project_hash(Path(os.path.realpath(workspace))) / "checkpoints" / f"{checkpoint_id}.json"
    return json.loads(path.read_text())


def test_each_edit_is_checkpointed_and_restore_puts_the_files_back_as_before_it(tmp_path):
    workspace, home = _workspace(tmp_path), _home(tmp_path)
    script = _write("f1.txt", "one\n") + _write("f2.txt", "two\n") + _write("f3.txt", "three\n")
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        ids = _three_turns(tmp_path, fake, workspace, home)
    records = [_record(home, workspace, i) for i in ids]
    assert len({r["session_id"] for r in records}) == 1 and records[0]["session_id"]
    seqs = [r["request_seq"] for r in records]
    assert all(isinstance(s, int) for s in seqs) and seqs == sorted(set(seqs))
    assert records[1]["tool_call"]["name"] == "write_file"
    assert records[1]["tool_call"]["args"] == {"file_path": "f2.txt", "content": "two\n"}
    assert records[1]["tool_call"]["call_id"]
    # The shadow repository is outside the project; the project has no .git.
    assert (home / "history" / project_hash(Path(os.path.realpath(workspace))) / "HEAD").is_file()
    assert not (workspace / ".git").exists()

    result = _run(["restore", ids[1], "--yes", "--files-only"], workspace=workspace, home=home)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in workspace.iterdir()) == ["f1.txt"]
    assert (workspace / "f1.txt").read_text() == "one\n"
    assert "f2.txt: deleted (created since)" in result.stderr and "f3.txt" in result.stderr
    assert "by hand" not in result.stderr  # the agent made every change since


def test_restore_puts_the_files_back_offline_with_no_key_and_no_model_call(tmp_path):
    """gemini-cli's /restore needs no model: nor does restore, unless asked
    to propose the edit again."""
    workspace, home = _workspace(tmp_path), _home(tmp_path)
    script = _write("f1.txt", "one\n") + _write("f2.txt", "two\n") + _write("f3.txt", "three\n")
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        ids = _three_turns(tmp_path, fake, workspace, home)
        calls = len(fake.requests)
        done = run_cli(["restore", ids[1], "--yes"], cwd=workspace, fake=fake, drop=("GEMINI_API_KEY",),
                       env_extra={"GEMINI_SPLIT_HOME": str(home)})
        assert len(fake.requests) == calls  # not one model call
    assert done.returncode == 0, done.stderr
    assert "no credentials" not in done.stderr
    assert sorted(p.name for p in workspace.iterdir()) == ["f1.txt"] and (workspace / "f1.txt").read_text() == "one\n"
    assert done.stdout == ""  # no model text from a file restore
    assert "--propose-again" in done.stderr and "conversation was left as it is" in done.stderr
    quiet = run_cli(["restore", ids[0], "--yes", "--files-only"], cwd=workspace, drop=("GEMINI_API_KEY",),
                    env_extra={"GEMINI_SPLIT_HOME": str(home)})
    assert quiet.returncode == 0 and "--propose-again" not in quiet.stderr  # asked for the files alone


def test_with_a_skill_installed_a_checkpoint_is_of_the_project_and_restores(tmp_path):
    """Issue 42: the workspace shows a skill's folder too, and checkpoints
    were recorded against it, so restore refused them ("not a directory of
    this workspace"): they are of the project's directories only."""
    workspace, home = _workspace(tmp_path), _home(tmp_path)
    skill = home / "skills" / "tidy"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: tidy\ndescription: Tidy things.\n---\nBe tidy.\n")
    script = _write("f1.txt", "one\n") + _write("f2.txt", "two\n")
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        for i, resume in ((1, []), (2, ["--resume", "latest"])):
            done = _run(["-p", f"write f{i}", "--approval-mode", "yolo", *resume], workspace=workspace, home=home,
                        fake=fake)
            assert done.returncode == 0, done.stderr
        assert "tidy" in json.dumps(fake.requests[0]["body"])  # the skill was offered
    listed = _run(["restore"], workspace=workspace, home=home)
    ids = [line.split()[0] for line in listed.stdout.splitlines()]
    restored = _run(["restore", ids[1], "--yes"], workspace=workspace, home=home)
    assert restored.returncode == 0, restored.stderr
    assert sorted(p.name for p in workspace.iterdir()) == ["f1.txt"]
    records = list((home / "tmp").rglob("checkpoints/*.json"))
    assert records and all(str(skill) not in r.read_text() for r in records)


def test_a_file_changed_by_hand_since_the_checkpoint_is_named_before_anything_is_written(tmp_path):
    workspace, home = _workspace(tmp_path), _home(tmp_path)
    script = _write("f1.txt", "one\n") + _write("f2.txt", "two\n") + _write("f3.txt", "three\n")
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        ids = _three_turns(tmp_path, fake, workspace, home)
    (workspace / "f1.txt").write_text("mine now\n")
    asked = _run(["restore", ids[1]], workspace=workspace, home=home, stdin="y\n")
    assert asked.returncode == 2, asked.stderr  # piped stdin: no question, nothing written
    assert "f1.txt: put back  ← changed by hand since the checkpoint" in asked.stderr
    assert "f1.txt was changed since the checkpoint by something other than the agent's edit tools" in asked.stderr
    assert "--yes" in asked.stderr
    assert (workspace / "f1.txt").read_text() == "mine now\n" and (workspace / "f3.txt").exists()
    done = _run(["restore", ids[1], "--yes", "--files-only"], workspace=workspace, home=home)
    assert done.returncode == 0, done.stderr
    assert (workspace / "f1.txt").read_text() == "one\n"


def test_a_corrupted_shadow_repository_refuses_the_edit_with_a_clear_error_and_the_session_goes_on(tmp_path):
    workspace, home = _workspace(tmp_path), _home(tmp_path)
    shadow = home / "history" / project_hash(Path(os.path.realpath(workspace)))
    shadow.mkdir(parents=True)
    (shadow / "HEAD").write_text("garbage\n")
    (shadow / "objects").mkdir()
    script = _write("f1.txt", "one\n") + [{"text": "still here"}]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        first = _run(["-p", "write f1", "--approval-mode", "yolo"], workspace=workspace, home=home, fake=fake)
        assert first.returncode == 0, first.stderr
        response = fake.requests[1]["body"]["contents"][-1]["parts"][0]["functionResponse"]["response"]
        second = _run(["-p", "and now?", "--resume", "latest"], workspace=workspace, home=home, fake=fake)
    assert response["error"]["code"] == "checkpoint_failed"
    message = response["error"]["message"]
    assert str(shadow) in message and "general.checkpointing.enabled" in message
    assert not (workspace / "f1.txt").exists()  # refused: an edit that could not be undone did not run
    assert "checkpoint" in first.stderr  # the user sees why
    assert second.returncode == 0 and "still here" in second.stdout


def _tree_digest(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(filenames + dirnames):
            path = Path(dirpath) / name
            info = os.lstat(path)
            data = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
            digest = hashlib.sha256(data).hexdigest()
            out[str(path.relative_to(root))] = f"{info.st_mode:o} {info.st_mtime_ns} {digest}"
    return out


def test_a_workspace_that_is_a_git_repository_with_uncommitted_changes_keeps_its_git_untouched(tmp_path):
    workspace, home = _workspace(tmp_path), _home(tmp_path)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(workspace)]
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    (workspace / "tracked.txt").write_text("committed\n")
    subprocess.run([*git, "add", "tracked.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "first"], check=True)
    (workspace / "tracked.txt").write_text("uncommitted change\n")
    (workspace / "untracked.txt").write_text("not added\n")
    (workspace / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\ntouch \"$GIT_DIR/../HOOK-RAN\"\nexit 1\n")
    (workspace / ".git" / "hooks" / "pre-commit").chmod(0o755)
    before = _tree_digest(workspace / ".git")
    script = _write("f1.txt", "one\n") + _write("tracked.txt", "agent's\n")
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        for resume in ([], ["--resume", "latest"]):
            result = _run(["-p", "go", "--approval-mode", "yolo", *resume], workspace=workspace, home=home, fake=fake)
            assert result.returncode == 0, result.stderr
    first = _run(["restore"], workspace=workspace, home=home).stdout.split()[0]
    restored = _run(["restore", first, "--yes", "--files-only"], workspace=workspace, home=home)
    assert restored.returncode == 0, restored.stderr
    assert _tree_digest(workspace / ".git") == before  # byte for byte, and not even touched
    assert (workspace / "tracked.txt").read_text() == "uncommitted change\n"
    assert (workspace / "untracked.txt").read_text() == "not added\n"
    assert not (workspace / "f1.txt").exists() and not (workspace / "HOOK-RAN").exists()


def test_a_symlink_pointing_outside_is_kept_as_a_link_and_never_followed_out(tmp_path):
    workspace, home = _workspace(tmp_path), _home(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("SECRET-OUTSIDE\n")
    os.symlink(outside, workspace / "out")
    os.symlink(outside / "secret.txt", workspace / "secret-link")
    with FakeGemini(script=_write("f1.txt", "one\n"), api_key=API_KEY) as fake:
        result = _run(["-p", "go", "--approval-mode", "yolo"], workspace=workspace, home=home, fake=fake)
    assert result.returncode == 0, result.stderr
    (outside / "secret.txt").write_text("changed outside\n")
    (outside / "new.txt").write_text("new outside\n")
    checkpoint = _run(["restore"], workspace=workspace, home=home).stdout.split()[0]
    shadow = home / "history" / project_hash(Path(os.path.realpath(workspace)))
    commit = _record(home, workspace, checkpoint)["commits"][str(os.path.realpath(workspace))]
    tree = subprocess.run(["git", "--git-dir", str(shadow), "ls-tree", "-r", commit], capture_output=True,
                          text=True, check=True).stdout
    assert "120000" in tree and "out\n" in tree and "secret-link" in tree and "secret.txt" not in tree
    restored = _run(["restore", checkpoint, "--yes", "--files-only"], workspace=workspace, home=home)
    assert restored.returncode == 0, restored.stderr
    assert "outside" not in restored.stderr and "secret" not in restored.stderr
    assert (outside / "secret.txt").read_text() == "changed outside\n" and (outside / "new.txt").exists()
    assert os.readlink(workspace / "out") == str(outside) and not (workspace / "f1.txt").exists()


@pytest.mark.timeout(60)
def test_a_file_over_ten_mebibytes_is_recorded_as_skipped_not_copied(tmp_path):
    workspace, home = _workspace(tmp_path), _home(tmp_path)
    big = workspace / "data.bin"
    with open(big, "wb") as f:
        f.truncate(20 * 1024 * 1024)
    (workspace / "small.txt").write_text("small\n")
    with FakeGemini(script=_write("f1.txt", "one\n"), api_key=API_KEY) as fake:
        result = _run(["-p", "go", "--approval-mode", "yolo"], workspace=workspace, home=home, fake=fake)
    assert result.returncode == 0, result.stderr
    checkpoint = _run(["restore"], workspace=workspace, home=home).stdout.split()[0]
    record = _record(home, workspace, checkpoint)
    assert record["skipped"] == [str(Path(os.path.realpath(big)))]
    shadow = home / "history" / project_hash(Path(os.path.realpath(workspace)))
    tree = subprocess.run(["git", "--git-dir", str(shadow), "ls-tree", "-r", "--name-only",
                           record["commits"][str(os.path.realpath(workspace))]],
                          capture_output=True, text=True, check=True).stdout.split()
    assert tree == ["small.txt"]
    size = sum(p.stat().st_size for p in shadow.rglob("*") if p.is_file())
    assert size < 1024 * 1024
    restored = _run(["restore", checkpoint, "--yes", "--files-only"], workspace=workspace, home=home)
    assert restored.returncode == 0, restored.stderr
    assert big.stat().st_size == 20 * 1024 * 1024  # left as it is


def test_an_unknown_checkpoint_is_bad_input(tmp_path):
    workspace, home = _workspace(tmp_path), _home(tmp_path)
    for name in ("nope", "../../etc/passwd", ".hidden"):
        result = _run(["restore", name, "--yes"], workspace=workspace, home=home)
        assert result.returncode == 42, result.stderr
        assert "no checkpoint" in result.stderr


def _fake_git(tmp_path: Path) -> tuple[Path, Path]:
    """A ``git`` first on PATH that notes each run, then runs the real one."""
    real = subprocess.run(["sh", "-c", "command -v git"], capture_output=True, text=True, check=True).stdout.strip()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "git-runs.log"
    (bin_dir / "git").write_text(f"#!/bin/sh\necho \"$@\" >> {log}\nexec {real} \"$@\"\n")
    (bin_dir / "git").chmod(0o755)
    return bin_dir, log


@pytest.mark.parametrize("enabled", [False, True], ids=["off", "on"])
def test_with_checkpointing_off_no_git_is_ever_started(tmp_path, monkeypatch, enabled):
    bin_dir, log = _fake_git(tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    workspace = _workspace(tmp_path)
    home = _home(tmp_path, {"general": {"checkpointing": {"enabled": enabled}}})
    with FakeGemini(script=_write("f1.txt", "one\n"), api_key=API_KEY) as fake:
        result = _run(["-p", "go", "--approval-mode", "yolo"], workspace=workspace, home=home, fake=fake)
    assert result.returncode == 0, result.stderr
    assert (workspace / "f1.txt").read_text() == "one\n"
    if enabled:
        assert "commit" in log.read_text()  # the check sees git when it runs
    else:
        assert not log.exists()
        assert not (home / "history").exists() and not (home / "tmp").exists()


@pytest.mark.timeout(90)
def test_an_mcp_tool_declared_destructive_is_checkpointed_and_a_read_only_one_is_not(tmp_path):
    import sys

    workspace, home = _workspace(tmp_path), _home(tmp_path, {
        **ON, "mcpServers": {"d": {"command": sys.executable,
                                   "args": [str(Path(__file__).parent / "mcp" / "destructive_server.py")],
                                   "trust": True}}})
    (workspace / "precious.txt").write_text("keep me\n")
    script = [{"function_calls": [{"name": "mcp_d_peek", "args": {"name": "precious.txt"}}]},
              {"function_calls": [{"name": "mcp_d_wipe", "args": {"name": "precious.txt"}}]}, {"text": "gone"}]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        result = _run(["-p", "wipe it"], workspace=workspace, home=home, fake=fake)
    assert result.returncode == 0, result.stderr
    assert not (workspace / "precious.txt").exists()
    listed = _run(["restore"], workspace=workspace, home=home).stdout.splitlines()
    assert len(listed) == 1 and "mcp_d_wipe" in listed[0]
    restored = _run(["restore", listed[0].split()[0], "--yes", "--files-only"], workspace=workspace, home=home)
    assert restored.returncode == 0, restored.stderr
    assert (workspace / "precious.txt").read_text() == "keep me\n"


async def test_two_clients_of_one_project_snapshot_in_turn_and_a_stale_git_lock_is_cleared(tmp_path):
    import trio

    from gemini_split.tools.checkpoints import Checkpoints

    workspace, home = _workspace(tmp_path), _home(tmp_path)
    for i in range(50):
        (workspace / f"f{i}.txt").write_text(f"{i}\n")
    first, second = (Checkpoints.for_user([workspace], home) for _ in range(2))  # as two processes would
    taken = []

    async def snapshot(checkpoints, n):
        (workspace / f"edit{n}.txt").write_text(f"{n}\n")
        taken.append(await checkpoints.before(f"c{n}", "write_file", {"file_path": f"edit{n}.txt"}, None, None))

    async with trio.open_nursery() as nursery:
        for n in range(4):
            nursery.start_soon(snapshot, first if n % 2 else second, n)
    assert len({c.commits[str(os.path.realpath(workspace))] for c in taken}) == 4
    shadow = home / "history" / project_hash(Path(os.path.realpath(workspace)))
    (shadow / "index.lock").write_text("")  # a git that was killed mid-write
    await first.before("c9", "write_file", {"file_path": "x"}, None, None)
    assert len(first.list()) == 5


def test_an_include_directory_is_snapshotted_and_restored_too(tmp_path):
    workspace, home = _workspace(tmp_path), _home(tmp_path)
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "util.py").write_text("original\n")
    script = [{"function_calls": [{"name": "replace", "args": {
        "file_path": str(lib / "util.py"), "instruction": "change it", "old_string": "original",
        "new_string": "edited"}}]},
        {"text": "done"}]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        result = _run(["-p", "edit util", "--yolo", "--include-directories", str(lib)], workspace=workspace,
                      home=home, fake=fake)
    assert result.returncode == 0, result.stderr
    assert (lib / "util.py").read_text() == "edited\n"
    (checkpoint,) = [line.split()[0] for line in _run(["--include-directories", str(lib), "restore"],
                                                      workspace=workspace, home=home).stdout.splitlines()]
    assert (home / "history" / project_hash(Path(os.path.realpath(lib))) / "HEAD").is_file()
    restored = _run(["--include-directories", str(lib), "restore", checkpoint, "--yes", "--files-only"],
                    workspace=workspace, home=home)
    assert restored.returncode == 0, restored.stderr
    assert (lib / "util.py").read_text() == "original\n"
    assert "by hand" not in restored.stderr  # the agent's own edit, recognised in the included directory


def test_a_tampered_record_is_refused_before_git_sees_it(tmp_path):
    workspace, home = _workspace(tmp_path), _home(tmp_path)
    with FakeGemini(script=_write("f1.txt", "one\n"), api_key=API_KEY) as fake:
        assert _run(["-p", "go", "--yolo"], workspace=workspace, home=home, fake=fake).returncode == 0
    (checkpoint,) = [line.split()[0] for line in _run(["restore"], workspace=workspace, home=home).stdout.splitlines()]
    path = home / "tmp" / project_hash(Path(os.path.realpath(workspace))) / "checkpoints" / f"{checkpoint}.json"
    record = json.loads(path.read_text())
    record["commits"] = {str(os.path.realpath(workspace)): f"--output={tmp_path / 'written-by-git'}"}
    path.write_text(json.dumps(record))
    result = _run(["restore", checkpoint, "--yes", "--files-only"], workspace=workspace, home=home)
    assert result.returncode == 1 and "is damaged" in result.stderr
    assert not (tmp_path / "written-by-git").exists() and (workspace / "f1.txt").exists()
    record["commits"] = {"/etc": "0" * 40}
    path.write_text(json.dumps(record))
    result = _run(["restore", checkpoint, "--yes", "--files-only"], workspace=workspace, home=home)
    assert result.returncode == 1 and "not a directory of this workspace" in result.stderr
    path.write_text("{not json")
    result = _run(["restore", checkpoint, "--yes"], workspace=workspace, home=home)
    assert result.returncode == 1 and "is damaged" in result.stderr


def _contents_text(request: dict) -> str:
    return json.dumps(request["body"]["contents"])


def test_restore_proposes_the_call_again_in_the_rewound_conversation(tmp_path):
    workspace, home = _workspace(tmp_path), _home(tmp_path)
    script = _write("f1.txt", "one\n") + _write("f2.txt", "two\n") + _write("f3.txt", "three\n") + [
        {"text": "f2 is written again"}]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        ids = _three_turns(tmp_path, fake, workspace, home)
        refused = _run(["restore", ids[1], "--yes", "--propose-again"], workspace=workspace, home=home, fake=fake)
        last = fake.requests[-1]
    # One-shot rules: nobody to ask, so the call proposed again is refused
    # (--approval-mode yolo would run it); the files are back either way.
    assert refused.returncode == 0, refused.stderr
    assert sorted(p.name for p in workspace.iterdir()) == ["f1.txt"]
    assert "f2 is written again" in refused.stdout
    sent = _contents_text(last)
    assert "write f2" in sent and "write f3" not in sent and "three" not in sent  # turn 3 is gone
    calls = [p["functionCall"] for c in last["body"]["contents"] for p in c["parts"] if "functionCall" in p]
    assert calls[-1]["name"] == "write_file" and calls[-1]["args"] == {"file_path": "f2.txt", "content": "two\n"}
    response = last["body"]["contents"][-1]["parts"][0]["functionResponse"]["response"]
    assert response["error"]["code"] == "refused"


def test_restore_with_yolo_runs_the_call_proposed_again(tmp_path):
    workspace, home = _workspace(tmp_path), _home(tmp_path)
    script = _write("f1.txt", "one\n") + _write("f2.txt", "two\n") + _write("f3.txt", "three\n") + [
        {"text": "f2 is written again"}]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        ids = _three_turns(tmp_path, fake, workspace, home)
        (workspace / "f1.txt").write_text("by hand\n")
        done = _run(["--approval-mode", "yolo", "restore", ids[1], "--yes", "--propose-again"], workspace=workspace,
                    home=home, fake=fake)
        last = fake.requests[-1]
    assert done.returncode == 0, done.stderr
    assert "f1.txt was changed since the checkpoint" in done.stderr
    assert sorted(p.name for p in workspace.iterdir()) == ["f1.txt", "f2.txt"]
    assert (workspace / "f1.txt").read_text() == "one\n" and (workspace / "f2.txt").read_text() == "two\n"
    assert "write f3" not in _contents_text(last)
    assert "Created f2.txt" in json.dumps(last["body"]["contents"][-1])
    # The call that ran again was checkpointed too: a fourth checkpoint.
    assert len(_run(["restore"], workspace=workspace, home=home).stdout.splitlines()) == 4
