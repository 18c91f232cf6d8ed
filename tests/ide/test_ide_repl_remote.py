"""The real REPL (under a pseudo-terminal) with ``ide.enabled`` and the
spec-built companion as a process of its own (it accepts every diff with
the proposal plus :data:`~tests.ide_companion.EDITED_MARK`, as a user
editing it), attached to a session whose edits are not its own:

* ``serve --server-tools`` with ``--tools server``: the server's proposal
  opens in the editor, and the text accepted there is what the server's
  tool writes in the session's workspace (nothing where the client runs);
  the model reads gemini-cli's "User modified the `content`…".
* the local daemon: the tools run on the client, so the edit is the
  REPL's own — reviewed in the editor the same way, written here.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gemini_split.testing.fake_gemini import FakeGemini
from tests.cli.daemon.conftest import home  # noqa: F401 - the fixture: a private daemon, killed at the end
from tests.e2e.test_serve_e2e import API_KEY, daemon
from tests.ide_companion import EDITED_MARK
from tests.server.server_tools.helpers import unix_listener, workspaces_in
from tests.ui.repl.pty_driver import ENTER, PtyProcess
from tests.ui.repl.test_repl import PROMPT, _environ

pytestmark = pytest.mark.timeout(120)

WRITE = {"function_calls": [{"name": "write_file", "args": {"file_path": "new.py", "content": "x = 1\n"}}]}


@pytest.fixture
def client_dir(tmp_path: Path) -> Path:
    """Where the REPL runs, the editor's workspace; ``ide.enabled`` in the user's settings."""
    (tmp_path / "tmp").mkdir()
    (tmp_path / "client").mkdir()
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "settings.json").write_text('{"ide": {"enabled": true}}')
    return tmp_path / "client"


@pytest.fixture
def companion(tmp_path: Path, client_dir: Path):
    proc = subprocess.Popen([sys.executable, "-m", "tests.ide_companion", str(client_dir), "null"],
                            stdout=subprocess.PIPE, text=True, env={"TMPDIR": str(tmp_path / "tmp"),
                                                                     "PATH": "/usr/bin:/bin"},
                            cwd=Path(__file__).parents[2])
    try:
        assert proc.stdout.readline().strip().isdigit()
        yield proc
    finally:
        proc.kill()
        proc.wait()


def _prompt(repl: PtyProcess) -> None:
    repl.expect(PROMPT, timeout=30)
    repl.type("write it")
    repl.send(ENTER)
    repl.expect(r"written", timeout=30)
    repl.expect(PROMPT)


def _told(fake: FakeGemini) -> str:
    return json.dumps(fake.requests[-1]["body"]["contents"][-1])


def test_a_server_side_edit_is_accepted_in_the_clients_editor(tmp_path, client_dir, companion):
    root = tmp_path / "workspaces"
    sandbox = ("--sandbox", "auto" if shutil.which("bwrap") else "none")
    with FakeGemini(script=[WRITE, {"text": "written"}], api_key=API_KEY) as fake, unix_listener() as listen, \
            daemon(tmp_path, fake, "--server-tools", "--workspace-root", str(root), *sandbox, *listen) as (_, address):
        repl = PtyProcess([sys.executable, "-m", "gemini_split", "--server", address, "--tools", "server"],
                          env=_environ(tmp_path, NO_COLOR="1", TMPDIR=str(tmp_path / "tmp")), cwd=str(client_dir))
        try:
            _prompt(repl)
        finally:
            repl.close()
        told = _told(fake)
    (workspace,) = workspaces_in(root)
    assert (workspace / "new.py").read_text() == "x = 1\n" + EDITED_MARK
    assert not (client_dir / "new.py").exists()  # the server's tool wrote it, on the server
    assert "User modified the `content` to be: x = 1" in told


def test_through_the_local_daemon_the_edit_is_the_repls_own_and_reviewed_in_the_editor(
        tmp_path, client_dir, companion, home):  # noqa: F811 - the imported fixture
    with FakeGemini(script=[WRITE, {"text": "written"}], api_key=API_KEY) as fake:
        env = _environ(tmp_path, NO_COLOR="1", TMPDIR=str(tmp_path / "tmp"), GEMINI_SERVER_MODE="local",
                       GEMINI_API_KEY=API_KEY, GOOGLE_GEMINI_BASE_URL=fake.url)
        # the daemon's home (short: its socket's path is bounded); the settings stay the user's
        env.pop("XDG_RUNTIME_DIR", None)
        env["GEMINI_SPLIT_HOME"] = home
        Path(home, "settings.json").write_text('{"ide": {"enabled": true}}')
        repl = PtyProcess([sys.executable, "-m", "gemini_split"], env=env, cwd=str(client_dir))
        try:
            _prompt(repl)
        finally:
            repl.close()
        told = _told(fake)
    assert (client_dir / "new.py").read_text() == "x = 1\n" + EDITED_MARK
    assert "User modified the `content` to be: x = 1" in told
