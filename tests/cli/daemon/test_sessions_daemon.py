"""Issue 31 item 7 through the local daemon: the sessions the daemon keeps
are listed, numbered and resumed per project, as embedded and against
``serve`` (tests/cli/test_sessions_per_project.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_sessions_per_project import sessions_scoped_by_project

from .conftest import run

pytestmark = pytest.mark.timeout(240)


def test_sessions_are_scoped_by_project_through_the_local_daemon(environ, home, fake, tmp_path):
    sessions_scoped_by_project(lambda args, cwd: run(args, environ, cwd), fake, tmp_path)
    assert Path(home, "daemon", "daemon.sock").exists()  # it went through the daemon
