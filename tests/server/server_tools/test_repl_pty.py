"""What a person sees: the REPL under a real pty, talking to a real
``serve --server-tools`` process, is asked about a server-side edit with
its diff — the same menu it shows for its own tools — and the approved
edit is made in the session's workspace on the server, not where the
client runs."""

from __future__ import annotations

import shutil
import sys

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from tests.ui.repl.pty_driver import ENTER, UP, PtyProcess
from tests.ui.repl.test_repl import PROMPT, _environ
from tests.e2e.test_serve_e2e import API_KEY, daemon
from .helpers import unix_listener, workspaces_in


@pytest.mark.timeout(90)
def test_the_repl_asks_with_the_diff_and_the_approved_edit_is_made_on_the_server(tmp_path):
    root = tmp_path / "workspaces"
    client_dir = tmp_path / "client"
    client_dir.mkdir()
    edit = {"function_calls": [{"name": "write_file", "args": {"file_path": "plan.md",
                                                                "content": "# Plan\nship it\n"}}]}
    shell = {"function_calls": [{"name": "run_shell_command", "args": {"command": "echo built > out.txt"}}]}
    sandbox = ("--sandbox", "auto" if shutil.which("bwrap") else "none")
    with FakeGemini(script=[edit, {"text": "written"}, shell, {"text": "refused, fine"}], api_key=API_KEY) as fake, \
            unix_listener() as listen, \
            daemon(tmp_path, fake, "--server-tools", "--workspace-root", str(root), *sandbox, *listen) as (_, address):
        repl = PtyProcess([sys.executable, "-m", "gemini_split", "--server", address, "--tools", "server"],
                          env=_environ(tmp_path, NO_COLOR="1"), cwd=str(client_dir))
        try:
            repl.expect(PROMPT, timeout=20)
            repl.type("write the plan")
            repl.send(ENTER)
            repl.expect(r"write_file wants to run \(edit\)", timeout=20)
            repl.expect(r"\+# Plan")  # the diff a person decides on
            repl.expect(r"\+ship it")
            repl.expect(r"❯ 3\. No")  # the same menu as for a local tool, starting on no
            repl.send(UP + UP)
            repl.expect(r"❯ 1\. Yes, allow once")
            repl.send(ENTER)
            repl.expect(r"written", timeout=20)
            repl.expect(PROMPT)
            repl.type("build it")
            repl.send(ENTER)
            repl.expect(r"echo built > out\.txt", timeout=20)  # the exact command
            repl.expect(r"❯ \d\. No")
            repl.send(ENTER)  # no
            repl.expect(r"refused, fine", timeout=20)
            repl.expect(PROMPT)
        finally:
            repl.close()
    (workspace,) = workspaces_in(root)
    assert (workspace / "plan.md").read_text() == "# Plan\nship it\n"
    assert not (workspace / "out.txt").exists()
    assert not list(client_dir.iterdir())  # nothing was written where the client runs
