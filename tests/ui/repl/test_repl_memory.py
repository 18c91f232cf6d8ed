"""/memory in the REPL, through a pseudo-terminal: show the context files,
refresh them from disk, add a fact to the user's memory file."""

from __future__ import annotations

import pytest

from .test_repl import PROMPT, ask, start_repl, workdir  # noqa: F401 - fixtures

pytestmark = pytest.mark.timeout(60)


def test_memory_show_refresh_and_add(start_repl, workdir, tmp_path):
    (workdir / "GEMINI.md").write_text("PROJECT-RULE-ONE: tabs, not spaces\n")
    repl = start_repl([], GEMINI_CLI_TRUST_WORKSPACE="true")
    ask(repl, "/memory show")
    repl.expect(r"GEMINI\.md\s+\(project,\s+35\s+characters\)")  # a long path may wrap
    repl.expect(r"PROJECT-RULE-ONE")
    repl.expect(PROMPT)
    (workdir / "GEMINI.md").write_text("PROJECT-RULE-TWO\n")
    ask(repl, "/memory refresh")
    repl.expect(r"Context refreshed: 1 file; the next prompt carries it")
    repl.expect(PROMPT)
    ask(repl, "/memory add my name is Ada")
    repl.expect(r"Okay, I've remembered that: \"my name is Ada\"")
    repl.expect(r"Context refreshed: 2 files")
    repl.expect(PROMPT)
    ask(repl, "/memory show")
    repl.expect(r"## Gemini Added Memories\s+- my name is Ada")
    repl.expect(r"PROJECT-RULE-TWO")
    assert "PROJECT-RULE-ONE" not in repl.text.split("Context refreshed")[-1]
    assert "- my name is Ada" in (tmp_path / "home" / "GEMINI.md").read_text()
    ask(repl, "/memory frobnicate")
    repl.expect(r"usage: /memory show \| list \| refresh \| add TEXT")
