"""Issue 31 §11 in the REPL: with ``GEMINI_SYSTEM_MD`` the toolbar shows
gemini-cli's ``|⌐■_■|`` and ``/about`` says where the system prompt
comes from; a missing file stops the REPL before it starts, with
gemini-cli's message."""

from __future__ import annotations

import os
import re
import sys

import pytest

from .pty_driver import PtyProcess
from .test_repl import PROMPT, _environ, ask, start_repl, workdir  # noqa: F401  (fixtures)

pytestmark = pytest.mark.timeout(90)


def test_a_custom_system_prompt_shows_in_the_toolbar_and_in_about(start_repl, workdir):  # noqa: F811
    (workdir / "mine.md").write_text("You are CUSTOM.\n")
    repl = start_repl([], GEMINI_SYSTEM_MD="mine.md")
    repl.expect(r"approval default · \|⌐■_■\|")
    ask(repl, "/about")
    repl.expect(r"system prompt\s+\|⌐■_■\| custom, from ")
    repl.expect(r"mine\.md\s+\(GEMINI_SYSTEM_MD\)")
    repl.expect(PROMPT)


def test_the_built_in_prompt_shows_no_indicator(start_repl):  # noqa: F811
    repl = start_repl([])
    ask(repl, "/about")
    repl.expect(r"system prompt\s+built-in")
    repl.expect(PROMPT)
    assert "⌐■_■" not in repl.text


def test_a_missing_file_stops_the_repl_with_gemini_clis_message(tmp_path, workdir):  # noqa: F811
    repl = PtyProcess([sys.executable, "-m", "gemini_split", "-m", "scripted:/dev/null"],
                      env=_environ(tmp_path, GEMINI_SYSTEM_MD="1"), cwd=str(workdir), rows=40, cols=200)
    try:
        repl.expect(r"missing system prompt file '" + re.escape(os.path.join(workdir, ".gemini", "system.md")) + "'",
                    timeout=30)
        assert repl.wait() != 0
    finally:
        repl.close()


def test_memory_refresh_after_the_file_went_says_so_and_the_repl_goes_on(start_repl, workdir):  # noqa: F811
    (workdir / "mine.md").write_text("You are CUSTOM.\n")
    repl = start_repl([], GEMINI_SYSTEM_MD="mine.md")
    (workdir / "mine.md").unlink()
    ask(repl, "/memory refresh")
    repl.expect(r"not refreshed: missing system prompt file")
    repl.expect(r"mine\.md")
    repl.expect(PROMPT)
    ask(repl, "still here")
    repl.expect(r"Echo: still here")
    assert "Internal error" not in repl.text
