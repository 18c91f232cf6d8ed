"""Issue 29 §1 through the local daemon: a custom command is expanded on the
client (its ``!{…}`` runs here, with the client's approval rules) and the
daemon receives an ordinary prompt."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import run

pytestmark = pytest.mark.timeout(90)


def test_a_custom_command_with_shell_and_args_expands_through_the_local_daemon(environ, home, fake, tmp_path):
    commands = Path(home, "commands", "git")
    commands.mkdir(parents=True)
    (commands / "say.toml").write_text('prompt = "Said: !{printf %s {{args}}} for {{args}}"')
    done = run(["--allowed-tools", "run_shell_command(printf)", "-p", "/git:say a b; touch PWNED"],
               environ, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Echo: Said: a b; touch PWNED for a b; touch PWNED\n"
    assert not (tmp_path / "PWNED").exists()
    assert Path(home, "daemon", "daemon.sock").exists()  # it went through the daemon


def test_a_session_begun_by_a_custom_command_is_titled_by_the_command_as_typed(environ, home, fake, tmp_path):
    """Issue 46 §4: the list shows ``/git:show s t``, not the expansion
    (the model still gets the expansion)."""
    commands = Path(home, "commands", "git")
    commands.mkdir(parents=True)
    (commands / "show.toml").write_text('prompt = "PROJ-GIT-SHOW args=[{{args}}]"')
    piped = run(["-p", "/git:show s t"], environ, cwd=tmp_path, input="notes\n")
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.startswith("Echo: notes") and piped.stdout.endswith("PROJ-GIT-SHOW args=[s t]\n")
    listed = run(["--list-sessions"], environ, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "  1. /git:show s t (Just now) [" in listed.stdout, listed.stdout
    assert "PROJ-GIT-SHOW" not in listed.stdout
