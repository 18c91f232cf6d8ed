"""Issue 43 §5: ``/bug`` and ``/docs`` in the real REPL under a pty — the
report carries ``/about``'s facts, never a secret, and says where to send
it; ``/docs`` says where the documentation is."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote

import pytest

import gemini_split

from .test_repl import PROMPT, ask, start_repl, workdir  # noqa: F401 (fixtures)

pytestmark = pytest.mark.timeout(60)


def test_bug_prints_the_facts_and_fills_the_settings_url_template(start_repl, tmp_path):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "settings.json").write_text(json.dumps({"advanced": {"bugCommand": {
        "urlTemplate": "https://tracker.example/new?title={title}&info={info}"}}}))
    repl = start_repl([], GEMINI_API_KEY="sk-never-shown")
    session = repl.expect(r"session (s-\w+)").group(1)
    ask(repl, "/bug crash on start")
    repl.expect(r"Bug report: crash on start")
    repl.expect(rf"\* \*\*CLI Version:\*\* gemini-split {gemini_split.__version__}")
    repl.expect(rf"\* \*\*Session ID:\*\* {session}")
    repl.expect(r"\* \*\*Operating System:\*\* linux ")
    repl.expect(r"\* \*\*Model Version:\*\* scripted:\S+")
    repl.expect(r"\* \*\*Memory Usage:\*\* [\d.]+ MB \(peak\)")
    repl.expect(r"To submit your bug report, please open the following URL in your browser:")
    url = repl.expect(r"https://tracker\.example/new\?title=(\S+)").group(0)
    repl.expect(r"/chat share FILE\.md")
    repl.expect(PROMPT)
    assert "title=crash%20on%20start&info=" in url
    assert f"* **Session ID:** {session}" in unquote(url)
    assert "sk-never-shown" not in repl.text


def test_bug_without_a_tracker_says_so_and_docs_points_at_the_documentation(start_repl):
    repl = start_repl([])
    ask(repl, "/bug")
    repl.expect(r"Bug report\r?\n")
    repl.expect(r"\* \*\*Auth Type:\*\* ")
    repl.expect(r"names no issue tracker")
    repl.expect(r"advanced\.bugCommand\.urlTemplate")
    repl.expect(PROMPT)
    ask(repl, "/docs")
    root = Path(gemini_split.__file__).resolve().parent.parent
    repl.expect(rf"gemini-split's documentation: {root / 'README.md'} and {root / 'docs'}/")
    repl.expect(r"gemini-cli's documentation \(the settings, files and formats gemini-split shares\): "
                r"https://goo\.gle/gemini-cli-docs")
    repl.expect(PROMPT)
    ask(repl, "/about")
    repl.expect(r"version\s+gemini-split ")
    repl.expect(r"system prompt\s+built-in")
    repl.expect(PROMPT)
