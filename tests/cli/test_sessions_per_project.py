"""Sessions as gemini-cli scopes them (issue 31 item 7), through the real
CLI and the fake Gemini server: ``--list-sessions`` numbers this project's
sessions oldest first, ``--resume latest|N`` and ``--delete-session N``
count only them, an id works from any project, and ``-r latest`` where
there is none warns and answers as a new session. Embedded here, against
``serve`` below; through the local daemon in tests/cli/daemon."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from tests.e2e.test_serve_e2e import API_KEY, _env
from tests.inprocess import cli

Run = Callable[[list[str], Path], CompletedProcess]

pytestmark = pytest.mark.timeout(120)


def _sent(fake: FakeGemini) -> str:
    """What the model was sent last (its contents), as text."""
    return json.dumps(fake.requests[-1]["body"]["contents"])


def _ids(listing: str) -> list[str]:
    return re.findall(r"^  \d+\. .* \[(\S+)\]$", listing, re.M)


def sessions_scoped_by_project(run: Run, fake: FakeGemini, tmp_path: Path) -> None:
    """The scenario, for any way of reaching a server (``run(args, cwd)``)."""
    a, b, c = (tmp_path / name for name in ("project-a", "project-b", "project-c"))
    for d in (a, b, c):
        d.mkdir()
    for prompt, where in (("alpha one", a), ("beta one", b), ("alpha two", a)):
        done = run(["-p", prompt], where)
        assert done.returncode == 0, done.stderr

    listed = run(["--list-sessions"], a)
    assert listed.returncode == 0, listed.stderr
    assert "Available sessions for this project (2):" in listed.stdout
    assert re.search(r"^  1\. alpha one \(Just now\) \[\S+\]\n  2\. alpha two \(Just now\) \[\S+\]$",
                     listed.stdout, re.M), listed.stdout
    assert "beta" not in listed.stdout
    first_a, second_a = _ids(listed.stdout)

    latest_b = run(["-r", "latest", "-p", "go on"], b)  # before: project A's latest
    assert latest_b.returncode == 0, latest_b.stderr
    assert "beta one" in _sent(fake) and "alpha" not in _sent(fake)

    one = run(["-r", "1", "-p", "again"], a)
    assert one.returncode == 0, one.stderr
    assert "alpha one" in _sent(fake) and "alpha two" not in _sent(fake)

    too_far = run(["-r", "3", "-p", "x"], a)
    assert too_far.returncode == 42
    assert 'Invalid session identifier "3"' in too_far.stderr

    by_id = run(["-r", second_a, "-p", "from elsewhere"], b)  # an id works from any project
    assert by_id.returncode == 0, by_id.stderr
    assert "alpha two" in _sent(fake)

    fresh = run(["-r", "latest", "-p", "nothing here yet"], c)
    assert fresh.returncode == 0, fresh.stderr  # before: exit 1
    assert "No previous sessions found for this project." in fresh.stderr
    assert "alpha" not in _sent(fake) and "beta" not in _sent(fake)

    deleted = run(["--delete-session", "1"], a)
    assert deleted.returncode == 0, deleted.stderr
    assert re.match(r"Deleted session 1: alpha one \(Just now\)$", deleted.stdout), deleted.stdout
    after = run(["--list-sessions"], a)
    assert _ids(after.stdout) == [second_a] and first_a not in after.stdout
    assert "Available sessions for this project (1):" in after.stdout
    bad = run(["--delete-session", "5"], a)
    assert bad.returncode == 42 and 'Invalid session identifier "5"' in bad.stderr
    empty = run(["--list-sessions"], tmp_path)
    assert empty.returncode == 0 and empty.stdout == "No previous sessions found for this project.\n"
    none_to_delete = run(["--delete-session", "1"], tmp_path)  # gemini-cli: exit 0, not 42
    assert none_to_delete.returncode == 0, none_to_delete.stderr
    assert none_to_delete.stdout == "No sessions found for this project.\n"


def test_sessions_are_scoped_by_project_embedded(tmp_path):
    home = tmp_path / "home"

    def run(args: list[str], cwd: Path) -> CompletedProcess:
        return cli(args, environ=_env(GEMINI_API_KEY=API_KEY, GOOGLE_GEMINI_BASE_URL=fake.url,
                                      GEMINI_SPLIT_HOME=str(home)), cwd=cwd)

    with FakeGemini(api_key=API_KEY) as fake:
        sessions_scoped_by_project(run, fake, tmp_path)


def test_sessions_are_scoped_by_project_against_serve(tmp_path):
    from tests.server.resume.test_resume_e2e import _free_port, serve

    port = _free_port()
    with FakeGemini(api_key=API_KEY) as fake, serve(tmp_path, fake, tmp_path / "state", port):

        def run(args: list[str], cwd: Path) -> CompletedProcess:
            return cli(["--server", f"ws://127.0.0.1:{port}", *args],
                       environ=_env(GEMINI_SPLIT_HOME=str(tmp_path / "home")), cwd=cwd)

        sessions_scoped_by_project(run, fake, tmp_path)
