"""``security.disableYoloMode`` (gemini-cli: "Disable YOLO mode, even if
enabled by a flag"): an administrator's system settings switch yolo off for
every way of asking for it — the flags, ``$GEMINI_APPROVAL_MODE`` and a
``serve`` that would let its clients ask for it. As gemini-cli does, asking
anyway is a configuration error (exit status 52) before anything runs, and
the message names the setting and the file that set it. (The REPL's keys:
tests/ui/repl/test_daily_commands.py.)"""

from __future__ import annotations

import json

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from tests.cli.test_oneshot_cli import API_KEY, run_cli
from tests.inprocess import cli


@pytest.fixture
def admin(tmp_path):
    """The environment of a machine whose system settings disable yolo."""
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "settings.json").write_text(json.dumps({"security": {"disableYoloMode": True}}))
    config = tmp_path / "config"
    config.mkdir()
    return {"GEMINI_SPLIT_HOME": str(config), "HOME": str(tmp_path / "home"),
            "GEMINI_CLI_SYSTEM_SETTINGS_PATH": str(etc / "settings.json"), "GEMINI_CLI_TRUST_WORKSPACE": "true"}


@pytest.mark.parametrize("asked", [["--yolo"], ["--approval-mode", "yolo"], ["--approval-mode", "auto_approve"],
                                   ["env"]])
def test_every_way_of_asking_for_yolo_exits_52_naming_the_setting_and_its_file(tmp_path, admin, asked):
    work = tmp_path / "work"
    work.mkdir()
    env = dict(admin)
    if asked == ["env"]:
        asked, env["GEMINI_APPROVAL_MODE"] = [], "yolo"
    touch = [{"function_calls": [{"name": "run_shell_command", "args": {"command": "touch RAN"}}]}]
    with FakeGemini(script=touch, api_key=API_KEY) as fake:
        result = run_cli(["-p", "go", *asked], cwd=work, fake=fake, env_extra=env)
    assert result.returncode == 52, result.stderr
    assert "YOLO mode is disabled by security.disableYoloMode" in result.stderr
    assert f"system settings {tmp_path / 'etc' / 'settings.json'}" in result.stderr
    assert fake.requests == [] and not (work / "RAN").exists()


def test_a_user_setting_is_named_too_and_other_modes_still_run(tmp_path, admin):
    (tmp_path / "etc" / "settings.json").unlink()
    (tmp_path / "config" / "settings.json").write_text(json.dumps({"security": {"disableYoloMode": True}}))
    refused = run_cli(["-p", "go", "--yolo"], cwd=tmp_path, env_extra=admin)
    assert refused.returncode == 52
    assert f"user settings {tmp_path / 'config' / 'settings.json'}" in refused.stderr
    with FakeGemini(script=[{"text": "fine"}], api_key=API_KEY) as fake:
        ok = run_cli(["-p", "go", "--approval-mode", "auto_edit"], cwd=tmp_path, fake=fake, env_extra=admin)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip() == "fine"


def test_serve_refuses_to_let_clients_ask_for_yolo_where_its_settings_disable_it(tmp_path, admin):
    env = {**admin, "GEMINI_API_KEY": API_KEY}
    result = cli(["serve", "--listen", f"unix:{tmp_path}/never.sock", "--server-tools", "--sandbox", "none",
                  "--workspace-root", str(tmp_path / "ws"), "--max-approval-mode", "yolo"], environ=env, cwd=tmp_path)
    assert result.returncode == 52, result.stderr
    assert "--max-approval-mode yolo" in result.stderr
    assert f"security.disableYoloMode in the system settings {tmp_path / 'etc' / 'settings.json'}" in result.stderr
    assert not (tmp_path / "never.sock").exists()
