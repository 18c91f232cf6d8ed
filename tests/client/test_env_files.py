"""``.env`` files as gemini-cli loads them (issue 31 item 8): a user whose key
lives in ``.env`` gets an answer, not exit 41.

Real ``gemini-split`` processes against the fake Gemini server, which
accepts only its own key: a request that reaches it with status 0 proves
the key came from the file. The request's path shows the model name.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

pytestmark = pytest.mark.timeout(90)

KEY = "key-from-dot-env"


@pytest.fixture
def setup(tmp_path: Path) -> dict:
    home = tmp_path / "home"
    work = tmp_path / "home" / "projects" / "app"
    (home / ".gemini").mkdir(parents=True)
    work.mkdir(parents=True)
    (work / ".git").mkdir()
    trusted = tmp_path / "trusted.json"
    trusted.write_text(json.dumps({str(work): "TRUST_FOLDER"}))
    return {"home": home, "work": work, "trusted": trusted}


def run(setup: dict, fake: FakeGemini, *args: str, cwd: Path | None = None, **extra: str
        ) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI", "GOOGLE", "DEBUG"))}
    env.update(HOME=str(setup["home"]), GEMINI_CLI_TRUSTED_FOLDERS_PATH=str(setup["trusted"]),
               GOOGLE_GEMINI_BASE_URL=fake.url, **extra)
    return subprocess.run([sys.executable, "-m", "gemini_split", *args], cwd=cwd or setup["work"], env=env,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def models_requested(fake: FakeGemini) -> list[str]:
    return [r["path"].split("/models/")[1].split(":")[0] for r in fake.requests]


def test_the_key_in_the_projects_dot_env_answers_the_prompt(setup):
    (setup["work"] / ".env").write_text(f"# my key\nGEMINI_API_KEY={KEY}\nGEMINI_MODEL='gemini-2.5-pro'\n")
    with FakeGemini(script=[{"text": "hello from the model"}], api_key=KEY) as fake:
        done = run(setup, fake, "-p", "hi")
    assert done.returncode == 0, done.stderr
    assert "hello from the model" in done.stdout
    assert models_requested(fake) == ["gemini-2.5-pro"]


def test_a_dot_env_in_a_parent_directory_is_found_and_dot_gemini_dot_env_comes_first(setup):
    (setup["home"] / "projects" / ".env").write_text("GEMINI_API_KEY=wrong\n")
    (setup["home"] / "projects" / ".gemini").mkdir()
    (setup["home"] / "projects" / ".gemini" / ".env").write_text(f"GEMINI_API_KEY={KEY}\n")
    with FakeGemini(script=[{"text": "ok"}], api_key=KEY) as fake:
        done = run(setup, fake, "-p", "hi")
    assert done.returncode == 0, done.stderr


def test_the_home_dot_gemini_dot_env_is_the_fallback(setup):
    (setup["home"] / ".gemini" / ".env").write_text(f"GEMINI_API_KEY={KEY}\n")
    with FakeGemini(script=[{"text": "ok"}], api_key=KEY) as fake:
        done = run(setup, fake, "-p", "hi")
    assert done.returncode == 0, done.stderr


def test_the_environment_wins_over_the_dot_env(setup):
    (setup["work"] / ".env").write_text("GEMINI_API_KEY=stale-key\nGEMINI_MODEL=gemini-2.5-pro\n")
    with FakeGemini(script=[{"text": "ok"}], api_key=KEY) as fake:
        done = run(setup, fake, "-p", "hi", GEMINI_API_KEY=KEY, GEMINI_MODEL="gemini-2.5-flash-lite")
    assert done.returncode == 0, done.stderr
    assert models_requested(fake) == ["gemini-2.5-flash-lite"]


def test_an_untrusted_folders_dot_env_is_not_read(setup):
    setup["trusted"].write_text(json.dumps({str(setup["work"]): "DO_NOT_TRUST"}))
    (setup["work"] / ".env").write_text(f"GEMINI_API_KEY={KEY}\n")
    with FakeGemini(script=[{"text": "ok"}], api_key=KEY) as fake:
        done = run(setup, fake, "-p", "hi")
        assert done.returncode == 41, done.stderr
        assert not fake.requests
        # --skip-trust trusts the folder for this run, its .env included.
        done = run(setup, fake, "--skip-trust", "-p", "hi")
    assert done.returncode == 0, done.stderr


def test_advanced_ignore_local_env_skips_the_projects_dot_env(setup):
    (setup["home"] / ".gemini" / "settings.json").write_text('{"advanced": {"ignoreLocalEnv": true}}')
    (setup["work"] / ".env").write_text(f"GEMINI_API_KEY={KEY}\n")
    with FakeGemini(script=[{"text": "ok"}], api_key=KEY) as fake:
        done = run(setup, fake, "-p", "hi")
    assert done.returncode == 41


def test_a_project_dot_env_does_not_turn_on_debug(setup):
    (setup["work"] / ".env").write_text(f"GEMINI_API_KEY={KEY}\nDEBUG=1\n")
    with FakeGemini(script=[{"text": "ok"}], api_key=KEY) as fake:
        done = run(setup, fake, "-p", "hi", "--output-format", "json")
    assert done.returncode == 0, done.stderr


def test_garbage_lines_are_named_and_the_good_ones_still_apply(setup):
    (setup["work"] / ".env").write_text(f"this is not a variable\n\x00\x01 junk\nGEMINI_API_KEY={KEY}\n'unclosed\n")
    with FakeGemini(script=[{"text": "ok"}], api_key=KEY) as fake:
        done = run(setup, fake, "-p", "hi")
    assert done.returncode == 0, done.stderr
    assert f"{setup['work'] / '.env'}: line(s) 1, 2, 4 are not NAME=value; skipped" in done.stderr
    assert KEY not in done.stderr  # the values are never echoed


@pytest.mark.parametrize("kind", ["fifo", "huge", "directory", "not utf-8"])
def test_a_dot_env_that_cannot_be_used_is_named_and_sets_nothing(setup, kind):
    path = setup["work"] / ".env"
    if kind == "fifo":
        os.mkfifo(path)  # nobody writes: a blocking read would hang the start-up
    elif kind == "huge":
        path.write_text(f"GEMINI_API_KEY={KEY}\n" + "# padding\n" * 40_000)
    elif kind == "directory":
        path.mkdir()
    else:
        path.write_bytes(b"GEMINI_API_KEY=" + KEY.encode() + b"\nX=\xff\xfe\n")
    with FakeGemini(script=[{"text": "ok"}], api_key=KEY) as fake:
        done = run(setup, fake, "-p", "hi")
    assert done.returncode == 41
    assert f"gemini-split: {path}: not loaded (" in done.stderr
    assert "no variable was set from it" in done.stderr
    assert not fake.requests


def test_the_local_daemon_never_carries_one_projects_dot_env_into_anothers_run(setup):
    """Project A's .env holds the key and a variable of its own; project B
    has none. B's run through the same daemon must not find A's key, and
    the daemon's own environment holds nothing from A's file."""
    b = setup["home"] / "projects" / "b"
    b.mkdir()
    (b / ".git").mkdir()
    setup["trusted"].write_text(json.dumps({str(setup["work"]): "TRUST_FOLDER", str(b): "TRUST_FOLDER"}))
    (setup["work"] / ".env").write_text(f"GEMINI_API_KEY={KEY}\nPROJECT_A_ONLY=secret-a\n")
    daemon_home = tempfile.mkdtemp(prefix="gsd-")  # short: a Unix socket path
    try:
        with FakeGemini(script=[{"text": "answer for A"}, {"text": "answer for B"}], api_key=KEY) as fake:
            a_run = run(setup, fake, "--server", "local", "-p", "hi", GEMINI_SPLIT_HOME=daemon_home)
            b_run = run(setup, fake, "--server", "local", "-p", "hi", cwd=b, GEMINI_SPLIT_HOME=daemon_home)
            assert a_run.returncode == 0, a_run.stderr
            assert "answer for A" in a_run.stdout
            assert b_run.returncode != 0
            assert "answer for B" not in b_run.stdout
            assert len(fake.requests) == 1
            pid = json.loads(Path(daemon_home, "daemon", "daemon.json").read_text())["pid"]
            environ = Path(f"/proc/{pid}/environ").read_bytes()
            assert b"PROJECT_A_ONLY" not in environ and KEY.encode() not in environ
    finally:
        subprocess.run([sys.executable, "-m", "gemini_split", "daemon", "stop"], timeout=30, capture_output=True,
                       env={**os.environ, "GEMINI_SPLIT_HOME": daemon_home, "HOME": str(setup["home"])})
