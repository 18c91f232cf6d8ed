"""``--list-sessions`` and ``--delete-session`` in embedded mode only read
and change the local session store: they run without a model key (gemini-cli
lists its sessions without one too)."""

from __future__ import annotations

import json

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from .test_oneshot_cli import run_cli

pytestmark = pytest.mark.timeout(90)


def test_sessions_are_listed_and_deleted_in_embedded_mode_without_any_model_key(tmp_path):
    home = {"GEMINI_SPLIT_HOME": str(tmp_path / "home")}
    with FakeGemini(api_key="test-key-123", script=[{"text": "noted"}]) as fake:
        made = run_cli(["-p", "remember the blue folder", "-o", "json"], cwd=tmp_path, fake=fake, env_extra=home)
    assert made.returncode == 0, made.stderr
    sid = json.loads(made.stdout)["session_id"]

    listed = run_cli(["--list-sessions"], cwd=tmp_path, env_extra=home, drop=("GEMINI_API_KEY",))
    assert listed.returncode == 0, listed.stderr
    assert sid in listed.stdout and "remember the blue folder" in listed.stdout
    assert "credentials" not in listed.stderr

    deleted = run_cli(["--delete-session", sid], cwd=tmp_path, env_extra=home, drop=("GEMINI_API_KEY",))
    assert deleted.returncode == 0, deleted.stderr
    assert f"Deleted session {sid}" in deleted.stdout + deleted.stderr
    again = run_cli(["--list-sessions"], cwd=tmp_path, env_extra=home, drop=("GEMINI_API_KEY",))
    assert again.returncode == 0 and sid not in again.stdout


def test_a_prompt_without_a_key_still_says_which_credentials_to_set(tmp_path):
    result = run_cli(["-p", "hi"], cwd=tmp_path, env_extra={"GEMINI_SPLIT_HOME": str(tmp_path / "home")},
                     drop=("GEMINI_API_KEY",))
    assert result.returncode == 41 and "no credentials for Gemini" in result.stderr
