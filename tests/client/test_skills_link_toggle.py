"""Issue 43 §5: ``gemini-split skills link|enable|disable`` — gemini-cli's
sub-commands, scopes and words, run as a user runs them."""

from __future__ import annotations

import json
import os

import pytest

from .test_skills import run, setup, skill  # noqa: F401 (fixture)

pytestmark = pytest.mark.timeout(90)


def test_link_points_at_the_source_so_edits_apply_and_uninstall_removes_only_the_link(setup):
    source = setup["tmp"] / "dev"
    skill(source, "a", "---\nname: alpha\ndescription: First.\n---\nbody one\n")
    refused = run(setup, None, "skills", "link", str(source))
    assert refused.returncode == 2 and 'Linking agent skill(s) from "' in refused.stderr
    assert "Link Destination:" in refused.stderr and "--consent to link" in refused.stderr
    done = run(setup, None, "skills", "link", str(source), "--consent")
    assert done.returncode == 0, done.stderr
    linked = setup["config"] / "skills" / "alpha"
    assert "Searching for skills in" in done.stderr and f'Successfully linked skill "alpha" (user) to {linked}' \
        in done.stderr
    assert linked.is_symlink() and os.readlink(linked) == str((source / "a").resolve())
    (source / "a" / "SKILL.md").write_text("---\nname: alpha\ndescription: Edited.\n---\n")
    assert "Edited." in run(setup, None, "skills", "list").stdout
    gone = run(setup, None, "skills", "uninstall", "alpha")
    assert gone.returncode == 0, gone.stderr
    assert not os.path.lexists(linked) and (source / "a" / "SKILL.md").is_file()


def test_disable_writes_the_workspace_list_by_default_and_enable_clears_every_list(setup):
    user = setup["config"] / "settings.json"
    project = setup["work"] / ".gemini" / "settings.json"
    user.write_text('{\n  // mine\n  "skills": {"disabled": ["code-reviewer"]}\n}\n')
    done = run(setup, None, "skills", "disable", "code-reviewer")
    assert done.returncode == 0, done.stderr
    assert done.stdout == (f'Skill "code-reviewer" is now disabled in both workspace ({project}) and user ({user}) '
                           "settings.\n")
    assert json.loads(project.read_text())["skills"]["disabled"] == ["code-reviewer"]
    assert "code-reviewer [disabled]" in run(setup, None, "skills", "list").stdout
    again = run(setup, None, "skills", "disable", "code-reviewer", "--scope", "workspace")
    assert again.stdout == 'Skill "code-reviewer" is already disabled.\n'

    enabled = run(setup, None, "skills", "enable", "code-reviewer")
    assert enabled.returncode == 0, enabled.stderr
    assert enabled.stdout == (f'Skill "code-reviewer" enabled by removing it from the disabled list in workspace '
                              f"({project}) and user ({user}) settings.\n")
    assert "// mine" in user.read_text() and '"disabled": []' in user.read_text()
    assert "code-reviewer [enabled]" in run(setup, None, "skills", "list").stdout
    assert run(setup, None, "skills", "enable", "code-reviewer").stdout == 'Skill "code-reviewer" is already enabled.\n'


def test_disable_in_an_untrusted_folder_says_the_workspace_list_is_not_read(setup):
    (setup["tmp"] / "trusted.json").write_text("{}")
    done = run(setup, None, "skills", "disable", "x")
    assert done.returncode == 0 and "this folder is not trusted" in done.stderr and "--scope user" in done.stderr
    user_wide = run(setup, None, "skills", "disable", "x", "-s", "user")
    assert f"is now disabled in both user ({setup['config'] / 'settings.json'}) and workspace" in user_wide.stdout
    assert "not trusted" not in user_wide.stderr
    broken = setup["config"] / "settings.json"
    broken.write_text("{ nope")
    failed = run(setup, None, "skills", "enable", "x")
    assert failed.returncode != 0 and "settings.json" in failed.stderr
