""".geminiignore, as gemini-cli honours it: the workspace root's file hides
paths from glob, grep_search and list_directory unless the call opts out."""

from __future__ import annotations

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from .helpers import API_KEY, Sandbox

pytestmark = pytest.mark.timeout(60)


def _responses(fake):
    return [p["functionResponse"]["response"] for r in fake.requests for c in r["body"]["contents"]
            for p in c["parts"] if "functionResponse" in p]


def test_geminiignore_hides_paths_unless_the_call_opts_out(tmp_path):
    box = Sandbox(tmp_path).setup()
    (box.project / ".geminiignore").write_text("secrets/\n*.key\n")
    (box.project / "secrets").mkdir()
    (box.project / "secrets" / "token.txt").write_text("hidden\n")
    (box.project / "app.key").write_text("k\n")
    (box.project / "main.py").write_text("print('hidden?')\n")
    calls = {"function_calls": [
        {"name": "glob", "args": {"pattern": "**/*"}},
        {"name": "glob", "args": {"pattern": "**/*", "respect_gemini_ignore": False}},
        {"name": "list_directory", "args": {"dir_path": "."}},
        {"name": "list_directory", "args": {"dir_path": ".", "file_filtering_options": {"respect_gemini_ignore": False}}},
        {"name": "grep_search", "args": {"pattern": "hidden"}},
    ]}
    with FakeGemini(script=[calls, {"text": "ok"}], api_key=API_KEY) as fake:
        result = box.run(["-p", "look"], fake=fake)
        glob_in, glob_all, ls_in, ls_all, grep = (str(r) for r in _responses(fake))
    assert result.status == 0, result.stderr
    assert "main.py" in glob_in and "token.txt" not in glob_in and "app.key" not in glob_in
    assert "secrets/token.txt" in glob_all and "app.key" in glob_all
    assert "secrets" not in ls_in and "app.key" not in ls_in and "main.py" in ls_in
    assert "[DIR] secrets" in ls_all and "app.key" in ls_all
    assert "main.py" in grep and "token.txt" not in grep
