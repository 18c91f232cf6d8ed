"""Finding and checking policy files: where they come from, and malformed
files named by file, rule and field."""

from __future__ import annotations

import pytest

from gemini_split.policy import ADMIN_TIER, Decision, PolicyError, load_policy, read_policy_file

DENY_GLOB = '[[rule]]\ntoolName = "glob"\ndecision = "deny"\npriority = 1\n'
ALLOW_GLOB = '[[rule]]\ntoolName = "glob"\ndecision = "allow"\npriority = 999\n'


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def glob_decision(policy):
    return policy.decide("glob", {}, "default", kind="read").decision


@pytest.fixture
def dirs(tmp_path):
    home = tmp_path / "home"
    config = home / ".gemini"
    project = tmp_path / "project"
    project.mkdir(parents=True)
    config.mkdir(parents=True)
    environ = {"HOME": str(home), "GEMINI_CLI_SYSTEM_SETTINGS_PATH": str(tmp_path / "etc" / "settings.json")}
    return config, project, environ, tmp_path / "etc" / "policies"


def load(dirs, **kw):
    config, project, environ, _ = dirs
    return load_policy(config_dir=config, cwd=project, environ=environ, **kw)


def test_user_policies_are_read(dirs):
    write(dirs[0] / "policies" / "a.toml", DENY_GLOB)
    write(dirs[0] / "policies" / "notes.txt", "not toml at all [[")
    assert glob_decision(load(dirs)) is Decision.DENY


def test_project_policies_only_in_a_trusted_folder(dirs):
    write(dirs[1] / ".gemini" / "policies" / "p.toml", DENY_GLOB)
    assert glob_decision(load(dirs, trusted=False)) is Decision.ALLOW
    assert glob_decision(load(dirs, trusted=True)) is Decision.DENY


def test_user_tier_beats_workspace_tier(dirs):
    write(dirs[1] / ".gemini" / "policies" / "p.toml", ALLOW_GLOB.replace("allow", "ask_user"))
    write(dirs[0] / "policies" / "u.toml", DENY_GLOB)  # priority 1 < 999, but a higher tier
    assert glob_decision(load(dirs, trusted=True)) is Decision.DENY


def test_policy_flag_replaces_the_user_directory(dirs, tmp_path):
    write(dirs[0] / "policies" / "a.toml", DENY_GLOB)
    other = write(tmp_path / "team" / "t.toml", '[[rule]]\ntoolName = "web_fetch"\ndecision = "deny"\npriority = 1\n')
    policy = load(dirs, policy_paths=[str(other.parent)])
    assert glob_decision(policy) is Decision.ALLOW
    assert policy.decide("web_fetch", {}, "yolo").decision is Decision.DENY
    assert glob_decision(load(dirs, policy_paths=[f"{other},{dirs[0] / 'policies' / 'a.toml'}"])) is Decision.DENY


def test_admin_tier_beats_user_tier(dirs, tmp_path):
    write(dirs[0] / "policies" / "a.toml", ALLOW_GLOB.replace('"glob"', '"web_fetch"'))
    admin = write(tmp_path / "admin.toml", '[[rule]]\ntoolName = "web_fetch"\ndecision = "deny"\npriority = 0\n')
    policy = load(dirs, admin_policy_paths=[str(admin)])
    verdict = policy.decide("web_fetch", {}, "yolo")
    assert verdict.decision is Decision.DENY and verdict.rule.priority == ADMIN_TIER
    assert verdict.source.startswith("admin policy")


def test_admin_policy_flag_is_ignored_when_the_system_directory_has_policies(dirs, tmp_path):
    write(dirs[3] / "system.toml", DENY_GLOB)
    admin = write(tmp_path / "admin.toml", '[[rule]]\ntoolName = "web_fetch"\ndecision = "deny"\npriority = 0\n')
    policy = load(dirs, admin_policy_paths=[str(admin)])
    assert glob_decision(policy) is Decision.DENY  # the system's
    assert policy.decide("web_fetch", {}, "yolo").decision is Decision.ALLOW
    assert any("ignoring --admin-policy" in w for w in policy.warnings)


def test_allowed_tools_become_allow_rules_below_files(dirs):
    write(dirs[0] / "policies" / "a.toml", '[[rule]]\ntoolName = "run_shell_command"\ncommandPrefix = "git push"\n'
                                           'decision = "deny"\npriority = 900\n')
    policy = load(dirs, allowed_tools=["run_shell_command(git)"])
    decide = lambda c: policy.decide("run_shell_command", {"command": c}, "default").decision  # noqa: E731
    assert decide("git status") is Decision.ALLOW and decide("git push") is Decision.DENY


