"""-i/--prompt-interactive and a positional prompt at a terminal: the REPL
opens and runs that prompt first (gemini-cli's meaning), under a real pty."""

from __future__ import annotations

import json
import os
import sys

import pytest

from tests.ui.repl.pty_driver import CTRL_D, PtyProcess

pytestmark = pytest.mark.timeout(60)

PROMPT = "› "


def _start(tmp_path, *args: str) -> PtyProcess:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "first answer"}, {"text": "second answer"}]))
    # CI=true makes a positional prompt one-shot (as gemini-cli does): a person at a terminal has no CI.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_")) and k != "CI"}
    env.update({"GEMINI_SPLIT_HOME": str(tmp_path / "home"), "HOME": str(tmp_path), "NO_COLOR": "1",
                "GEMINI_CLI_SYSTEM_SETTINGS_PATH": str(tmp_path / "none.json")})
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return PtyProcess([sys.executable, "-m", "gemini_split", "-m", f"scripted:{script}", *args],
                      env=env, cwd=str(work))


@pytest.mark.parametrize("args", [["-i", "tell me first"], ["tell", "me", "first"]])
def test_the_repl_starts_with_the_given_prompt(tmp_path, args):
    repl = _start(tmp_path, *args)
    try:
        repl.expect(r"first answer", timeout=20)
        repl.expect(PROMPT)
        repl.send(CTRL_D)
        assert repl.wait() == 0
    finally:
        repl.close()
