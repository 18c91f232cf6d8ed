"""One precedence for gemini-cli's files (``userfiles/precedence.py``):
extensions, then the user's, then the project's, for commands, skills and
sub-agent definitions alike."""

from __future__ import annotations

from pathlib import Path

from gemini_split.userfiles.agents import agent_roots
from gemini_split.userfiles.custom_commands import command_dirs
from gemini_split.userfiles.precedence import tiers
from gemini_split.userfiles.skills import skill_roots


def test_extensions_come_first_then_the_user_then_the_project(tmp_path):
    ext, user, project = tmp_path / "ext", tmp_path / "user", tmp_path / "project"
    assert tiers([user], [project], extensions=[("e1", ext)]) == [
        ("extension e1", ext), ("user", user), ("project", project)]


def test_a_project_directory_that_is_the_users_adds_nothing(tmp_path):
    user = tmp_path / "home" / ".gemini" / "agents"
    user.mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "home")
    assert tiers([user], [tmp_path / "link" / ".gemini" / "agents"]) == [("user", user)]


def test_commands_skills_and_agents_read_their_places_in_that_order(tmp_path):
    config, home, project = tmp_path / "config", tmp_path / "home", tmp_path / "project"
    assert [s for s, _ in agent_roots(config, project, trusted=True)] == ["user", "project"]
    assert [s for s, _ in agent_roots(config, project, trusted=False)] == ["user"]
    assert [s for s, _ in command_dirs(config, project)] == ["user", "project"]
    roots = skill_roots(config, home, project, trusted=True, extensions=[("e1", tmp_path / "e1")])
    assert roots == [("extension e1", tmp_path / "e1"), ("user", config / "skills"),
                     ("user", home / ".agents" / "skills"), ("workspace", project / ".gemini" / "skills"),
                     ("workspace", project / ".agents" / "skills")]
    assert all(isinstance(p, Path) for _, p in roots)
