"""/ide in the real REPL (under a pseudo-terminal) with a companion built
from gemini-cli's spec running as a process of its own: the status
wording, ``ide.enabled`` saved, the editor context in the prompt the model
gets, and an edit accepted in the editor written with the editor's content."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ide_companion import EDITED_MARK
from tests.ui.repl.test_repl import PROMPT, ask, start_repl, workdir  # noqa: F401 - fixtures

pytestmark = pytest.mark.timeout(60)

CONTEXT = {"workspaceState": {"openFiles": [
    {"path": "/w/src/main.py", "timestamp": 5, "isActive": True, "cursor": {"line": 3, "character": 7}}]}}


@pytest.fixture
def companion(tmp_path: Path, workdir: Path):
    (tmp_path / "tmp").mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "tests.ide_companion", str(workdir), json.dumps(CONTEXT)],
                            stdout=subprocess.PIPE, text=True, env={"TMPDIR": str(tmp_path / "tmp"),
                                                                     "PATH": "/usr/bin:/bin"},
                            cwd=Path(__file__).parents[2])
    try:
        assert proc.stdout.readline().strip().isdigit()
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_ide_status_enable_context_install_disable(start_repl, companion, tmp_path):
    repl = start_repl([], TMPDIR=str(tmp_path / "tmp"))  # no script: the model echoes the prompt it got
    ask(repl, "/ide status")  # ide.enabled is false by default: no connection
    repl.expect(r"🔴 Disconnected: IDE integration is currently disabled\. To enable it, run /ide enable\.")
    repl.expect(PROMPT)
    ask(repl, "/ide enable")
    repl.expect(r"🟢 Connected to VS Code")
    repl.expect(PROMPT)
    assert json.loads((tmp_path / "home" / "settings.json").read_text())["ide"]["enabled"] is True
    ask(repl, "/ide status")
    repl.expect(r"Open files:\s+- main\.py \(active\)")
    repl.expect(PROMPT)
    ask(repl, "what am I looking at")
    repl.expect(r"Echo: Here is the user's editor context as a JSON object\. This is for your information only\.")
    repl.expect(r'"path": "/w/src/main\.py"')
    repl.expect(r"what am I looking at")
    repl.expect(PROMPT)
    ask(repl, "/ide install")
    repl.expect(r"No installer is available for VS Code\. Please install the 'Gemini CLI Companion' extension")
    repl.expect(r"gemini-cli-vscode-ide-companion")
    repl.expect(PROMPT)
    ask(repl, "/ide disable")
    repl.expect(r"🔴 Disconnected: IDE integration disabled\. To enable it again, run /ide enable\.")
    repl.expect(PROMPT)
    assert json.loads((tmp_path / "home" / "settings.json").read_text())["ide"]["enabled"] is False


def test_with_ide_enabled_an_edit_is_accepted_in_the_editor(start_repl, companion, tmp_path, workdir):
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "settings.json").write_text('{"ide": {"enabled": true}}')
    repl = start_repl([{"function_calls": [{"name": "write_file", "args": {"file_path": "new.py",
                                                                         "content": "x = 1\n"}}]},
                       {"text": "written"}], TMPDIR=str(tmp_path / "tmp"))
    ask(repl, "write it")
    repl.expect(r"written")
    repl.expect(PROMPT)
    assert (workdir / "new.py").read_text() == "x = 1\n" + EDITED_MARK
