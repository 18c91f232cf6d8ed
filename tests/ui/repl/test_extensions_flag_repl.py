"""``-e`` in the REPL: ``/extensions list`` marks the extensions this
session uses, as ``-e`` chose them — the real REPL under a pty."""

from __future__ import annotations

import json

import pytest

from .test_repl import PROMPT, ask, start_repl, workdir  # noqa: F401 (fixtures)

pytestmark = pytest.mark.timeout(60)


def test_extensions_list_shows_the_ones_e_chose_for_this_session(start_repl, tmp_path):
    for name in ("alpha", "beta"):
        ext = tmp_path / "home" / "extensions" / name
        ext.mkdir(parents=True)
        (ext / "gemini-extension.json").write_text(json.dumps({"name": name, "version": "1.0.0"}))
    repl = start_repl([], "-e", "beta")
    ask(repl, "/extensions list")
    repl.expect(r"✗ alpha \(1\.0\.0\)")
    repl.expect(r"✓ beta \(1\.0\.0\)")
    repl.expect(PROMPT)
