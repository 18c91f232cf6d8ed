"""--policy and --admin-policy through the real command line, the real
google-genai client and the fake Gemini server."""

from __future__ import annotations

import json

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from ..test_oneshot_cli import API_KEY, run_cli

DENY_SHELL = '[[rule]]\ntoolName = "run_shell_command"\ncommandPrefix = "touch"\ndecision = "deny"\npriority = 1\n' \
             'denyMessage = "no touching here"\n'


def _responses(fake) -> list[dict]:
    return [p["functionResponse"] for r in fake.requests
            for p in r["body"]["contents"][-1].get("parts", []) if "functionResponse" in p]


def _ask(tool: str, **args) -> list[dict]:
    return [{"function_calls": [{"name": tool, "args": args}]}]


@pytest.fixture
def home(tmp_path):
    """An empty config directory and no system policies."""
    config = tmp_path / "config"
    config.mkdir()
    return {"GEMINI_SPLIT_HOME": str(config), "HOME": str(tmp_path / "home"),
            "GEMINI_CLI_SYSTEM_SETTINGS_PATH": str(tmp_path / "etc" / "settings.json")}


def test_a_deny_rule_beats_yolo(tmp_path, home):
    policy = tmp_path / "team.toml"
    policy.write_text(DENY_SHELL)
    work = tmp_path / "work"
    work.mkdir()
    script = _ask("run_shell_command", command="echo hi && touch FLAG") + _ask("run_shell_command", command="echo ok")
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        result = run_cli(["-p", "go", "--yolo", "--policy", str(policy)], cwd=work, fake=fake, env_extra=home)
    assert result.returncode == 0, result.stderr
    denied, allowed = _responses(fake)
    assert denied["response"]["error"]["code"] == "refused"
    assert "no touching here" in denied["response"]["error"]["message"]
    assert not (work / "FLAG").exists()
    assert "ok" in json.dumps(allowed["response"]["output"])


def test_user_policies_directory_is_read_and_admin_policy_outranks_it(tmp_path, home):
    user = tmp_path / "config" / "policies"
    user.mkdir()
    (user / "mine.toml").write_text('[[rule]]\ntoolName = "run_shell_command"\ndecision = "allow"\npriority = 999\n')
    admin = tmp_path / "admin.toml"
    admin.write_text(DENY_SHELL)
    work = tmp_path / "work"
    work.mkdir()
    script = _ask("run_shell_command", command="touch A") + _ask("run_shell_command", command="touch B")
    with FakeGemini(script=script[:1], api_key=API_KEY) as fake:
        result = run_cli(["-p", "go"], cwd=work, fake=fake, env_extra=home)
    assert result.returncode == 0, result.stderr
    assert (work / "A").exists()  # the user's allow rule: no question in one-shot mode
    with FakeGemini(script=script[1:], api_key=API_KEY) as fake:
        result = run_cli(["-p", "go", "--admin-policy", str(admin)], cwd=work, fake=fake, env_extra=home)
    assert result.returncode == 0, result.stderr
    assert not (work / "B").exists()
    (response,) = _responses(fake)
    assert "admin policy" in response["response"]["error"]["message"] or \
        "no touching here" in response["response"]["error"]["message"]


@pytest.mark.parametrize("in_process", [True, False])
def test_a_malformed_policy_file_exits_2_naming_file_rule_and_field(tmp_path, home, in_process):
    bad = tmp_path / "bad.toml"
    bad.write_text('[[rule]]\ntoolName = "glob"\ndecision = "deny"\npriority = 1\n'
                   '[[rule]]\ntoolName = "run_shell_command"\ncommandPrefix = "rm"\ndecision = "nope"\npriority = 1\n')
    result = run_cli(["-p", "hi", "--policy", str(bad)], cwd=tmp_path, env_extra=home, in_process=in_process)
    assert result.returncode == 2
    assert str(bad) in result.stderr and "rule #2" in result.stderr and "field decision" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_missing_policy_path_exits_2(tmp_path, home):
    result = run_cli(["-p", "hi", "--policy", str(tmp_path / "nope")], cwd=tmp_path, env_extra=home)
    assert result.returncode == 2 and "no such file" in result.stderr


def test_project_policies_apply_only_in_a_trusted_folder(tmp_path, home):
    work = tmp_path / "work"
    (work / ".gemini" / "policies").mkdir(parents=True)
    (work / ".gemini" / "policies" / "p.toml").write_text(DENY_SHELL)
    script = _ask("run_shell_command", command="touch FLAG")
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        run_cli(["-p", "go", "--yolo"], cwd=work, fake=fake, env_extra=home)
    assert (work / "FLAG").exists()  # untrusted: the project's rules do not apply
    (work / "FLAG").unlink()
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        run_cli(["-p", "go", "--yolo"], cwd=work, fake=fake, env_extra={**home, "GEMINI_CLI_TRUST_WORKSPACE": "true"})
    assert not (work / "FLAG").exists()
