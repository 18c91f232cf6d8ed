"""A typical gemini-cli user's files, written into a config directory:
what the thin ``-p`` path must read on every run without growing slow
(``bench/oneshot.py --typical-setup``,
``tests/cli/daemon/test_oneshot_imports.py``; issue 41 item 7, issue 45
item 10).

In the config directory (``~/.gemini``, ``GEMINI_SPLIT_HOME``):

* ``settings.json`` with a comment, a ``BeforeTool`` hook and one MCP
  server (``mcp-server-time``, a test dependency; once a run or
  ``gemini-split mcp list`` has listed its tools, they come from the MCP
  cache and the server is started only when one is called);
* a custom command ``commands/review.toml``;
* an extension ``extensions/demo`` (a manifest, a context file, a command,
  and no ``.env``, as most extensions have none);
* a skill ``skills/pdf/SKILL.md`` whose frontmatter is ``name:`` and
  ``description:``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SETTINGS = """{
  // A user's settings: comments are allowed, as in gemini-cli.
  "general": {"vimMode": false},
  "hooks": {
    "BeforeTool": [{"matcher": "run_shell_command",
                    "hooks": [{"type": "command", "command": "true", "name": "check-shell"}]}]
  },
  "mcpServers": {"time": {"command": %s, "args": ["-m", "mcp_server_time"]}}
}
"""
SKILL = """---
name: pdf
description: Extract text and tables from PDF files, fill in forms, merge documents.
---

# PDF

Use `pdftotext -layout` for text and `qpdf` to merge.
"""


def write_typical_setup(config: Path) -> None:
    """Write the files the module's docstring lists into ``config``."""
    (config / "commands").mkdir(parents=True, exist_ok=True)
    (config / "settings.json").write_text(SETTINGS % json.dumps(sys.executable))
    (config / "commands" / "review.toml").write_text(
        'description = "Review the staged changes"\nprompt = """Review this diff:\n!{git diff --staged}\n"""\n')
    extension = config / "extensions" / "demo"
    (extension / "commands").mkdir(parents=True, exist_ok=True)
    (extension / "gemini-extension.json").write_text(json.dumps(
        {"name": "demo", "version": "1.0.0", "description": "A demo extension", "contextFileName": "DEMO.md"}))
    (extension / "DEMO.md").write_text("The demo extension's context.\n")
    (extension / "commands" / "hello.toml").write_text('prompt = "Say hello"\n')
    skill = config / "skills" / "pdf"
    skill.mkdir(parents=True, exist_ok=True)
    (skill / "SKILL.md").write_text(SKILL)


__all__ = ["write_typical_setup"]
