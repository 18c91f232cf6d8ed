"""Issue 14 §11: the README's first steps work where they are run — in an
empty directory, with a dummy key against the local fake Gemini server."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[3] / "README.md"

pytestmark = pytest.mark.timeout(60)


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI", "GOOGLE"))}
    env.update(HOME=str(tmp_path), GEMINI_SPLIT_HOME=str(tmp_path / "home"), **extra)
    return env


def test_the_first_prompt_makes_sense_in_an_empty_directory():
    text = README.read_text()
    first = re.search(r"## Getting started.*?```sh\n(.*?)```", text, re.S).group(1)
    assert "notes.txt" not in first
    assert 'gemini-split -p "What files are in this directory?"' in first
    assert "Python 3.11" in text and "source <(gemini-split completions bash)" in text
    assert "bash-completion" in text and "GEMINI_API_KEY=dummy" in text


def test_the_fake_server_with_a_dummy_key_answers_in_an_empty_directory(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    server = subprocess.Popen([sys.executable, "-m", "gemini_split.testing.fake_gemini"],
                              stdout=subprocess.PIPE, text=True, env=_env(tmp_path), cwd=empty)
    try:
        url = server.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        done = subprocess.run([sys.executable, "-m", "gemini_split", "-p", "What files are in this directory?"],
                              capture_output=True, text=True, cwd=empty, timeout=30,
                              env=_env(tmp_path, GOOGLE_GEMINI_BASE_URL=url, GEMINI_API_KEY="dummy"))
    finally:
        server.kill()
        server.wait(timeout=10)
    assert done.returncode == 0, done.stderr
    assert "Echo: What files are in this directory?" in done.stdout


def test_server_status_and_connect_on_the_command_line(tmp_path):
    import json
    import shlex

    from .pty_driver import CTRL_D, ENTER, PtyProcess

    script = tmp_path / "daemon.json"
    script.write_text(json.dumps([{"text": "answer from the daemon"}]))
    command = shlex.join([sys.executable, "-m", "gemini_split", "serve", "--stdio", "-m", f"scripted:{script}"])
    env = _env(tmp_path)
    run = [sys.executable, "-m", "gemini_split"]
    added = subprocess.run([*run, "server", "add", "box", f"stdio:{command}"], capture_output=True, text=True,
                           env=env, cwd=tmp_path, timeout=30)
    assert added.returncode == 0, added.stderr
    status = subprocess.run([*run, "server", "status", "box"], capture_output=True, text=True, env=env,
                            cwd=tmp_path, timeout=30)
    assert status.returncode == 0, status.stderr
    assert re.search(r"session\s+s-\w+ · model scripted:", status.stdout)
    assert "latency" in status.stdout
    embedded = subprocess.run([*run, "server", "status"], capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=30)
    assert embedded.returncode == 0 and "embedded: the agent loop runs in this process" in embedded.stdout
    missing = subprocess.run([*run, "server", "connect", "nope"], capture_output=True, text=True, env=env,
                             cwd=tmp_path, timeout=30)
    assert missing.returncode == 1 and "no profile named 'nope'" in missing.stderr
    repl = PtyProcess([*run, "server", "connect", "box"], env={**env, "TERM": "xterm-256color", "NO_COLOR": "1"},
                      cwd=str(tmp_path))
    try:
        repl.expect(r"gemini-split \S+ · box \(stdio:", timeout=20)
        repl.expect(r"› ")
        repl.type("hello")
        repl.send(ENTER)
        repl.expect(r"answer from the daemon", timeout=20)
        repl.expect(r"› ")
        repl.send(CTRL_D)
        assert repl.wait(timeout=15) == 0
    finally:
        repl.close()
