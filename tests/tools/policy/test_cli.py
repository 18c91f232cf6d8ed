"""--policy and --admin-policy through the real command line, the real
google-genai client and the fake Gemini server."""

from __future__ import annotations

import json

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from tests.cli.test_oneshot_cli import API_KEY, run_cli

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


def _git(*args, cwd):
    import subprocess

    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "HOME": str(cwd), "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True,
                          timeout=30).stdout.strip()


@pytest.mark.timeout(120)
def test_a_git_push_deny_rule_holds_under_yolo_for_all_77_spellings_of_the_attack(tmp_path, home):
    """Issue 35 item 3 as it was run: a real policy file, ``--yolo``, one
    model turn calling every spelling, a real repository whose upstream
    would take the push. Nothing reaches the remote; the controls run."""
    from .test_wrappers import BYPASSED_BEFORE, DENIED_BEFORE, DENY_PUSH

    policy = tmp_path / "team.toml"
    policy.write_text(DENY_PUSH)
    remote, work = tmp_path / "remote.git", tmp_path / "work"
    _git("init", "-q", "--bare", "-b", "main", str(remote), cwd=tmp_path)
    _git("init", "-q", "-b", "main", str(work), cwd=tmp_path)
    _git("commit", "-q", "--allow-empty", "-m", "first", cwd=work)
    _git("push", "-q", "-u", str(remote), "main", cwd=work)
    pushed = _git("rev-parse", "main", cwd=remote)
    _git("commit", "-q", "--allow-empty", "-m", "second, never pushed", cwd=work)
    spellings = DENIED_BEFORE + [c for c, _ in BYPASSED_BEFORE]
    controls = ["env git status --short --branch", "nice git log --oneline -1", "git -C . status --short"]
    calls = [{"name": "run_shell_command", "args": {"command": c}} for c in spellings + controls]
    with FakeGemini(script=[{"function_calls": calls}, {"text": "done"}], api_key=API_KEY) as fake:
        result = run_cli(["-p", "push it", "--yolo", "--policy", str(policy)], cwd=work, fake=fake,
                         env_extra=home)
    assert result.returncode == 0, result.stderr
    responses = _responses(fake)
    assert len(responses) == len(calls)
    for command, response in zip(spellings, responses):
        error = response["response"].get("error")
        assert error is not None and error["code"] == "refused", (command, response)
        assert "push yourself" in error["message"] or "cannot" in error["message"], (command, error)
    status, log, short = (json.dumps(r["response"]) for r in responses[len(spellings):])
    assert "main" in status and "second, never pushed" in log and "error" not in short
    assert _git("rev-parse", "main", cwd=remote) == pushed  # nothing was pushed


@pytest.mark.parametrize("key", ["policyPaths", "adminPolicyPaths"])
def test_settings_policy_paths_hold_a_teams_deny_rule_as_the_flags_do(tmp_path, home, key):
    """Issue 42: ``policyPaths`` / ``adminPolicyPaths`` in settings.json were
    ignored; with a read_file deny rule there gemini-cli does not offer the
    tool. The flag replaces the setting, as in gemini-cli."""
    team = tmp_path / "team"
    team.mkdir()
    (team / "deny.toml").write_text('[[rule]]\ntoolName = "read_file"\ndecision = "deny"\npriority = 500\n')
    (tmp_path / "config" / "settings.json").write_text(json.dumps({key: [str(team)]}))
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("private\n")
    script = _ask("read_file", file_path="notes.txt") + [{"text": "done"}]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        result = run_cli(["-p", "read notes.txt"], cwd=work, fake=fake, env_extra=home)
    assert result.returncode == 0, result.stderr
    declared = [d["name"] for t in fake.requests[0]["body"].get("tools", []) for d in t.get("functionDeclarations", [])]
    assert "read_file" not in declared and "glob" in declared
    (response,) = _responses(fake)
    assert "private" not in json.dumps(response)  # called all the same: refused
    if key == "policyPaths":  # --policy replaces the setting
        other = tmp_path / "other.toml"
        other.write_text("")
        with FakeGemini(script=[{"text": "ok"}], api_key=API_KEY) as fake:
            result = run_cli(["-p", "hi", "--policy", str(other)], cwd=work, fake=fake, env_extra=home)
        declared = [d["name"] for t in fake.requests[0]["body"].get("tools", [])
                    for d in t.get("functionDeclarations", [])]
        assert "read_file" in declared
