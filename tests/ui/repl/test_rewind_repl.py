"""Issue 30, rewind, in the REPL under a pseudo-terminal: ``/rewind`` and
Esc twice list the earlier prompts (newest at the bottom) with the files
each step changed, offer gemini-cli's choices, put the files back, redraw
the conversation and put the rewound prompt back in the input."""

from __future__ import annotations

import pytest

from .pty_driver import ENTER, ESC
from .test_repl import PROMPT, ask, start_repl, workdir  # noqa: F401  (fixtures)

pytestmark = pytest.mark.timeout(90)


def _write(path: str, content: str) -> dict:
    return {"function_calls": [{"name": "write_file", "args": {"file_path": path, "content": content}}]}


SCRIPT = [
    _write("a.txt", "A1\n"), {"text": "Wrote a."},
    {"function_calls": [{"name": "write_file", "args": {"file_path": "a.txt", "content": "A2\n"}},
                        {"name": "write_file", "args": {"file_path": "b.txt", "content": "B\n"}}]},
    {"text": "Wrote a and b."},
    _write("c.txt", "C\n"), {"text": "Wrote c."},
]


def _three_turns(repl) -> None:
    for prompt, answer in (("turn one", r"Wrote a\."), ("turn two", r"Wrote a and b\."), ("turn three", r"Wrote c\.")):
        ask(repl, prompt)
        repl.expect(answer)
        repl.expect(PROMPT)


def test_esc_twice_lists_the_prompts_with_their_files_and_rewinds_conversation_and_files(start_repl, workdir):
    repl = start_repl(SCRIPT, "--yolo")
    _three_turns(repl)
    repl.send(ESC)
    repl.send(ESC)
    repl.expect(r"Rewind: the conversation goes back to just before the prompt you pick")
    repl.expect(r"1\. turn one\s+· 1 file changed")
    repl.expect(r"2\. turn two\s+· 2 files changed")
    repl.expect(r"❯ 3\. turn three\s+· 1 file changed")  # the newest, at the bottom, chosen first
    repl.send("2")
    repl.expect(r"Reverting code changes would:")
    repl.expect(r"a\.txt: put back its content from before")
    repl.expect(r"b\.txt: delete it")
    repl.expect(r"1\. Rewind conversation and revert code changes")
    repl.expect(r"4\. Do nothing")
    repl.send("1")
    repl.expect(r"rewound to before: turn two \(1 prompt left\)")
    repl.expect(r"a\.txt: put back\s+b\.txt: deleted \(the agent created it\)\s+c\.txt: deleted")
    repl.expect(r"the conversation as it is now \(1 prompt\)")
    repl.expect(r"» turn one")
    repl.expect(r"Wrote a\.")
    repl.expect(PROMPT + "turn two")  # the rewound prompt, back in the input
    assert {p.name: p.read_text() for p in workdir.iterdir()} == {"notes.txt": "the notes\n", "a.txt": "A1\n"}


def test_a_file_changed_by_hand_is_named_and_asked_about_and_only_the_conversation_when_nothing_changed(
        start_repl, workdir):
    repl = start_repl([*SCRIPT, {"text": "Just talk."}], "--yolo")
    _three_turns(repl)
    (workdir / "c.txt").write_text("my own c\n")
    ask(repl, "/rewind")
    repl.expect(r"❯ 3\. turn three")
    repl.send(ENTER)
    repl.expect(r"c\.txt: delete it \(the agent created it\) — changed since the agent's edit: you will be asked")
    repl.send("1")
    repl.expect(r"c\.txt changed since the agent's edit\. Put it back anyway\?")
    repl.send("1")  # no, keep it
    repl.expect(r"c\.txt: left as it is — changed since the agent's edit")
    repl.expect(r"the conversation as it is now \(2 prompts\)")
    assert (workdir / "c.txt").read_text() == "my own c\n"
    repl.expect(PROMPT + "turn three")
    repl.send("\x15")  # Ctrl-U: empty the line
    ask(repl, "just talk")
    repl.expect(r"Just talk\.")
    repl.expect(PROMPT)
    ask(repl, "/rewind")
    repl.expect(r"❯ 3\. just talk\r*\n")  # no file changed in that step
    repl.send(ENTER)
    repl.expect(r"1\. Rewind conversation\s+2\. Do nothing")  # the file choices hidden
    repl.send(ESC)
    repl.expect(PROMPT)


@pytest.mark.timeout(120)
def test_a_repl_attached_to_the_session_redraws_it_when_another_client_rewinds(tmp_path):
    """Every attached client redraws: a REPL attached to a session on
    ``serve`` shows the rewind as a line and the conversation as it now
    is, while its own prompt stays open."""
    import sys

    from gemini_split.testing.fake_gemini import FakeGemini

    from tests.e2e.test_serve_e2e import API_KEY, _env, client, daemon
    from tests.inprocess import cli
    from .pty_driver import PtyProcess
    from .test_repl import _environ

    work = tmp_path / "work"
    work.mkdir()
    script = [{"text": "First answer."}, {"text": "Second answer."}]
    with FakeGemini(script=script, api_key=API_KEY) as fake, \
            daemon(tmp_path, fake, "--state-dir", str(tmp_path / "state")) as (_, address):
        for n, prompt in enumerate(("first question", "second question")):
            done = client(["--server", address, *(("--resume", "latest") if n else ()), "-p", prompt], cwd=work)
            assert done.returncode == 0, done.stderr
        repl = PtyProcess([sys.executable, "-m", "gemini_split", "attach", "latest", "--server", address,
                           "--label", "laptop"], env=_environ(tmp_path, NO_COLOR="1"), cwd=str(work))
        try:
            repl.expect(r"Second answer\.", timeout=30)  # the last turn, replayed
            repl.expect(PROMPT)
            rewound = cli(["--server", address, "--resume", "latest", "--rewind-to", "2"],
                          environ=_env(HOME=str(tmp_path), GEMINI_SPLIT_HOME=str(tmp_path / "home")), cwd=work)
            assert rewound.returncode == 0, rewound.stderr
            repl.expect(r"⟲ .* rewound to before: second question \(1 prompt left\)")
            repl.expect(r"the conversation as it is now \(1 prompt\)")
            repl.expect(r"» first question")
            repl.expect(r"First answer\.")
            repl.expect(PROMPT)
        finally:
            repl.close()
