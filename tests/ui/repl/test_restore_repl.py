"""``/restore`` in the REPL (issue 30): the checkpoints listed, one
restored after a question that names the files changed by hand."""

from __future__ import annotations

import json

import pytest

from .pty_driver import ENTER
from .test_repl import PROMPT, ask, start_repl, workdir  # noqa: F401  (fixtures)


def _write(name: str, content: str) -> list[dict]:
    return [{"function_calls": [{"name": "write_file", "args": {"file_path": name, "content": content}}]},
            {"text": f"Wrote {name}."}]


@pytest.mark.timeout(90)
def test_restore_lists_checkpoints_and_puts_files_back_after_asking_naming_hand_edits(start_repl, tmp_path, workdir):
    home = tmp_path / "home"
    home.mkdir()
    (home / "settings.json").write_text(json.dumps({"general": {"checkpointing": {"enabled": True}}}))
    repl = start_repl(_write("f1.txt", "one\n") + _write("f2.txt", "two\n") + _write("f3.txt", "three\n"),
                      "--approval-mode", "yolo")
    for n in (1, 2, 3):
        ask(repl, f"write f{n}")
        repl.expect(rf"Wrote f{n}\.txt\.")
        repl.expect(PROMPT)
    (workdir / "f1.txt").write_text("changed by hand\n")
    ask(repl, "/restore")
    ids = [repl.expect(rf"(\S+-f{n}\.txt-write_file)  write_file f{n}\.txt").group(1) for n in (1, 2, 3)]
    repl.expect(PROMPT)
    ask(repl, "/restore nope")
    repl.expect(r"no checkpoint 'nope'")
    repl.expect(PROMPT)
    ask(repl, f"/restore {ids[1]}")
    repl.expect(r"f1\.txt: put back  ← changed by hand since the checkpoint")
    repl.expect(r"f2\.txt: deleted \(created since\)")
    repl.expect(r"f1\.txt was changed since the checkpoint by something other than the agent's edit tools")
    repl.expect(r"2\. Do nothing")
    assert (workdir / "f3.txt").exists()  # nothing written before the answer
    repl.send("1")
    repl.expect(r"Restored 3 files\.")
    repl.expect(PROMPT)
    assert not (workdir / "f3.txt").exists()
    assert (workdir / "f1.txt").read_text() == "one\n"


@pytest.mark.timeout(90)
def test_restore_proposes_the_same_call_again_through_the_approval_question(start_repl, tmp_path, workdir):
    home = tmp_path / "home"
    home.mkdir()
    (home / "settings.json").write_text(json.dumps({"general": {"checkpointing": {"enabled": True}}}))
    repl = start_repl(_write("f1.txt", "one\n") + _write("f2.txt", "two\n") + _write("f3.txt", "three\n")
                      + [{"text": "Wrote f2 again."}])
    for n in (1, 2, 3):
        ask(repl, f"write f{n}")
        repl.expect(rf"Allow write_file: f{n}\.txt\?")
        repl.send("1")
        repl.expect(rf"Wrote f{n}\.txt\.")
        repl.expect(PROMPT)
    ask(repl, "/restore")
    second = repl.expect(r"(\S+-f2\.txt-write_file)  write_file f2\.txt").group(1)
    repl.expect(PROMPT)
    ask(repl, f"/restore {second}")
    repl.expect(r"2\. Do nothing")
    repl.send("1")
    repl.expect(r"Restored 2 files\.")
    # The same call, proposed again: asked as any call is, and run on yes.
    repl.expect(r"Create f2\.txt")
    repl.expect(r"Allow write_file: f2\.txt\?")
    assert sorted(p.name for p in workdir.iterdir()) == ["f1.txt", "notes.txt"]
    repl.send("1")
    repl.expect(r"Wrote f2 again\.")
    repl.expect(PROMPT)
    assert sorted(p.name for p in workdir.iterdir()) == ["f1.txt", "f2.txt", "notes.txt"]
