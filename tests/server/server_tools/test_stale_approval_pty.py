"""Issue 34.1: an approval question ends, visibly, when its call ends —
here because the server was killed and restarted under it — and nothing
typed afterwards can answer it, least of all become a prompt.

What a person did: the REPL under a real pty, talking to a real
``serve --server-tools`` process, shows "Allow run_shell_command: echo
pending2?"; the server is killed (SIGKILL) and started again on the same
address and state; the REPL reconnects and reports the request
interrupted. Then the window is resized and keys are typed at the prompt
(``1``, Ctrl-U, ``/stats`` Enter; later a lone ``1`` and Enter). Before the
fix the dead menu lived on, hidden, read those keys, and its answer
("no", "yes") went to the model as a prompt nobody wrote. The model's
request log is the judge: it must hold the one prompt the user sent.
"""

from __future__ import annotations

import sys

import pyte
import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from tests.ui.repl.pty_driver import ENTER, PtyProcess
from tests.ui.repl.test_repl import PROMPT, _environ
from tests.e2e.test_serve_e2e import API_KEY, daemon
from .helpers import unix_listener

ROWS, COLS = 40, 110
CTRL_U = "\x15"


def _screen(proc: PtyProcess) -> str:
    screen = pyte.Screen(COLS, ROWS)
    pyte.Stream(screen).feed(proc.raw)
    return "\n".join(line.rstrip() for line in screen.display)


def _user_texts(requests: list[dict]) -> list[str]:
    """Every user-typed text part the model was sent, in every request."""
    texts = []
    for request in requests:
        for content in request["body"].get("contents", []):
            if content.get("role") == "user":
                texts += [part["text"] for part in content.get("parts", []) if "text" in part]
    return texts


@pytest.mark.timeout(150)
def test_a_question_whose_server_died_ends_and_keys_typed_later_never_become_a_prompt(tmp_path):
    options = ("--state-dir", str(tmp_path / "state"), "--workspace-root", str(tmp_path / "workspaces"),
               "--sandbox", "none", "--server-tools")
    shell = {"function_calls": [{"name": "run_shell_command", "args": {"command": "echo pending2"}}]}
    client_dir = tmp_path / "client"
    client_dir.mkdir()
    with FakeGemini(script=[shell, {"text": "never"}, {"text": "never"}], api_key=API_KEY) as fake, \
            unix_listener() as listen:
        listen = (*listen, *options)  # the same socket path for the restarted server
        with daemon(tmp_path, fake, *listen) as (first, address):
            repl = PtyProcess([sys.executable, "-m", "gemini_split", "--server", address, "--tools", "server"],
                              env=_environ(tmp_path, NO_COLOR="1"), cwd=str(client_dir), rows=ROWS, cols=COLS)
            try:
                repl.expect(PROMPT, timeout=30)
                repl.type("run it")
                repl.send(ENTER)
                repl.expect(r"Allow run_shell_command: echo pending2\?", timeout=30)
                repl.expect(r"❯ \d\. No")
                first.kill()  # SIGKILL: no goodbye to the client
                first.wait(timeout=10)
                # the same address and state, as a restarted service
                with daemon(tmp_path, fake, *listen):
                    repl.expect(r"no longer asking about run_shell_command", timeout=60)
                    repl.expect(PROMPT, timeout=30)
                    repl.drain(1.0)
                    repl.resize(ROWS - 5, COLS)  # a redraw: a live menu would show itself now
                    repl.drain(1.0)
                    repl.resize(ROWS, COLS)
                    repl.drain(1.0)
                    assert "Allow run_shell_command" not in _screen(repl).split("no longer asking")[-1]
                    repl.type("1")
                    repl.send(CTRL_U)
                    repl.type("/stats")
                    repl.send(ENTER)
                    repl.expect(r"turn", timeout=20)  # /stats answered
                    repl.expect(PROMPT, timeout=20)
                    repl.type("1")
                    repl.drain(1.0)
                    repl.send(CTRL_U)
                    repl.drain(2.0)
                    texts = _user_texts(fake.requests)
                    assert texts.count("run it") >= 1
                    assert not {"yes", "no", "1"} & set(texts), f"the model was sent {texts}"
                    assert len(fake.requests) == 1, f"the model was asked again: {texts}"
            finally:
                repl.close()
