"""What the REPL imports to reach its first prompt: not what only a
command needs (lazy_imports.REPL_START_NEVER), loaded on its first use.
Not timed: bench/ measures the speed; this checks the cause."""

from __future__ import annotations

import sys

import pytest

from gemini_split.lazy_imports import REPL_START_NEVER

from tests.cli.daemon.test_oneshot_imports import RUN_AND_LIST, offending

from .pty_driver import PtyProcess
from .test_repl import PROMPT, _environ, ask, workdir  # noqa: F401 - fixtures


def _repl_listing(tmp_path, workdir, *typed: str) -> set[str]:
    """Every module loaded by a REPL that reached its prompt, had ``typed``
    entered (commands whose answers speak of checkpoints), and was left
    with /quit."""
    script = tmp_path / "script.json"
    script.write_text("[]")
    listing = tmp_path / "modules.txt"
    repl = PtyProcess([sys.executable, "-c", RUN_AND_LIST, str(listing), "-m", f"scripted:{script}"],
                      env=_environ(tmp_path, NO_COLOR="1"), cwd=str(workdir))
    try:
        repl.expect(PROMPT, timeout=30)
        for line in typed:
            ask(repl, line)
            repl.expect(r"(?i)checkpoint")  # its answer (the prompt's own echo shows the prompt sign too)
            repl.expect(PROMPT)
        ask(repl, "/quit")  # not Ctrl-D: at load, a Ctrl-D sent as the prompt redrew was seen to be lost
        assert repl.wait(timeout=30) == 0
    finally:
        repl.close()
    return set(listing.read_text().split())


@pytest.mark.timeout(90)
def test_the_repl_reaches_its_prompt_without_the_restore_menu_and_loads_it_for_restore(tmp_path, workdir):
    started = _repl_listing(tmp_path, workdir)
    assert "prompt_toolkit" in started and "gemini_split.ui.repl.slash_commands" in started  # it saw the REPL
    assert offending(started, REPL_START_NEVER) == []
    used = _repl_listing(tmp_path, workdir, "/restore")
    assert "gemini_split.ui.repl.commands.restore" in used
