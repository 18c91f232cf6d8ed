"""Issue 45 item 6: a client's screen names the client itself "you" — never
by the label the session knows it by ("laptop", "terminal", "client 1") —
and every other client by its label. Each face compares with its own
``connected.label``: the REPL (its rewind, ``/server status``' list) and
``attach --watch`` (a replayed turn that client sent)."""

from __future__ import annotations

import sys

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from tests.ui.repl.pty_driver import CTRL_C, CTRL_D, ENTER, PtyProcess
from tests.ui.repl.test_repl import PROMPT, _environ, ask
from tests.e2e.test_serve_e2e import API_KEY, client, daemon

pytestmark = pytest.mark.timeout(120)


def _attach(tmp_path, work, address: str, label: str, *more: str) -> PtyProcess:
    return PtyProcess([sys.executable, "-m", "gemini_split", "attach", "latest", "--server", address,
                       "--label", label, *more], env=_environ(tmp_path, NO_COLOR="1"), cwd=str(work), cols=160)


def _two_turns(address: str, work) -> None:
    for n, prompt in enumerate(("first question", "second question")):
        done = client(["--server", address, *(("--resume", "latest") if n else ()), "-p", prompt], cwd=work)
        assert done.returncode == 0, done.stderr


def test_the_repl_says_you_for_its_own_rewind_and_in_the_attached_list_and_others_see_its_label(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    with FakeGemini(script=[{"text": "First answer."}, {"text": "Second answer."}], api_key=API_KEY) as fake, \
            daemon(tmp_path, fake, "--state-dir", str(tmp_path / "state")) as (_, address):
        _two_turns(address, work)
        repl = _attach(tmp_path, work, address, "laptop")
        watcher = None
        try:
            repl.expect(r"Second answer\.", timeout=30)
            repl.expect(PROMPT)
            watcher = _attach(tmp_path, work, address, "phone", "--watch")
            watcher.expect(r"Ctrl-C leaves", timeout=30)
            repl.expect(r"· phone \(watching\) joined · 2 attached", timeout=20)
            ask(repl, "/server status")
            repl.expect(r"attached\s+you, phone \(watching\)")
            repl.expect(PROMPT)
            ask(repl, "/rewind")
            repl.expect(r"❯ 2\. second question")
            repl.send(ENTER)
            repl.expect(r"1\. Rewind conversation")
            repl.send("1")
            repl.expect(r"⟲ you rewound to before: second question \(1 prompt left\)", timeout=20)
            watcher.expect(r"⟲ laptop rewound to before: second question \(1 prompt left\)", timeout=20)
            repl.expect(PROMPT + "second question")  # the rewound prompt, back in the input
        finally:
            repl.close()
            if watcher is not None:
                watcher.close()
    assert "laptop rewound" not in repl.text and "you rewound" not in watcher.text


def test_a_watcher_says_you_for_a_replayed_prompt_its_label_sent(tmp_path):
    """The label is how the session knows a client (``attach`` gives its
    host's name): a watcher on the host that prompted sees its prompt as
    its own, and another host's as that host's."""
    work = tmp_path / "work"
    work.mkdir()
    with FakeGemini(script=[{"text": "First answer."}, {"text": "Laptop answer."}], api_key=API_KEY) as fake, \
            daemon(tmp_path, fake, "--state-dir", str(tmp_path / "state")) as (_, address):
        assert client(["--server", address, "-p", "first question"], cwd=work).returncode == 0
        repl = _attach(tmp_path, work, address, "laptop")
        try:
            repl.expect(r"First answer\.", timeout=30)
            repl.expect(PROMPT)
            ask(repl, "asked from the laptop")
            repl.expect(r"Laptop answer\.", timeout=20)
            repl.expect(PROMPT)
            repl.send(CTRL_D)
            assert repl.wait(timeout=20) == 0
        finally:
            repl.close()
        watchers = {label: _attach(tmp_path, work, address, label, "--watch", "--limit", "2")
                    for label in ("laptop", "phone")}
        try:
            for watcher in watchers.values():
                watcher.expect(r"Laptop answer\.", timeout=30)
                watcher.send(CTRL_C)
                watcher.wait(timeout=20)
        finally:
            for watcher in watchers.values():
                watcher.close()
    mine, theirs = watchers["laptop"].text, watchers["phone"].text
    assert "» terminal: first question" in mine and "» you: asked from the laptop" in mine, mine
    assert "» laptop: asked from the laptop" in theirs and "» you" not in theirs, theirs
    # The line saying who this is comes before the replay.
    assert mine.index("Ctrl-C leaves") < mine.index("» terminal: first question"), mine
