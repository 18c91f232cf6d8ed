"""Issue 35 §9, as the attack ran it: ``serve --state-dir`` in an existing
0755 directory outside /tmp and /home, under umask 022; another local
account (made with ``useradd``) tries to read the session database, its
side files and the ACP log. Every file is 0600 whatever the directory's
mode, and ``serve`` says at start that the directory is open to others."""

from __future__ import annotations

import logging
import os
import shutil
import stat
import uuid

import pytest

from gemini_split.commands.run_acp import open_log
from gemini_split.testing.fake_gemini import FakeGemini

from tests.tools.sandbox.other_user import other_user, run_as
from tests.e2e.test_serve_e2e import API_KEY, client, daemon

PROMPT = "PRIVATE-PROMPT-5e1a"


@pytest.fixture
def open_dir():
    """A 0755 directory under /srv (every ancestor enterable by others)."""
    path = f"/srv/gs-state-{uuid.uuid4().hex[:8]}"
    os.makedirs(path)
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _umask_022():
    os.umask(0o022)


@pytest.mark.timeout(90)
def test_another_local_user_cannot_read_a_session_from_a_0755_state_dir(open_dir, tmp_path):
    other = other_user()
    with FakeGemini(script=[{"text": "answer"}], api_key=API_KEY) as fake, \
            daemon(tmp_path, fake, "--state-dir", open_dir, preexec_fn=_umask_022) as (_, address):
        done = client(["--server", address, "-p", PROMPT], cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        files = sorted(name for name in os.listdir(open_dir))
        modes = {name: stat.S_IMODE(os.stat(os.path.join(open_dir, name)).st_mode) for name in files}
        read = run_as(other, ["sh", "-c", f"cat {open_dir}/* 2>&1; grep -c {PROMPT} {open_dir}/* 2>&1"])
    assert "sessions.db" in files and "sessions.db-wal" in files, files
    assert all(mode == 0o600 for mode in modes.values()), modes
    assert PROMPT not in read.stdout.replace(f"grep -c {PROMPT}", "")
    assert "Permission denied" in read.stdout


def test_files_left_readable_by_an_earlier_version_are_closed_and_an_open_dir_is_warned_of(open_dir, caplog):
    from pathlib import Path

    from gemini_split.server.store.sqlite import SQLiteStore

    for name in ("sessions.db", "sessions.db-wal", "serve.lock"):
        with open(os.path.join(open_dir, name), "w"):
            pass
        os.chmod(os.path.join(open_dir, name), 0o644)
    SQLiteStore(Path(open_dir))._make_private()
    assert {stat.S_IMODE(os.stat(os.path.join(open_dir, n)).st_mode) for n in os.listdir(open_dir)} == {0o600}
    assert f"the state directory {open_dir} can be listed by other local users (mode 0755): chmod 700 it" \
        in caplog.text


def test_the_acp_log_is_created_0600_whatever_the_umask(open_dir):
    other = other_user()
    path = os.path.join(open_dir, "logs", "gemini-acp.log")
    saved = os.umask(0o022)
    try:
        stop = open_log(__import__("pathlib").Path(path))
        try:
            logging.getLogger("gemini_split.test").warning("session of %s", PROMPT)
        finally:
            stop()
    finally:
        os.umask(saved)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    read = run_as(other, ["cat", path])
    assert read.returncode != 0 and PROMPT not in read.stdout
