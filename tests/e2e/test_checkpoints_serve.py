"""Checkpoints of client-run tools in a session on ``serve`` (issue 30):
the client snapshots its workspace, the server keeps the conversation;
``gemini-split --server URL restore ID`` puts the files back and has the
call proposed again in the rewound session, after a server restart."""

from __future__ import annotations

import json

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from tests.e2e.test_serve_e2e import API_KEY, _env, daemon
from tests.inprocess import cli
from tests.server.server_tools.helpers import unix_listener


def _write(name: str, content: str) -> list[dict]:
    return [{"function_calls": [{"name": "write_file", "args": {"file_path": name, "content": content}}]},
            {"text": f"wrote {name}"}]


@pytest.mark.timeout(120)
def test_restore_through_serve_after_a_restart_puts_files_back_and_reproposes_the_call(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    home = tmp_path / "client-home"
    home.mkdir()
    (home / "settings.json").write_text(json.dumps({"general": {"checkpointing": {"enabled": True}}}))
    server_home = tmp_path / "server-home"
    server_home.mkdir()
    environ = _env(GEMINI_SPLIT_HOME=str(home))

    def run(*args: str):
        return cli(list(args), environ=environ, cwd=workspace)

    script = _write("f1.txt", "one\n") + _write("f2.txt", "two\n") + _write("f3.txt", "three\n") + [
        {"text": "f2 is written again"}]
    with FakeGemini(script=script, api_key=API_KEY) as fake, unix_listener() as listen:
        with daemon(tmp_path, fake, *listen, env_extra={"GEMINI_SPLIT_HOME": str(server_home)}) as (_, address):
            first = run("--server", address, "--yolo", "-p", "write f1", "-o", "json")
            assert first.returncode == 0, first.stderr
            session = json.loads(first.stdout)["session_id"]
            for n in (2, 3):
                more = run("--server", address, "--yolo", "--resume", session, "-p", f"write f{n}")
                assert more.returncode == 0, more.stderr
        with daemon(tmp_path, fake, *listen, env_extra={"GEMINI_SPLIT_HOME": str(server_home)}) as (_, address):
            listed = run("--server", address, "restore")
            ids = [line.split()[0] for line in listed.stdout.splitlines()]
            assert len(ids) == 3, listed.stderr
            done = run("--server", address, "--yolo", "restore", ids[1], "--yes", "--propose-again")
            last = fake.requests[-1]["body"]["contents"]
    assert done.returncode == 0, done.stderr
    assert "f2 is written again" in done.stdout
    assert "write f2" in json.dumps(last) and "write f3" not in json.dumps(last)
    assert sorted(p.name for p in workspace.iterdir()) == ["f1.txt", "f2.txt"]
