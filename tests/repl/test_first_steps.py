"""Issue 14 §11: the README's first steps work where they are run — in an
empty directory, with a dummy key against the local fake Gemini server."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"

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