def test_a_missing_policy_path_is_an_error(dirs, tmp_path):
    with pytest.raises(PolicyError, match="no such file"):
        load(dirs, policy_paths=[str(tmp_path / "nope.toml")])
    with pytest.raises(PolicyError, match="end in .toml"):
        load(dirs, policy_paths=[str(write(tmp_path / "rules.txt", DENY_GLOB))])


@pytest.mark.parametrize("text, rule, field", [
    ('[[rule]]\ntoolName = "glob"\ndecision = "maybe"\npriority = 1\n', 1, "decision"),
    ('[[rule]]\ntoolName = "glob"\ndecision = "deny"\n', 1, "priority"),
    ('[[rule]]\ndecision = "deny"\npriority = 1\n', 1, "toolName"),
    (DENY_GLOB + '[[rule]]\ntoolName = "glob"\ndecision = "deny"\npriority = "high"\n', 2, "priority"),
    (DENY_GLOB + '[[rule]]\ntoolName = "glob"\ndecision = "deny"\npriority = 1000\n', 2, "priority"),
    (DENY_GLOB + '[[rule]]\ntoolName = "run_shell_command"\ncomandPrefix = "rm"\ndecision = "deny"\npriority = 1\n',
     2, "comandPrefix"),
    ('[[rule]]\ntoolName = "glob"\ncommandPrefix = "rm"\ndecision = "deny"\npriority = 1\n', 1, "commandPrefix"),
    ('[[rule]]\ntoolName = "run_shell_command"\ncommandPrefix = "rm"\ncommandRegex = "rm"\n'
     'decision = "deny"\npriority = 1\n', 1, "commandRegex"),
    ('[[rule]]\ntoolName = "run_shell_command"\ncommandPrefix = "rm && ls"\ndecision = "deny"\npriority = 1\n',
     1, "commandPrefix"),
    ('[[rule]]\ntoolName = "run_shell_command"\ncommandRegex = "(a"\ndecision = "deny"\npriority = 1\n',
     1, "commandRegex"),
    ('[[rule]]\ntoolName = "glob"\nargsPattern = "(?=x)"\ndecision = "deny"\npriority = 1\n', 1, "argsPattern"),
    ('[[rule]]\ntoolName = "glob"\ndecision = "deny"\npriority = 1\nmodes = ["sometimes"]\n', 1, "modes"),
    ('[[rule]]\ntoolName = ""\ndecision = "deny"\npriority = 1\n', 1, "toolName"),
    ('[[rule]]\ntoolName = []\ndecision = "deny"\npriority = 1\n', 1, "toolName"),
    ('[[rule]]\ntoolName = "web_fetch"\ndecision = "allow"\npriority = 1\nallowNetwork = true\n', 1, "allowNetwork"),
    ('[[rule]]\ntoolName = "run_shell_command"\ndecision = "ask_user"\npriority = 1\nallowNetwork = true\n',
     1, "allowNetwork"),
])
def test_malformed_rules_name_file_rule_and_field(tmp_path, text, rule, field):
    path = write(tmp_path / "bad.toml", text)
    with pytest.raises(PolicyError) as info:
        read_policy_file(path, 4)
    message = str(info.value)
    assert str(path) in message and f"rule #{rule}" in message and f"field {field}" in message, message


@pytest.mark.parametrize("text, expected", [
    ("[[rule]\n", "not valid TOML"),
    ("rule = 3\n", "field rule"),
    ("[[rules]]\ntoolName = 'x'\n", "field rules"),
    (b"\xff\xfe".decode("latin-1"), "not valid TOML"),
])
def test_malformed_files(tmp_path, text, expected):
    path = write(tmp_path / "bad.toml", text)
    with pytest.raises(PolicyError, match=expected):
        read_policy_file(path, 4)


def test_gemini_cli_fields_are_accepted(tmp_path):
    path = write(tmp_path / "g.toml", """
[[rule]]
name = "a rule with every field"
toolName = "run_shell_command"
commandPrefix = ["git status", "git diff"]
decision = "allow"
priority = 10
modes = ["default", "autoEdit"]
interactive = true
allow_redirection = true
deny_message = "unused"

[[rule]]
toolName = "*"
mcpName = "*"
toolAnnotations = { readOnlyHint = true }
decision = "ask_user"
priority = 50
modes = ["plan"]
""")
    first, second = read_policy_file(path, 4)
    assert first.modes == {"default", "auto_edit"} and first.allow_redirection
    assert second.mcp_name == "*"


def test_an_oversized_file_is_refused(tmp_path):
    path = write(tmp_path / "big.toml", "# " + "x" * (1024 * 1024 + 10) + "\n")
    with pytest.raises(PolicyError, match="larger than"):
        read_policy_file(path, 4)
