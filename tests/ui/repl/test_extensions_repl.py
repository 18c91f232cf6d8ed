"""Issue 29 §3 in the REPL: ``/extensions list`` shows the installed
extensions and their commands are in ``/help`` — the real REPL under a pty."""

from __future__ import annotations

import json

import pytest

from .test_repl import PROMPT, ask, start_repl, workdir  # noqa: F401 (fixtures)

pytestmark = pytest.mark.timeout(60)


def test_extensions_list_shows_the_installed_ones_and_their_commands_are_offered(start_repl, tmp_path):
    ext = tmp_path / "home" / "extensions" / "my-ext"
    (ext / "commands").mkdir(parents=True)
    (ext / "gemini-extension.json").write_text(json.dumps({"name": "my-ext", "version": "2.0.0",
                                                           "excludeTools": ["web_fetch"]}))
    (ext / "commands" / "deploy.toml").write_text('description = "Deploy it"\nprompt = "deploy"\n')
    repl = start_repl([])
    ask(repl, "/extensions list")
    repl.expect(r"✓ my-ext \(2\.0\.0\)")
    repl.expect(r"Excluded tools:\s+web_fetch")
    repl.expect(PROMPT)
    ask(repl, "/help")
    repl.expect(r"/deploy \[ARGS\]\s+Deploy it \(extension command\)")
    repl.expect(PROMPT)
