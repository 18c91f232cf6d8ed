"""Issue 29 §2 in the REPL: ``/skills list|disable|enable|reload`` under a pty,
persisted in settings.json as gemini-cli persists them."""

from __future__ import annotations

import pytest

from .test_repl import PROMPT, ask, start_repl, workdir  # noqa: F401  (fixtures)

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def skills_home(tmp_path):
    root = tmp_path / "home" / "skills" / "greeter"
    root.mkdir(parents=True)
    (root / "SKILL.md").write_text("---\nname: greeter\ndescription: Greets people warmly.\n---\nSay GREETINGS.\n")
    return tmp_path / "home"


def test_skills_are_listed_disabled_enabled_and_reloaded_and_the_choice_persists_with_the_files_comments(start_repl, skills_home):  # noqa: F811
    settings_file = skills_home / "settings.json"
    settings_file.write_text('{\n  // skills the team turned off\n  "skills": {"disabled": []}\n}\n')
    repl = start_repl([{"function_calls": [{"name": "activate_skill", "args": {"name": "greeter"}}]},
                       {"text": "activated it"}])
    ask(repl, "/skills list")
    repl.expect(r"greeter \[enabled\] \(user\)\s+Greets people warmly\.")
    repl.expect(PROMPT)
    ask(repl, "/skills disable greeter")
    repl.expect(r'Skill "greeter" disabled in user settings')
    repl.expect(PROMPT)
    assert settings_file.read_text() == '{\n  // skills the team turned off\n  "skills": {"disabled": ["greeter"]}\n}\n'

    ask(repl, "/skills list")
    repl.expect(r"greeter \[disabled\] \(user\)")
    repl.expect(PROMPT)
    ask(repl, "/skills enable greeter")
    repl.expect(r'Skill "greeter" enabled in user settings')
    repl.expect(PROMPT)
    assert settings_file.read_text() == '{\n  // skills the team turned off\n  "skills": {"disabled": []}\n}\n'
    second = skills_home / "skills" / "second"
    second.mkdir()
    (second / "SKILL.md").write_text("---\nname: second\ndescription: [broken\n---\n")
    ask(repl, "/skills reload")
    repl.expect(r"malformed YAML frontmatter")
    repl.expect(r"Skills reloaded: 1 enabled")
    repl.expect(PROMPT)
    ask(repl, "greet me")
    repl.expect(r"activate_skill")
    repl.expect(r"activated it")
    repl.expect(PROMPT)
    ask(repl, "/skills frob")
    repl.expect(r"/skills list \[nodesc\] \| enable NAME")
    repl.expect(PROMPT)


def test_skills_link_shows_what_it_links_asks_and_the_next_list_has_it(start_repl, tmp_path):  # noqa: F811
    source = tmp_path / "dev" / "tool"
    source.mkdir(parents=True)
    (source / "SKILL.md").write_text("---\nname: linked-one\ndescription: Lives elsewhere.\n---\nbody\n")
    repl = start_repl([])
    ask(repl, f"/skills link {source.parent} --scope user")
    repl.expect(r'Linking agent skill\(s\) from "')
    repl.expect(r"linked-one: Lives elsewhere\.")
    repl.expect(r"Link Destination: ")
    repl.expect(r"Do you want to continue\?")
    repl.send("1")
    repl.expect(r'Successfully linked skills from "\S+" \(user\)\.')
    repl.expect(PROMPT)
    link = tmp_path / "home" / "skills" / "linked-one"
    assert link.is_symlink() and link.resolve() == source.resolve()
    ask(repl, "/skills list")
    repl.expect(r"linked-one \[enabled\] \(user\)")
    repl.expect(PROMPT)
    ask(repl, f"/skills link {tmp_path}/nothing-here")
    repl.expect(r"Failed to link skills: ")
    repl.expect(PROMPT)
