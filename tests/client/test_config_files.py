"""A configuration file that is not a regular file never hangs a start-up.

Every small file gemini-split reads for itself (settings, trusted folders,
policies, server profiles, custom commands) is opened without blocking and
refused with a clear message when it is a FIFO or a directory: a FIFO named
``settings.json`` used to leave ``gemini-split -p`` waiting forever for a
writer. Real ``gemini-split`` processes against the fake Gemini server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gemini_split.files import read_bounded
from gemini_split.testing.fake_gemini import FakeGemini

from tests.e2e.test_serve_e2e import API_KEY

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def setup(tmp_path: Path) -> dict:
    home = tmp_path / "home"
    work = tmp_path / "work"
    (home / "policies").mkdir(parents=True)
    (work / ".gemini").mkdir(parents=True)
    (tmp_path / "trusted.json").write_text(json.dumps({str(work): "TRUST_FOLDER"}))
    return {"home": home, "work": work, "tmp": tmp_path}


def run(setup: dict, fake: FakeGemini, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI", "GOOGLE"))}
    env.update(HOME=str(setup["tmp"]), GEMINI_SPLIT_HOME=str(setup["home"]),
               GEMINI_CLI_TRUSTED_FOLDERS_PATH=str(setup["tmp"] / "trusted.json"),
               GEMINI_API_KEY=API_KEY, GOOGLE_GEMINI_BASE_URL=fake.url)
    return subprocess.run([sys.executable, "-m", "gemini_split", *args], cwd=setup["work"], env=env,
                          capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("where", ["home/settings.json", "work/.gemini/settings.json"])
def test_a_fifo_in_place_of_a_config_file_is_refused_by_name_instead_of_hanging(setup, where):
    fifo = setup[where.split("/")[0]] / where.split("/", 1)[1]
    os.mkfifo(fifo)  # nothing ever writes to it: a blocking open would wait forever
    with FakeGemini(api_key=API_KEY) as fake:
        done = run(setup, fake, "-p", "hello")
    assert done.returncode != 0
    assert f"{fifo}: cannot read: not a regular file" in done.stderr
    assert not fake.requests  # nothing was sent with half a configuration


def test_a_fifo_given_as_policy_file_is_refused_by_name(setup):
    fifo = setup["tmp"] / "p.toml"
    os.mkfifo(fifo)
    with FakeGemini(api_key=API_KEY) as fake:
        done = run(setup, fake, "--policy", str(fifo), "-p", "hello")
    assert done.returncode != 0
    assert f"policy file {fifo}: cannot read: not a regular file" in done.stderr
    assert not fake.requests


def test_a_fifo_in_place_of_the_trusted_folders_file_is_refused_by_name(setup):
    trusted = setup["tmp"] / "trusted.json"
    trusted.unlink()
    os.mkfifo(trusted)
    with FakeGemini(api_key=API_KEY) as fake:
        done = run(setup, fake, "-p", "hello")
    assert f"{trusted}: cannot read: not a regular file" in done.stderr


def test_a_fifo_in_place_of_servers_json_is_refused_by_name(setup):
    fifo = setup["home"] / "servers.json"
    os.mkfifo(fifo)
    with FakeGemini(api_key=API_KEY) as fake:
        done = run(setup, fake, "server", "list")
    assert done.returncode != 0
    assert f"cannot read {fifo}: " in done.stderr and "not a regular file" in done.stderr


def test_read_bounded_reads_one_byte_past_the_limit_so_the_caller_can_tell_too_large(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 10)
    assert read_bounded(path, 10) == b"x" * 10
    assert read_bounded(path, 4) == b"xxxxx"
    with pytest.raises(OSError, match="not a regular file"):
        read_bounded(tmp_path, 10)
    with pytest.raises(FileNotFoundError):
        read_bounded(tmp_path / "missing", 10)
