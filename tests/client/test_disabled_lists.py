"""The lists that switch things off by name (``hooksConfig.disabled``,
``skills.disabled``): gemini-cli's union across files, its enable/disable
rules and its words."""

from __future__ import annotations

import json
from io import StringIO

import pytest

from gemini_split.environment import Environment
from gemini_split.userfiles import disabled_lists
from gemini_split.userfiles.hooks import load_hooks
from gemini_split.userfiles.settings import load_settings

KEY = "hooksConfig.disabled"


@pytest.fixture
def scopes(tmp_path):
    user = tmp_path / "home" / "settings.json"
    project = tmp_path / "work" / ".gemini" / "settings.json"
    user.parent.mkdir(parents=True)
    project.parent.mkdir(parents=True)
    return [("workspace", project), ("user", user)]


def test_the_disabled_lists_of_every_file_add_up(tmp_path, scopes):
    (_, project), (_, user) = scopes
    hook = {"hooks": [{"type": "command", "name": "a", "command": "true"},
                      {"type": "command", "name": "b", "command": "true"},
                      {"type": "command", "command": "echo c"}]}
    user.write_text(json.dumps({"hooks": {"BeforeTool": [hook]}, "hooksConfig": {"disabled": ["a"]}}))
    project.write_text(json.dumps({"hooksConfig": {"disabled": ["echo c"]}}))
    env = Environment(stdin=StringIO(), stdout=StringIO(), stderr=StringIO(), cwd=tmp_path / "work",
                      environ={"GEMINI_SPLIT_HOME": str(tmp_path / "home"), "HOME": str(tmp_path),
                               "GEMINI_CLI_TRUST_WORKSPACE": "true"})
    hooks = load_hooks(load_settings(env))
    assert [h.label for h in hooks.active()] == ["b"]  # neither file's list hides the other's


def test_enable_clears_every_file_and_disable_writes_one_saying_where_else(scopes):
    (_, project), (_, user) = scopes
    user.write_text('{\n  // mine\n  "hooksConfig": {"disabled": ["x", "y"]}\n}\n')
    project.write_text(json.dumps({"hooksConfig": {"disabled": ["x"]}}))
    change = disabled_lists.enable(scopes, KEY, "x")
    assert change.status == "success" and [s for s, _ in change.modified] == ["workspace", "user"]
    assert disabled_lists.feedback("Hook", change) == (
        f'Hook "x" enabled by removing it from the disabled list in workspace ({project}) and user ({user}) settings.')
    assert "// mine" in user.read_text() and disabled_lists.listed(user, KEY) == ["y"]
    assert disabled_lists.feedback("Hook", disabled_lists.enable(scopes, KEY, "x")) == 'Hook "x" is already enabled.'

    change = disabled_lists.disable(scopes, "workspace", KEY, "y")
    assert disabled_lists.listed(project, KEY) == ["y"]
    assert disabled_lists.feedback("Skill", change) == (
        f'Skill "y" is now disabled in both workspace ({project}) and user ({user}) settings.')
    change = disabled_lists.disable(scopes, "workspace", KEY, "y")
    assert change.status == "no-op" and disabled_lists.feedback("Hook", change) == 'Hook "y" is already disabled.'


def test_a_file_that_cannot_be_parsed_is_left_alone_and_the_change_says_why(scopes):
    (_, project), (_, user) = scopes
    project.write_text("{ not json")
    change = disabled_lists.disable(scopes, "workspace", KEY, "x")
    assert change.status == "error" and "left unchanged" in disabled_lists.feedback("Hook", change)
    assert project.read_text() == "{ not json"
    assert disabled_lists.disable(scopes, "elsewhere", KEY, "x").error == "Invalid settings scope: elsewhere"
