"""Issue 43 §5: ``/permissions trust [DIR]`` in the real REPL under a pty —
gemini-cli's "Modify Trust Level" menu, recorded in trustedFolders.json."""

from __future__ import annotations

import json
import os

import pytest

from .pty_driver import ENTER, ESC
from .test_repl import PROMPT, ask, start_repl, workdir  # noqa: F401 (fixtures)

pytestmark = pytest.mark.timeout(60)


def test_trust_this_folder_is_recorded_and_said_to_apply_at_the_next_start(start_repl, tmp_path, workdir):
    rules = tmp_path / "home" / "trustedFolders.json"
    repl = start_repl([])
    ask(repl, "/permissions trust")
    repl.expect(r"> Modify Trust Level")
    repl.expect(rf"Folder: {workdir}")
    repl.expect(r"Current Level: Not Set")
    repl.expect(r"❯ 1\. Trust this folder \(work\)")
    repl.expect(r"2\. Trust parent folder \(\S+\)")
    repl.expect(r"3\. Don't trust")
    repl.send(ENTER)
    repl.expect(r"Trusted \S+work \(recorded in \S+trustedFolders\.json\)\.")
    repl.expect(r"To apply the trust changes, restart gemini-split")
    repl.expect(PROMPT)
    assert json.loads(rules.read_text()) == {os.path.realpath(workdir): "TRUST_FOLDER"}

    ask(repl, "/permissions trust")
    repl.expect(r"Current Level: TRUST_FOLDER")
    repl.expect(r"❯ 1\. Trust this folder")
    repl.send(ESC)  # nothing changes
    repl.expect(PROMPT)
    other = tmp_path / "other"
    (other / "inner").mkdir(parents=True)
    ask(repl, f"/permissions trust {other}")
    repl.expect(rf"Folder: {other}")
    repl.send("3")
    repl.expect(r"Not trusting \S+other \(recorded in")
    repl.expect(PROMPT)
    assert json.loads(rules.read_text())[str(other)] == "DO_NOT_TRUST"
    assert "restart" not in repl.text.split("Not trusting")[-1]  # not this session's folder

    ask(repl, f"/permissions trust {workdir / 'notes.txt'}")
    repl.expect(r"Path is not a directory: [^›]*notes\.txt")
    ask(repl, "/permissions trust /no/such/dir")
    repl.expect(r"Error accessing path: /no/such/dir\. No such file or directory")
    ask(repl, "/permissions frob")
    repl.expect(r"usage: /permissions \[revoke N\|all\] \| trust \[DIR\]")
    repl.expect(PROMPT)


def test_a_folder_trusted_through_its_parent_says_so(start_repl, tmp_path, workdir):
    (tmp_path / "home").mkdir(exist_ok=True)
    (tmp_path / "home" / "trustedFolders.json").write_text(json.dumps({str(tmp_path): "TRUST_FOLDER"}))
    repl = start_repl([])
    ask(repl, "/permissions trust")
    repl.expect(r"Current Level: Not Set")
    repl.expect(r"Note: This folder behaves as a trusted folder because one of the parent folders is trusted\.")
    repl.send("3")
    repl.expect(r"Not trusting")
    repl.expect(r"To apply the trust changes, restart gemini-split")
    repl.expect(PROMPT)
