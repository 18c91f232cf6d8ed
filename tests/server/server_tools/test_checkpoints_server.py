"""Checkpoints of a ``--tools server`` session (issue 30): the server
snapshots its session's workspace before each edit its tools make, in the
session's area of the workspace root (out of every command's sight), and
deletes them with the session."""

from __future__ import annotations

import json
import subprocess

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from tests.e2e.test_serve_e2e import API_KEY, client, daemon
from .helpers import unix_listener


def _write(name: str, content: str) -> list[dict]:
    return [{"function_calls": [{"name": "write_file", "args": {"file_path": name, "content": content}}]},
            {"text": f"wrote {name}"}]


@pytest.mark.timeout(90)
def test_server_run_edits_are_checkpointed_in_the_sessions_area_and_deleted_with_it(tmp_path):
    root = tmp_path / "workspaces"
    server_home = tmp_path / "server-home"
    server_home.mkdir()
    (server_home / "settings.json").write_text(json.dumps({"general": {"checkpointing": {"enabled": True}}}))
    client_dir = tmp_path / "client"
    client_dir.mkdir()
    script = _write("f1.txt", "one\n") + _write("f2.txt", "two\n")
    with FakeGemini(script=script, api_key=API_KEY) as fake, unix_listener() as listen, daemon(
            tmp_path, fake, "--server-tools", "--workspace-root", str(root), "--sandbox", "none", *listen,
            "--max-approval-mode", "yolo", env_extra={"GEMINI_SPLIT_HOME": str(server_home)}) as (_, address):
        first = client(["--server", address, "--tools", "server", "--yolo", "-p", "write f1", "-o", "json"],
                       cwd=client_dir)
        assert first.returncode == 0, first.stderr
        session = json.loads(first.stdout)["session_id"]
        second = client(["--server", address, "--tools", "server", "--yolo", "--resume", session, "-p", "write f2"],
                        cwd=client_dir)
        assert second.returncode == 0, second.stderr
        area = root / ".checkpoints" / session
        records = sorted((area / "checkpoints").glob("*.json"))
        assert [json.loads(r.read_text())["tool_call"]["args"]["file_path"] for r in records] == ["f1.txt", "f2.txt"]
        record = json.loads(records[1].read_text())
        assert record["session_id"] == session and record["tool_call"]["name"] == "write_file"
        (commit,) = record["commits"].values()
        (shadow,) = [p for p in (area / "history").iterdir() if p.is_dir()]
        tree = subprocess.run(["git", "--git-dir", str(shadow), "ls-tree", "--name-only", commit],
                              capture_output=True, text=True, check=True).stdout.split()
        assert tree == ["f1.txt"]  # the workspace as it was before f2 was written
        workspace = root / session
        assert sorted(p.name for p in workspace.iterdir()) == ["f1.txt", "f2.txt"]  # nothing of ours in it
        deleted = client(["--server", address, "--delete-session", session], cwd=client_dir)
        assert deleted.returncode == 0, deleted.stderr
    assert not area.exists() and not workspace.exists()


@pytest.mark.timeout(120)
def test_gemini_split_restore_lists_and_restores_a_server_sessions_checkpoint_after_a_server_restart(tmp_path):
    root = tmp_path / "workspaces"
    server_home = tmp_path / "server-home"
    server_home.mkdir()
    (server_home / "settings.json").write_text(json.dumps({"general": {"checkpointing": {"enabled": True}}}))
    client_dir = tmp_path / "client"
    client_dir.mkdir()
    script = _write("f1.txt", "one\n") + _write("f2.txt", "two\n") + _write("f3.txt", "three\n") + [
        {"text": "f2 is written again"}]
    options = ("--server-tools", "--workspace-root", str(root), "--sandbox", "none", "--max-approval-mode", "yolo")
    server_env = {"GEMINI_SPLIT_HOME": str(server_home)}
    with FakeGemini(script=script, api_key=API_KEY) as fake, unix_listener() as listen:
        with daemon(tmp_path, fake, *options, *listen, env_extra=server_env) as (_, address):
            first = client(["--server", address, "--tools", "server", "--yolo", "-p", "write f1", "-o", "json"],
                           cwd=client_dir)
            assert first.returncode == 0, first.stderr
            session = json.loads(first.stdout)["session_id"]
            for n in (2, 3):
                more = client(["--server", address, "--tools", "server", "--yolo", "--resume", session,
                               "-p", f"write f{n}"], cwd=client_dir)
                assert more.returncode == 0, more.stderr
        (root / session / "f1.txt").write_text("changed by hand\n")
        with daemon(tmp_path, fake, *options, *listen, env_extra=server_env) as (_, address):
            on_server = ["--server", address, "--tools", "server", "--resume", session]
            listed = client([*on_server, "restore"], cwd=client_dir)
            assert listed.returncode == 0, listed.stderr
            ids = [line.split()[0] for line in listed.stdout.splitlines()]
            assert [line.split()[-1] for line in listed.stdout.splitlines()] == ["f1.txt", "f2.txt", "f3.txt"]
            asked = client([*on_server, "restore", ids[1]], cwd=client_dir)
            assert asked.returncode == 2 and "f1.txt: put back  ← changed by hand" in asked.stderr
            assert (root / session / "f3.txt").exists()  # nothing written without the answer
            done = client([*on_server, "restore", ids[1], "--yes", "--files-only"], cwd=client_dir)
            assert done.returncode == 0, done.stderr
            unknown = client([*on_server, "restore", "nope", "--yes"], cwd=client_dir)
            restored_files = sorted(p.name for p in (root / session).iterdir())
            again = client([*on_server, "restore", ids[1], "--yes", "--propose-again"], cwd=client_dir)
            last = fake.requests[-1]["body"]["contents"]
    assert restored_files == ["f1.txt"]
    assert (root / session / "f1.txt").read_text() == "one\n"
    # Then the conversation: back at the call, which the server (yolo) ran again.
    assert again.returncode == 0, again.stderr
    assert "f2 is written again" in again.stdout
    assert "write f2" in json.dumps(last) and "write f3" not in json.dumps(last)
    assert (root / session / "f2.txt").read_text() == "two\n" and not (root / session / "f3.txt").exists()
    assert "f2.txt: deleted (created since)" in done.stderr and "f3.txt" in done.stderr
    assert unknown.returncode == 42 and "no checkpoint" in unknown.stderr
    assert not list(client_dir.iterdir())  # nothing happened where the client is
