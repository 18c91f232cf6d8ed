"""-s/--sandbox through the real command line, google-genai client and fake
Gemini server."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from tests.cli.test_oneshot_cli import API_KEY, run_cli
from .test_sandbox import needs_bwrap


def _responses(fake) -> list[dict]:
    return [p["functionResponse"] for r in fake.requests
            for p in r["body"]["contents"][-1].get("parts", []) if "functionResponse" in p]


def _prompts(fake) -> str:
    return json.dumps([r["body"]["contents"][0] for r in fake.requests])


@pytest.fixture
def home(tmp_path):
    config = tmp_path / "config"
    config.mkdir()
    return {"GEMINI_SPLIT_HOME": str(config), "GEMINI_CLI_SYSTEM_SETTINGS_PATH": str(tmp_path / "etc" / "s.json")}


@needs_bwrap
@pytest.mark.timeout(60)  # a real embedded -p starts (google-genai): slow on a loaded machine
@pytest.mark.parametrize("in_process", [True, False])
def test_bare_s_sandboxes_and_keeps_the_prompt(tmp_path, home, in_process):
    outside = Path("/var/tmp") / f"gemini-split-cli-{uuid.uuid4().hex[:8]}"
    outside.mkdir()
    try:
        script = [{"function_calls": [{"name": "run_shell_command",
                                       "args": {"command": f"touch {outside}/x; touch inside; touch /etc/gs-x"}}]},
                  {"text": "done"}]
        with FakeGemini(script=script, api_key=API_KEY) as fake:
            result = run_cli(["-s", "the question", "-y"], cwd=tmp_path, fake=fake, env_extra={**home, "CI": "true"},
                             in_process=in_process)
        assert result.returncode == 0, result.stderr
        assert "the question" in _prompts(fake)
        assert (tmp_path / "inside").exists()
        assert not (outside / "x").exists() and not Path("/etc/gs-x").exists()
        (response,) = _responses(fake)
        assert "Read-only file system" in json.dumps(response["response"])
    finally:
        for p in sorted(outside.rglob("*"), reverse=True):
            p.unlink()
        outside.rmdir()


@needs_bwrap
def test_gemini_sandbox_docker_means_bubblewrap_with_a_warning(tmp_path, home):
    script = [{"function_calls": [{"name": "run_shell_command", "args": {"command": "touch /etc/gs-y"}}]},
              {"text": "done"}]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        result = run_cli(["-p", "go", "-y"], cwd=tmp_path, fake=fake, env_extra={**home, "GEMINI_SANDBOX": "docker"})
    assert result.returncode == 0, result.stderr
    assert "bubblewrap" in result.stderr and not Path("/etc/gs-y").exists()


def test_a_sandbox_that_cannot_be_had_exits_2(tmp_path, home):
    result = run_cli(["-p", "go", "--sandbox=bwrap"], cwd=tmp_path, env_extra={**home, "PATH": str(tmp_path)})
    assert result.returncode == 2
    assert "bwrap is not installed" in result.stderr and "Traceback" not in result.stderr


def test_sandbox_false_in_the_environment_wins(tmp_path, home):
    script = [{"text": "hello"}]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        result = run_cli(["-p", "go", "--sandbox=bwrap"], cwd=tmp_path, fake=fake,
                         env_extra={**home, "PATH": str(tmp_path), "GEMINI_SANDBOX": "false"})
    assert result.returncode == 0, result.stderr
