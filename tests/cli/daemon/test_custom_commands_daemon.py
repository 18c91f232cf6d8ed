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
